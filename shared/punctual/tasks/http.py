"""The `http` task: call a webhook, carrying the execution's identity so that receivers can de-duplicate."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from punctual.domain.errors import InvalidRequest
from punctual.domain.validation import JSON_NUMBER
from punctual.platform import signing
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import (
    ANSWER_PREVIEW_BYTES,
    Prepared,
    TaskContext,
    TaskFailed,
    TaskPolicy,
    decode_answer,
    register,
    retryable_status,
)
from punctual.tasks.netguard import (
    MAX_URL_LENGTH,
    AddressRefused,
    BadUrl,
    OutboundUrl,
    check_url,
    parse_url,
    resolve_url,
)

_RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class HttpParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Kept as given: pydantic's URL types rewrite what they read (`http:///x` into `http://x/`, a
    # line break dropped), so the URL is read by the guard's own parser and stored unchanged.
    url: str = Field(
        json_schema_extra={"format": "uri", "minLength": 1, "maxLength": MAX_URL_LENGTH},
        description="http or https URL to call, absolute, as RFC 3986 writes it (no user information, "
        "no fragment); sent as given.",
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")
    body: Any = Field(default=None, description="JSON body, sent with Content-Type application/json.")
    timeout_seconds: Annotated[float | None, JSON_NUMBER] = Field(
        default=None, gt=0, le=300, description="Per-request timeout."
    )

    @field_validator("url")
    @classmethod
    def _absolute_http_url(cls, value: str) -> str:
        try:
            parse_url(value)
        except BadUrl as exc:
            raise PydanticCustomError("url_parsing", str(exc)) from None
        return value

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("headers")
    @classmethod
    def _headers_allowed(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header_value in value.items():
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            if name.lower() in _RESERVED_HEADERS or name.lower().startswith("x-punctual-"):
                raise ValueError(f"header {name!r} is set by Punctual")
            if any(c in header_value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} has a line break in its value")
            try:
                header_value.encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"header {name!r} has characters HTTP cannot carry (latin-1 only)") from None
        return value


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to an address already checked by the guard, not to a fresh lookup of the host."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        # Whether a send of the request went out whole. The first is the request's head: until it is
        # out, no server can have acted on the request, and it may go again on another connection.
        self.sent = False

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)

    def send(self, data: Any) -> None:
        super().send(data)
        self.sent = True


_TLS: ssl.SSLContext | None = None
_TLS_LOCK = threading.Lock()


def _tls_context() -> ssl.SSLContext:
    """The system's certificate authorities and TLS defaults, loaded once a process: loading them
    for each connection would be most of a TLS webhook's CPU (bench.pack_fire --tls measures it),
    and they do not change under a running process. (A context serves many threads.)"""
    global _TLS
    with _TLS_LOCK:
        if _TLS is None:
            _TLS = ssl.create_default_context()
        return _TLS


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=_tls_context())
        self._address = address
        self.sent = False  # (as _PinnedHTTPConnection.sent)

    def send(self, data: Any) -> None:
        super().send(data)
        self.sent = True

    def connect(self) -> None:
        # The name is made ASCII before there is a socket: wrap_socket fails on one it cannot carry
        # once it has taken the socket over, and nothing could close that socket but the collector.
        server_hostname = self.host.encode("idna").decode("ascii")
        raw = socket.create_connection((self._address, self.port), self.timeout)
        try:
            self.sock = self._context.wrap_socket(raw, server_hostname=server_hostname)  # type: ignore[attr-defined]
        except BaseException:
            raw.close()  # (nothing to close if wrap_socket took it over: it closes it when it fails)
            raise


class HttpTask:
    name = "http"
    description = (
        "Calls a URL. Headers X-Punctual-Job-Id, X-Punctual-Execution-Id, X-Punctual-Scheduled-At and "
        "X-Punctual-Attempt identify the execution. 2xx succeeds; 408, 429, 5xx and network errors are "
        "retried; other statuses fail at once. Redirects are not followed. A job with a signing secret "
        "signs each request (Standard Webhooks: webhook-id, the execution id; webhook-timestamp; "
        "webhook-signature)."
    )
    params_model: type[BaseModel] = HttpParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        assert isinstance(params, HttpParams)
        # What can be refused without a lookup is refused now, rather than at every run: a literal
        # address and a name that always means this machine. Other names are checked when they are
        # resolved, at run time: their addresses may change.
        try:
            check_url(params.url, policy.allowed_networks)
        except (BadUrl, AddressRefused) as exc:
            raise InvalidRequest(f"task.params.url: {exc}", field="task.params.url") from None

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, HttpParams)
        url, addresses = _target(params, context)
        timeout = _timeout(params, context)
        body, headers = _request(params, context)
        connection = _connection(url, addresses[0], timeout)
        return _exchange(lambda: _send(connection, params.method, url.target, body, headers))

    def prepare(self, params: BaseModel, context: TaskContext) -> Prepared:
        """The URL read and guarded, its host resolved and the address checked, and a connection to
        that address opened (TLS handshake and all) when the start is at most PREPARED_AHEAD_SECONDS
        away: not a byte of the request is sent. TaskFailed for a URL or address refused (the start
        runs cold, and checks again)."""
        assert isinstance(params, HttpParams)
        url, addresses = _target(params, context)
        now = context.clock.now()
        ahead = (context.scheduled_at - now).total_seconds()
        connection: _Connection | None = None
        if ahead <= PREPARED_AHEAD_SECONDS and _OPEN_AHEAD.acquire(blocking=False):
            # An early connect gets no longer than the time left before the start (a second at
            # least): one slower is dropped and made afresh then, with the task's whole timeout, so
            # that a start never ends later than a cold one would by more than that second.
            connect_timeout = min(_timeout(params, context), max(ahead, EARLY_CONNECT_MIN_SECONDS))
            try:
                connection = _connection(url, addresses[0], connect_timeout)
                connection.connect()
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
        return PreparedCall(params, url, addresses[0], connection, now)


# A connection is opened at most this long before its start, and one that has waited idle longer
# than PREPARED_IDLE_SECONDS is not used (that bound's few seconds more are for a start that comes
# late: its turn on a thread, a busy CPU). A pack's members are prepared at most its lead before
# their instant (Settings.lead_max_seconds, at most 15 s). That is within the time usual servers give
# a new connection to send its request: nginx's client_header_timeout (60 s by default), Apache's
# mod_reqtimeout (20 s for the first byte of the headers), Node.js's headersTimeout (60 s), an AWS
# load balancer's idle timeout (60 s). A server that lets go sooner costs a fresh connect at the
# start, never a failure.
PREPARED_AHEAD_SECONDS = 15.0
PREPARED_IDLE_SECONDS = 20.0
EARLY_CONNECT_MIN_SECONDS = 1.0
# Connections a process holds open ahead of their starts at most; more start cold. A default pack's
# worth (Settings.pack_size): a pack started at once (fire_threads) then needs no socket besides
# them, within Lambda's 1,024 descriptors with the SDK's beside them.
PREPARED_CONNECTIONS_MAX = 500
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

_Connection = _PinnedHTTPConnection | _PinnedHTTPSConnection


class PreparedCall:
    """An `http` task prepared ahead of its start: `fire` sends its request, on the connection opened
    ahead if the server still holds it open, and reads the answer as `HttpTask.run` does."""

    def __init__(
        self,
        params: HttpParams,
        url: OutboundUrl,
        address: str,
        connection: _Connection | None,
        prepared_at: datetime,
    ) -> None:
        self._params = params
        self._url = url
        self._address = address  # (checked by the guard: a fresh connect goes there too)
        self._connection = connection
        self._prepared_at = prepared_at
        self._lock = threading.Lock()

    def fire(self, context: TaskContext) -> Any:
        params, url = self._params, self._url
        timeout = _timeout(params, context)
        body, headers = _request(params, context)

        def on(connection: _Connection) -> tuple[http.client.HTTPResponse, bytes]:
            return _send(connection, params.method, url.target, body, headers)

        def send() -> tuple[http.client.HTTPResponse, bytes]:
            started = context.clock.now()
            ahead = self._take(context, timeout)
            if ahead is None:
                return on(_connection(url, self._address, timeout))
            try:
                return on(ahead)
            except _LET_GO:
                if ahead.sent:
                    # The server may hold the request, and may have acted on it (one that closes
                    # without answering looks the same from here): it fails as a cold start would.
                    raise
            # Sent again with what is left of the timeout: the execution's lease and Lambda's limit
            # count on a start taking no longer than its timeout.
            left = timeout - (context.clock.now() - started).total_seconds()
            if left <= 0:
                raise TimeoutError("timed out")
            return on(_connection(url, self._address, left))

        return _exchange(send)

    def close(self) -> None:
        connection = self._held()
        if connection is not None:
            connection.close()

    def _held(self) -> _Connection | None:
        """The connection held open ahead, no longer held (each is handed out once)."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            _OPEN_AHEAD.release()
        return connection

    def _take(self, context: TaskContext, timeout: float) -> _Connection | None:
        """The connection opened ahead, if it is still of use: not idle too long, and open at the
        server's end (which answers nothing before a request: anything it sent is a goodbye)."""
        connection = self._held()
        if connection is None:
            return None
        idle = (context.clock.now() - self._prepared_at).total_seconds()
        if idle > PREPARED_IDLE_SECONDS or connection.sock is None or not _still_open(connection.sock):
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


