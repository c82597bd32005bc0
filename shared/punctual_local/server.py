"""The local stack's HTTP front end: what API Gateway does in front of the API function.

Each request is authenticated by its bearer token (docs/api.md: `PUNCTUAL_LOCAL_TOKENS`), turned into a
proxy event with the token's owner where IAM authorization puts the caller, and handed to the API
handler; its answer becomes the HTTP response. The events are those of an HTTP API (payload format
2.0), the deployed default; `api_event` chooses.

HTTP/1.1 is parsed by h11 (strict framing: one Content-Length, chunk sizes in hex digits alone, no
transfer coding but `chunked`), never by hand: the local stack is what people expose on their laptops
and CI runners. Every request has limits (`Limits`): its head's size and time, its body's size and
time, and the connections and requests at once. A request's token is checked before its body is read,
so a caller without one costs a head's worth of memory. Past `Limits.active` requests in the handler
(and `Limits.queued` waiting for one, each for `Limits.queue_seconds` at most) a request is answered
503 with `Retry-After`: the API's callers share moto with the executions, which come first.
"""

from __future__ import annotations

import base64
import hmac
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import h11

from punctual.platform.observability import logger
from punctual_local import lambda_events

# The event format the API function is driven with: http_api_event (HTTP API, payload format 2.0, as
# deployed by default) or api_gateway_event (REST API, payload format 1.0; `-c api_type=rest`).
api_event = lambda_events.http_api_event

DEFAULT_TOKENS = {"local": "local"}
# Answered without a token, as the contract lets anyone check liveness and read the API's document.
PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
_HOP_BY_HOP = frozenset({"connection", "content-length", "transfer-encoding", "keep-alive"})
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SERVER = "PunctualLocal/1"
RETRY_AFTER_SECONDS = 1
_RECEIVE_BYTES = 65536
# A client that sent part of a body is given this long, and this much, to stop sending before its
# connection is closed: closed at once, its unread bytes would reset the connection and could take
# the answer with them.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 16 * 1024 * 1024
# What a client that went away raises (a kernel's send or receive timeout raises BlockingIOError).
_GONE = (ConnectionError, TimeoutError, BlockingIOError)

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


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


def parse_tokens(spec: str | None) -> dict[str, str]:
    """`token=owner,token2=owner2` -> {token: owner}; unset or blank means the single token `local`."""
    if spec is None or not spec.strip():
        return dict(DEFAULT_TOKENS)
    tokens: dict[str, str] = {}
    for entry in spec.split(","):
        if not entry.strip():
            continue
        token, separator, owner = (part.strip() for part in entry.partition("="))
        if not separator or not token or not owner:
            raise ValueError(f"PUNCTUAL_LOCAL_TOKENS: {entry.strip()!r} is not token=owner")
        if tokens.get(token, owner) != owner:
            raise ValueError(f"PUNCTUAL_LOCAL_TOKENS: token {token!r} is given to two owners")
        tokens[token] = owner
    if not tokens:
        raise ValueError("PUNCTUAL_LOCAL_TOKENS names no token")
    return tokens


class Admission:
    """At most `active` holders at once, and `queued` more waiting, each for `wait_seconds` at most."""

    def __init__(self, active: int, queued: int, wait_seconds: float) -> None:
        self._slots = threading.BoundedSemaphore(active)
        self._lock = threading.Lock()
        self._waiting = 0
        self._queued = queued
        self._wait_seconds = wait_seconds

    def enter(self) -> bool:
        """Whether a slot was taken (then `leave` gives it back)."""
        if self._slots.acquire(blocking=False):
            return True
        with self._lock:
            if self._waiting >= self._queued:
                return False
            self._waiting += 1
        try:
            return self._slots.acquire(timeout=self._wait_seconds)
        finally:
            with self._lock:
                self._waiting -= 1

    def leave(self) -> None:
        self._slots.release()


