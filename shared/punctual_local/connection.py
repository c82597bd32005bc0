"""One client's connection to the local API: HTTP/1.1 read and written with h11, within limits.

HTTP/1.1 is parsed by h11 (strict framing: one Content-Length, chunk sizes in hex digits alone, no
transfer coding but `chunked`), never by hand: the local stack is what people expose on their laptops
and CI runners. Every request has limits (`Limits`): its head's size and time, its body's size
and time. A request is checked by the server (its token, its method) before its body is read, so a
caller without a token costs a head's worth of memory. What to answer is the server's; this module
reads the request, sends the answer, and answers what it refuses itself (413, 408, 431...).
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import urlsplit

import h11

from punctual.platform.observability import logger

_HOP_BY_HOP = frozenset({"connection", "content-length", "transfer-encoding", "keep-alive"})
SERVER = "PunctualLocal/1"
RETRY_AFTER_SECONDS = 1
_RECEIVE_BYTES = 65536
# A client that sent part of a body is given this long, and this much, to stop sending before its
# connection is closed: closed at once, its unread bytes would reset the connection and could take
# the answer with them.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 16 * 1024 * 1024
# What a client that went away raises (a kernel's send or receive timeout raises BlockingIOError).
GONE = (ConnectionError, TimeoutError, BlockingIOError)
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit


@dataclass(frozen=True)
class Limits:
    body_bytes: int = MAX_BODY_BYTES  # 413 past it
    request_line_bytes: int = 16 * 1024  # 414 past it
    head_bytes: int = 64 * 1024  # request line and headers; 431 past it
    head_seconds: float = 10.0  # from a request's first byte to its last header; 408 past it
    body_seconds: float = 30.0  # from its last header to its body's end; 408 past it
    idle_seconds: float = 30.0  # a kept-alive connection waiting for its next request is closed after
    send_seconds: float = 30.0  # an answer the client does not read is dropped after
    connections: int = 512  # open at once; one more is answered 503 and closed
    # Requests in the API handler at once. The handler's time is mostly moto's, which serves the
    # executions first: more at once would only wait there.
    active: int = 16
    # Requests waiting for one of those; one more is answered 503 at once.
    queued: int = 256
    # A request waiting longer than this is answered 503, not kept for tens of seconds.
    queue_seconds: float = 2.0


class Front(Protocol):
    """What a connection asks of the server it belongs to (server.ApiServer)."""

    limits: Limits
    access_log: bool
    monotonic: Callable[[], float]

    def check(self, method: str, path: str, headers: Mapping[str, str]) -> None: ...

    def respond(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes | None
    ) -> Reply: ...


@dataclass(frozen=True)
class Reply:
    """The answer to send: status, body, and each header's values."""

    status: int
    body: bytes
    headers: Mapping[str, list[str]]


class Timeout(Exception):
    """The client took longer than its limit; `started`: after the request's first byte."""

    def __init__(self, started: bool) -> None:
        super().__init__("timed out")
        self.started = started


