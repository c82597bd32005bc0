"""A webhook made ready ahead of its start: its address resolved and checked, a connection to it
opened while its pack holds (at most a bounded number a process) and its request written and held
on it, and at the start that request sent if the server still holds the connection open, or made
afresh on a new connection if not."""

from __future__ import annotations

import http.client
import resource
import socket
import ssl
import threading
from datetime import datetime, timedelta
from typing import Any

from punctual.tasks import PREPARE_AHEAD_SECONDS, Awaited, TaskContext
from punctual.tasks.http_wire import (
    Call,
    Connection,
    answer_on,
    exchange,
    pinned_connection,
    request_parts,
    send_on,
    target,
    timeout_for,
    write_ahead,
)
from punctual.tasks.netguard import OutboundUrl


def prepare_call(params: Call, context: TaskContext) -> PreparedCall:
    """The URL read and guarded, its host resolved and the address checked, and a connection to
    that address opened (TLS handshake and all) when the start is at most PREPARE_AHEAD_SECONDS
    away: not a byte of the request is sent. TaskFailed for a URL or address refused (the start
    runs cold, and checks again)."""
    url, addresses = target(params, context)
    now = context.clock.now()
    ahead = (context.scheduled_at - now).total_seconds()
    connection: Connection | None = None
    if ahead <= PREPARE_AHEAD_SECONDS and _OPEN_AHEAD.acquire(blocking=False):
        # An early connect gets no longer than the time left before the start (a second at
        # least): one slower is dropped and made afresh then, with the task's whole timeout, so
        # that a start never ends later than a cold one would by more than that second.
        connect_timeout = min(timeout_for(params, context), max(ahead, EARLY_CONNECT_MIN_SECONDS))
        try:
            connection = pinned_connection(url, addresses[0], connect_timeout)
            connection.connect()
            # Written for its start at the instant (signed for it) and held, not a byte sent: the
            # start then only sends it. Sent later than the instant, its timestamp is that much
            # older; a connection is used at most PREPARED_IDLE_SECONDS after this.
            body, headers = request_parts(params, context, at=context.scheduled_at)
            write_ahead(connection, params.method, url.target, body, headers)
        except BaseException as exc:
            # Whatever failed, the slot and the socket are given back: a slot kept would leave
            # every later start of the process cold once all were lost.
            if connection is not None:
                connection.close()
            connection = None
            _OPEN_AHEAD.release()
            if not isinstance(exc, (OSError, http.client.HTTPException)):
                raise  # (tasks.prepare logs it; the start runs cold)
            # (the start connects afresh, and fails, if it must, as run does)
    return PreparedCall(params, url, addresses[0], connection, now, _start_of(context))


# A connection is opened at most PREPARE_AHEAD_SECONDS (15 s) before its start (a pack taken sooner
# prepares its members from then), and one that has waited idle longer than PREPARED_IDLE_SECONDS is
# not used (that bound's few seconds more are for a start that comes late: its turn on a thread, a
# busy CPU). That is within the time usual servers give a new connection to send its request:
# nginx's client_header_timeout (60 s by default), Apache's mod_reqtimeout (20 s for the first byte
# of the headers), Node.js's headersTimeout (60 s), an AWS load balancer's idle timeout (60 s). A
# server that lets go sooner costs a fresh connect at the start, never a failure.
PREPARED_IDLE_SECONDS = 20.0
EARLY_CONNECT_MIN_SECONDS = 1.0
# How long an answer taken after its timeout ended is waited for: one there already is read.
LATE_ANSWER_WAIT_SECONDS = 0.01
# Descriptors kept for the process's own use (the SDK's connections, logs, the runtime's) before any
# is held open ahead of a start, and the most of a process's limit counted.
RESERVED_DESCRIPTORS = 24
DESCRIPTORS_COUNTED = 20_000


def connections_max(descriptors: int) -> int:
    """Connections a process with this many file descriptors holds open ahead of their starts at most;
    more start cold. Half of what is left beside its own, the other half for starts that connect
    then: on Lambda (1,024 descriptors an environment) 500, a default pack's worth (Settings.pack_size).
    A process that stands for many environments (the local stack's) has a higher limit and holds more."""
    if descriptors == resource.RLIM_INFINITY or descriptors > DESCRIPTORS_COUNTED:
        descriptors = DESCRIPTORS_COUNTED
    return max(0, descriptors - RESERVED_DESCRIPTORS) // 2