class ApiServer:
    # Many clients connecting at once would be reset with a small backlog (the stack binds the
    # socket it hands to the API's process with this one too).
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        invoke: Invoke,
        tokens: Mapping[str, str],
        *,
        access_log: bool,
        storage_failure: Callable[[], str | None] | None = None,
        listening: socket.socket | None = None,
        limits: Limits = Limits(),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`listening`: a socket already bound and listening (the stack binds it, then hands it to
        the API's process), used instead of binding `address`."""
        self.invoke = invoke
        self.tokens = dict(tokens)
        self.access_log = access_log
        self.limits = limits
        self.monotonic = monotonic
        self.stopping = False
        # Asked after a write failed: why the data directory refuses writes, if it does.
        self.storage_failure = storage_failure or (lambda: None)
        self.admission = Admission(limits.active, limits.queued, limits.queue_seconds)
        if listening is None:
            listening = socket.create_server(address, backlog=self.request_queue_size)
        self.socket = listening
        self.server_address = listening.getsockname()
        self._lock = threading.Lock()
        self._open = 0
        self._stop = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept connections, one thread each, until `shutdown`."""
        self._stopped.clear()
        self.socket.settimeout(poll_interval)
        try:
            while not self._stop.is_set():
                try:
                    connection, client = self.socket.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    if self._stop.is_set():
                        break
                    logger.warning("cannot accept a connection", extra={"error": repr(exc)})
                    self._stop.wait(poll_interval)  # (out of descriptors: let some close)
                    continue
                threading.Thread(target=self._serve, args=(connection, client), daemon=True).start()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop accepting; returns once `serve_forever` has. Open connections end on their own."""
        self._stop.set()
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()

    def owner_for(self, authorization: str | None) -> str | None:
        """The owner of a `Bearer <token>` header; None when it is missing or unknown."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        found = None
        for known, owner in self.tokens.items():  # compare them all, in constant time
            if hmac.compare_digest(known.encode(), token.encode()):
                found = owner
        return found

    def _serve(self, connection: socket.socket, client: Any) -> None:
        with self._lock:
            self._open += 1
            crowded = self._open > self.limits.connections
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _Connection(self, connection).serve(crowded)
        except _GONE as exc:
            logger.info("client disconnected", extra={"client": str(client), "error": repr(exc)})
        except Exception:
            logger.exception("request failed", extra={"client": str(client)})
        finally:
            connection.close()
            with self._lock:
                self._open -= 1


class _Timeout(Exception):
    """The client took longer than its limit; `started`: after the request's first byte."""

    def __init__(self, started: bool) -> None:
        super().__init__("timed out")
        self.started = started


class _Refused(Exception):
    """Answered without reaching the API function (`status`, its message, extra headers)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})


class _Connection:
    """One client's connection: its requests one after another, each read, answered and logged.

    Its time limits are the kernel's (SO_RCVTIMEO, SO_SNDTIMEO) on a blocking socket, where the kernel
    has them: a socket given a timeout in Python polls before every send and receive, and sets the
    timeout with a system call of its own, each a hand-off of the interpreter lock that the API's
    other requests wait on (loopback_http.py says more).
    """

    def __init__(self, server: ApiServer, sock: socket.socket) -> None:
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
            self._send_json(503, {"message": "too many connections"}, _retry_after(), close=True)
            self._linger()
            return
        while True:
            try:
                request = self._next_request()
            except _Timeout as exc:
                if exc.started:  # (an idle connection is closed without a word)
                    self._refuse_head(_Refused(408, "request not received in time"))
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

    def _refuse_head(self, refusal: _Refused) -> None:
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
            raise _Timeout(started)
        self._wait_at_most(remaining)
        try:
            data = self.sock.recv(_RECEIVE_BYTES)
        except (TimeoutError, BlockingIOError):
            raise _Timeout(started) from None
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
            raise _Refused(413, f"request body over {self.limits.body_bytes} bytes")
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
                    raise _Refused(413, f"request body over {self.limits.body_bytes} bytes")
                parts.append(bytes(event.data))
            elif event is h11.NEED_DATA:
                try:
                    if not self._receive(deadline, True):
                        raise ConnectionResetError("the client closed before its body was sent")
                except _Timeout:
                    raise _Refused(408, "request body not received in time") from None

    def _protocol_refusal(self, exc: h11.RemoteProtocolError) -> _Refused:
        status = exc.error_status_hint
        if status == 431 and b"\n" not in self._head_start:
            return _Refused(414, "request line too long")
        if status == 431:
            return _Refused(431, "request headers too large")
        # (h11's message, without the bytes it quotes)
        reason = str(exc).partition(": bytearray(")[0]
        if status == 501:
            return _Refused(501, f"not implemented: {reason}")
        return _Refused(status, f"malformed request: {reason}")

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
                raise _Refused(431, "request headers too large")
            self._check(target, headers)
            body = self._read_body(_declared_length(headers))
            if not self.server.admission.enter():
                raise _Refused(503, "the local API is busy: retry shortly", _retry_after())
        except _Refused as refusal:
            return self._answer_refusal(refusal)
        except _GONE:
            logger.info("client disconnected", extra={"method": self.method, "path": self.path})
            return 499  # nginx's "client closed request": nothing was sent
        return self._invoke(parts.query, headers, body)

    def _check(self, target: str, headers: Mapping[str, str]) -> None:
        """What is refused before the body is read: the caller, the method, the stack's state."""
        if len(target) > self.limits.request_line_bytes:
            raise _Refused(414, "request line too long")
        if self.method not in METHODS:
            allow = {"Allow": ", ".join(sorted(METHODS))}
            raise _Refused(405, f"method {self.method} is not allowed", allow)
        if self.server.stopping:
            raise _Refused(503, "the local stack is stopping")
        public = self.method in ("GET", "HEAD") and self.path in PUBLIC_PATHS
        authorization = _header(headers, "authorization")
        if self.server.owner_for(authorization) is None and not public:
            message = "unknown bearer token" if authorization else "missing bearer token"
            raise _Refused(
                401,
                f"{message}: send Authorization: Bearer <token>",
                {"WWW-Authenticate": 'Bearer realm="punctual"'},
            )

    def _invoke(self, query: str, headers: dict[str, str], body: bytes | None) -> int:
        """Run the API function on the request (its admission slot taken) and send its answer."""
        try:
            owner = self.server.owner_for(_header(headers, "authorization"))
            # Credentials stop here, as API Gateway's IAM authorization keeps them from the function.
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            method = "GET" if self.method == "HEAD" else self.method
            event = api_event(method, self.path, owner=owner, query=query, headers=headers, body=body)
            response = self.server.invoke(event)
        except Exception:
            logger.exception("API handler failed", extra={"method": self.method, "path": self.path})
            response = {
                "statusCode": 502,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"message": "Internal server error"}),
            }
        finally:
            # The slot bounds work in the function, not a slow client's reading of the answer: it is
            # free before the answer is sent, so a client that has its answer finds it free.
            self.server.admission.leave()
        status = int(response.get("statusCode") or 502)
        if self.method in _WRITES and status >= 500:
            # Asked each time: moto's store takes writes again by itself once its disk has room, and a
            # call that stores nothing (a preview) never needs it.
            why = self.server.storage_failure()
            if why:
                return self._answer_refusal(_Refused(503, _refusing(why), {"Retry-After": "60"}))
        raw = response.get("body") or ""
        data = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode()
        answer: dict[str, list[str]] = {k: [str(v)] for k, v in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():  # payload 1.0
            answer[name] = [str(v) for v in values]
        if response.get("cookies"):  # payload 2.0
            answer["Set-Cookie"] = [str(c) for c in response["cookies"]]
        self._send(status, data, answer)
        return status

    def _answer_refusal(self, refusal: _Refused) -> int:
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


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _declared_length(headers: Mapping[str, str]) -> int | None:
    """The Content-Length of a request h11 accepted (one value, digits alone), if it has one."""
    value = _header(headers, "content-length")
    return int(value.partition(",")[0]) if value else None


def _timeval(seconds: float) -> bytes:
    """A struct timeval of `seconds` (at least a millisecond: zero would mean no limit)."""
    whole, fraction = divmod(max(seconds, 0.001), 1.0)
    return struct.pack("ll", int(whole), int(fraction * 1_000_000))


def _retry_after() -> dict[str, str]:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)}


def _refusing(why: str) -> str:
    return f"the local stack cannot save changes to its data directory, so it refuses them: {why}"