def _target(params: HttpParams, context: TaskContext) -> tuple[OutboundUrl, list[str]]:
    """The URL as the guard read it (where the request goes: its host, port and target) and the
    addresses it may connect to; TaskFailed when refused."""
    try:
        return resolve_url(params.url, context.policy.allowed_networks, context.resolver)
    except (BadUrl, AddressRefused) as exc:
        raise TaskFailed(str(exc), retryable=False) from exc


def _timeout(params: HttpParams, context: TaskContext) -> float:
    return min(params.timeout_seconds or context.timeout_seconds, context.timeout_seconds)


def _request(params: HttpParams, context: TaskContext) -> tuple[bytes | None, dict[str, str]]:
    """The request's body and headers for this start (its signature's timestamp is now)."""
    body: bytes | None = None if params.body is None else json.dumps(params.body).encode()
    # Defaults first; a user's header replaces a default whatever its case.
    headers = {"User-Agent": "Punctual/1"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    given = {name.lower() for name in params.headers}
    headers = {name: value for name, value in headers.items() if name.lower() not in given}
    headers.update(params.headers)
    headers.update(
        {
            "X-Punctual-Job-Id": context.job_id,
            "X-Punctual-Execution-Id": context.execution_id,
            "X-Punctual-Scheduled-At": to_rfc3339(context.scheduled_at),
            "X-Punctual-Attempt": str(context.attempt),
        }
    )
    if context.signing_keys:
        # The signature covers exactly the bytes sent; a user's header of the same name would
        # contradict it, so Punctual's replace it.
        headers = {name: value for name, value in headers.items() if name.lower() not in signing.HEADERS}
        message_id = context.message_id or context.execution_id
        headers.update(signing.headers(context.signing_keys, message_id, context.clock.now(), body or b""))
    return body, headers


def _connection(url: OutboundUrl, address: str, timeout: float) -> _Connection:
    connection_type = _PinnedHTTPSConnection if url.is_https else _PinnedHTTPConnection
    return connection_type(url.host, address, url.port, timeout)


def _send(
    connection: _Connection, method: str, target: str, body: bytes | None, headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return response, response.read(ANSWER_PREVIEW_BYTES)
    finally:
        connection.close()


def _exchange(send: Callable[[], tuple[http.client.HTTPResponse, bytes]]) -> Any:
    """The task's result from the answer `send` gets; TaskFailed for a failure or a refusal."""
    try:
        response, payload = send()
    except (OSError, http.client.HTTPException) as exc:
        raise TaskFailed(f"{type(exc).__name__}: {exc}", retryable=True) from exc
    result = {"status": response.status, "body": decode_answer(payload)}
    if 200 <= response.status < 300:
        return result
    retryable = retryable_status(response.status)
    raise TaskFailed(f"HTTP {response.status} {response.reason}", retryable=retryable, result=result)


register(HttpTask())