class Refused(Exception):
    """Answered without reaching the API function (`status`, its message, extra headers)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})


class Connection:
    """One client's connection: its requests one after another, each read, answered and logged.

    Its time limits are the kernel's (SO_RCVTIMEO, SO_SNDTIMEO) on a blocking socket, where the kernel
    has them: a socket given a timeout in Python polls before every send and receive, and sets the
    timeout with a system call of its own, each a hand-off of the interpreter lock that the API's
    other requests wait on (loopback_http.py says more).
    """

    def __init__(self, server: Front, sock: socket.socket) -> None:
        self.server = server
        self.limits = server.limits
        self.sock = sock
        self._waits = 0.0  # what a receive waits at most, as last set
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(self.limits.send_seconds))
            self._kernel_timeouts = True
        except OSError:
            self._kernel_timeouts = False
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.head_bytes)
        self.closed_by_client = False
        self.method = ""  # of the request being answered
        self.path = ""
        self._head_start = b""  # its first bytes: whether its request line ended

    def serve(self, crowded: bool) -> None:
        if crowded:
            self._send_json(503, {"message": "too many connections"}, retry_after(), close=True)
            self._linger()
            return
        while True:
            try:
                request = self._next_request()
            except Timeout as exc:
                if exc.started:  # (an idle connection is closed without a word)
                    self._refuse_head(Refused(408, "request not received in time"))
                return
            except h11.RemoteProtocolError as exc:
                if not self.closed_by_client:
                    self._refuse_head(self._protocol_refusal(exc))
                return
            if request is None:
                return
            started = self.server.monotonic()
            status = self._answer(request)
            if self.server.access_log:
                self._log(status, started)
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                if status != 499:
                    self._linger()
                return
            self.h11.start_next_cycle()

    def _refuse_head(self, refusal: Refused) -> None:
        """Answer a request whose head could not be read, and end the connection."""
        started = self.server.monotonic()
        self._answer_refusal(refusal)
        if self.server.access_log:
            self._log(refusal.status, started, str(refusal))
        self._linger()

    # ------------------------------------------------------------------------------------ reading
    def _next_request(self) -> h11.Request | None:
        """The next request's head, None once the client closed between requests."""
        self.method = self.path = ""
        pending = self.h11.trailing_data[0]
        self._head_start = pending[: self.limits.request_line_bytes + 2]
        now = self.server.monotonic()
        deadline = now + (self.limits.head_seconds if pending else self.limits.idle_seconds)
        started = bool(pending)
        while True:
            event = self.h11.next_event()
            if isinstance(event, h11.Request):
                return event
            if isinstance(event, h11.ConnectionClosed):
                return None
            if event is not h11.NEED_DATA:  # (nothing else comes before a request)
                raise h11.RemoteProtocolError("unexpected data before a request")
            if not self._receive(deadline, started):
                return None
            if not started:
                started = True
                deadline = self.server.monotonic() + self.limits.head_seconds

    def _receive(self, deadline: float, started: bool) -> bool:
        """Feed h11 what arrives by `deadline`; False once the client closed."""
        remaining = deadline - self.server.monotonic()
        if remaining <= 0:
            raise Timeout(started)
        self._wait_at_most(remaining)
        try:
            data = self.sock.recv(_RECEIVE_BYTES)
        except (TimeoutError, BlockingIOError):
            raise Timeout(started) from None
        except ConnectionError:
            data = b""
        if len(self._head_start) <= self.limits.request_line_bytes:
            self._head_start = (self._head_start + data)[: self.limits.request_line_bytes + 2]
        self.closed_by_client = not data
        self.h11.receive_data(data)
        return bool(data)

    def _wait_at_most(self, seconds: float) -> None:
        """The next receive waits `seconds` at most, give or take half a second (set again only
        then: a quick client's requests are each read in one receive, with no system call more)."""
        if not self._kernel_timeouts:
            self.sock.settimeout(seconds)
        elif seconds < self._waits - 0.5 or seconds > self._waits:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds))
            self._waits = seconds

    def _read_body(self, declared: int | None) -> bytes | None:
        if declared is not None and declared > self.limits.body_bytes:
            raise Refused(413, f"request body over {self.limits.body_bytes} bytes")
        if self.h11.they_are_waiting_for_100_continue:
            self._send_bytes(
                self.h11.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))
            )
        deadline = self.server.monotonic() + self.limits.body_seconds
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                if self.closed_by_client:
                    raise ConnectionResetError("the client closed before its body was sent") from exc
                raise self._protocol_refusal(exc) from exc
            if isinstance(event, h11.EndOfMessage):
                return b"".join(parts) or None
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.limits.body_bytes:
                    raise Refused(413, f"request body over {self.limits.body_bytes} bytes")
                parts.append(bytes(event.data))
            elif event is h11.NEED_DATA:
                try:
                    if not self._receive(deadline, True):
                        raise ConnectionResetError("the client closed before its body was sent")
                except Timeout:
                    raise Refused(408, "request body not received in time") from None

    def _protocol_refusal(self, exc: h11.RemoteProtocolError) -> Refused:
        status = exc.error_status_hint
        if status == 431 and b"\n" not in self._head_start:
            return Refused(414, "request line too long")
        if status == 431:
            return Refused(431, "request headers too large")
        # (h11's message, without the bytes it quotes)
        reason = str(exc).partition(": bytearray(")[0]
        if status == 501:
            return Refused(501, f"not implemented: {reason}")
        return Refused(status, f"malformed request: {reason}")

    # ---------------------------------------------------------------------------------- answering
    def _answer(self, request: h11.Request) -> int:
        self.method = request.method.decode("ascii")
        target = request.target.decode("ascii")
        parts = urlsplit(target)
        # As requested, percent-encoded: the event builder decodes it if need be.
        self.path = parts.path or "/"
        headers = _headers(request.headers.raw_items())
        try:
            # (h11 bounds a head still arriving; one that came whole in a read is measured here)
            head = len(target) + sum(len(n) + len(v) + 4 for n, v in request.headers.raw_items())
            if head > self.limits.head_bytes and len(target) <= self.limits.request_line_bytes:
                raise Refused(431, "request headers too large")
            if len(target) > self.limits.request_line_bytes:
                raise Refused(414, "request line too long")
            self.server.check(self.method, self.path, headers)
            body = self._read_body(_declared_length(headers))
            reply = self.server.respond(self.method, self.path, parts.query, headers, body)
        except Refused as refusal:
            return self._answer_refusal(refusal)
        except GONE:
            logger.info("client disconnected", extra={"method": self.method, "path": self.path})
            return 499  # nginx's "client closed request": nothing was sent
        self._send(reply.status, reply.body, reply.headers)
        return reply.status

    def _answer_refusal(self, refusal: Refused) -> int:
        self._end_if_received()
        # A request whose body was not read ends its connection: what follows it is not a request.
        close = self.h11.their_state is not h11.DONE or refusal.status == 501
        if self.h11.our_state is not h11.SEND_RESPONSE:  # (h11 cannot answer: the head was unreadable)
            self.h11 = h11.Connection(h11.SERVER)
            self.h11.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            self.h11.next_event()
            close = True
        self._send_json(refusal.status, {"message": str(refusal)}, refusal.headers, close=close)
        return refusal.status

    def _end_if_received(self) -> None:
        """Read the rest of the request if it has arrived already (a request without a body has)."""
        try:
            while self.h11.their_state is h11.SEND_BODY:
                if self.h11.next_event() in (h11.NEED_DATA, h11.PAUSED):
                    return
        except h11.RemoteProtocolError:
            return

    def _send_json(
        self, status: int, body: Any, headers: Mapping[str, str] | None = None, *, close: bool = False
    ) -> None:
        all_headers = {"Content-Type": ["application/json"], **{k: [v] for k, v in (headers or {}).items()}}
        self._send(status, json.dumps(body).encode(), all_headers, close=close)

    def _send(
        self, status: int, data: bytes, headers: Mapping[str, list[str]], *, close: bool = False
    ) -> None:
        fields = [
            (name, value)
            for name, values in headers.items()
            if name.lower() not in _HOP_BY_HOP
            for value in values
        ]
        fields.append(("Server", SERVER))
        bodiless = status in (204, 304) or status < 200
        if not bodiless:
            fields.append(("Content-Length", str(len(data))))
        if close:
            fields.append(("Connection", "close"))
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        payload = self.h11.send(h11.Response(status_code=status, headers=fields, reason=reason.encode()))
        if data and not bodiless and self.method != "HEAD":
            payload = (payload or b"") + (self.h11.send(h11.Data(data=data)) or b"")
        payload = (payload or b"") + (self.h11.send(h11.EndOfMessage()) or b"")
        self._send_bytes(payload)

    def _send_bytes(self, payload: bytes | None) -> None:
        if payload:
            if not self._kernel_timeouts:
                self.sock.settimeout(self.limits.send_seconds)
            self.sock.sendall(payload)

    def _linger(self) -> None:
        """Close our side, then read (and drop) what the client still sends, for a moment."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            deadline = self.server.monotonic() + _LINGER_SECONDS
            dropped = 0
            while dropped < _LINGER_BYTES and (remaining := deadline - self.server.monotonic()) > 0:
                self.sock.settimeout(remaining)
                chunk = self.sock.recv(_RECEIVE_BYTES)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:
            pass

    def _log(self, status: int, started: float, error: str | None = None) -> None:
        logger.info(
            "request",
            extra={
                "method": self.method or None,
                "path": self.path or None,
                "status": status,
                "ms": round((self.server.monotonic() - started) * 1000),
                "error": error,
            },
        )


def _headers(items: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as spelled by the first of each name, a repeated one's values
    comma-joined as API Gateway does (a repeated Authorization then matches no token)."""
    headers: dict[str, str] = {}
    spelling: dict[str, str] = {}
    for raw_name, raw_value in items:
        name, value = raw_name.decode("ascii"), raw_value.decode("latin-1")
        name = spelling.setdefault(name.lower(), name)
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


def header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _declared_length(headers: Mapping[str, str]) -> int | None:
    """The Content-Length of a request h11 accepted (one value, digits alone), if it has one."""
    value = header(headers, "content-length")
    return int(value.partition(",")[0]) if value else None


def _timeval(seconds: float) -> bytes:
    """A struct timeval of `seconds` (at least a millisecond: zero would mean no limit)."""
    whole, fraction = divmod(max(seconds, 0.001), 1.0)
    return struct.pack("ll", int(whole), int(fraction * 1_000_000))


def retry_after() -> dict[str, str]:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)}