PREPARED_CONNECTIONS_MAX = connections_max(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
_OPEN_AHEAD = threading.BoundedSemaphore(PREPARED_CONNECTIONS_MAX)

# What a send on a connection the server let go of meets. When the request's head could not go out
# whole on the connection opened ahead, the server took no request on it, and the request is sent
# again, once, on a connection of its own (what RFC 9110 section 9.2.2 lets a client retry). Never
# after that: an answer that does not come may follow a request the server acted on.
_LET_GO = (
    BrokenPipeError,
    ConnectionResetError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class PreparedCall:
    """An `http` task prepared ahead of its start: `fire` sends its request, on the connection opened
    ahead if the server still holds it open, and reads the answer as `HttpTask.run` does. `launch`
    sends it on that connection and returns: `fire` then only reads the answer."""

    def __init__(
        self,
        params: Call,
        url: OutboundUrl,
        address: str,
        connection: Connection | None,
        prepared_at: datetime,
        written_for: tuple[Any, ...] = (),
    ) -> None:
        self._params = params
        self._url = url
        self._address = address  # (checked by the guard: a fresh connect goes there too)
        self._connection = connection
        self._prepared_at = prepared_at
        self._written_for = written_for  # the start the held connection's request is written for
        self._lock = threading.Lock()
        # Launched: the connection its request went out on, what went wrong if anything did, and
        # when its timeout ends (the answer gets what is left of it, however late it is taken).
        self._launched: Connection | None = None
        self._launch_error: BaseException | None = None
        self._answer_by: datetime | None = None

    def launch(self, context: TaskContext) -> bool:
        timeout = timeout_for(self._params, context)
        connection = self._take(context, timeout)
        if connection is None:
            return False
        self._answer_by = context.clock.now() + timedelta(seconds=timeout)
        try:
            connection.send_written()
        except _LET_GO as exc:
            if not connection.sent:
                connection.close()  # (the server took no request on it: `fire` connects afresh)
                return False
            self._launch_error = exc
        except Exception as exc:
            self._launch_error = exc  # (reported by `fire`, as a send that fails there would be)
        self._launched = connection
        return True

    def fire(self, context: TaskContext) -> Any:
        if self._launched is None:
            timeout = timeout_for(self._params, context)
            started = context.clock.now()
            if not self.launch(context):
                # Not sent on the connection opened ahead (none held, or its server let go before
                # any of the request went out): sent on one of its own, with what is left of the
                # timeout (the execution's lease and Lambda's limit count on a start taking no
                # longer than its timeout).
                left = timeout - (context.clock.now() - started).total_seconds()
                return exchange(lambda: self._sent_afresh(context, left))
        return exchange(lambda: self._answer(context))

    def _sent_afresh(self, context: TaskContext, timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
        """The request made now and sent on a connection of its own, and its answer."""
        if timeout <= 0:
            raise TimeoutError("timed out")
        params, url = self._params, self._url
        body, headers = request_parts(params, context)
        connection = pinned_connection(url, self._address, timeout)
        return send_on(connection, params.method, url.target, body, headers)

    def launches(self) -> bool:
        return self._connection is not None

    def awaited(self) -> Awaited | None:
        connection = self._launched
        if connection is None or connection.sock is None or self._answer_by is None:
            return None
        return Awaited(connection.sock, self._answer_by)

    def _answer(self, context: TaskContext) -> tuple[http.client.HTTPResponse, bytes]:
        """The answer to the request `launch` sent, within what is left of its timeout."""
        connection = self._launched
        assert connection is not None
        try:
            if self._launch_error is not None:
                raise self._launch_error
            if connection.sock is not None and self._answer_by is not None:
                # (an answer already come is taken however late its turn: only waiting is bounded)
                left = (self._answer_by - context.clock.now()).total_seconds()
                connection.sock.settimeout(max(left, LATE_ANSWER_WAIT_SECONDS))
            return answer_on(connection)
        finally:
            connection.close()

    def close(self) -> None:
        connection = self._held()
        if connection is not None:
            connection.close()
        if self._launched is not None:
            self._launched.close()

    def _held(self) -> Connection | None:
        """The connection held open ahead, no longer held (each is handed out once)."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            _OPEN_AHEAD.release()
        return connection

    def _take(self, context: TaskContext, timeout: float) -> Connection | None:
        """The connection opened ahead, if it is still of use: not idle too long, and open at the
        server's end (which answers nothing before a request: anything it sent is a goodbye)."""
        connection = self._held()
        if connection is None:
            return None
        idle = (context.clock.now() - self._prepared_at).total_seconds()
        if (
            idle > PREPARED_IDLE_SECONDS
            or _start_of(context) != self._written_for
            or connection.sock is None
            or not _still_open(connection.sock)
        ):
            connection.close()
            return None
        connection.timeout = timeout
        connection.sock.settimeout(timeout)
        return connection


def _still_open(sock: socket.socket) -> bool:
    """Whether the server's end of a connection no request went out on yet is still open: nothing to
    read from it."""
    try:
        sock.setblocking(False)
        if isinstance(sock, ssl.SSLSocket):
            # (reading takes in what a server may send unasked after the handshake, TLS 1.3's session
            # tickets; wanting more means nothing else is there)
            sock.recv(1)
        else:
            sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return True
    except OSError:
        return False
    return False  # the end of the stream, or what a server says as it lets go (a 408)


def _start_of(context: TaskContext) -> tuple[Any, ...]:
    """What a request is written for: a start of one attempt of one execution."""
    return (context.job_id, context.execution_id, context.scheduled_at, context.attempt, context.job_name)
