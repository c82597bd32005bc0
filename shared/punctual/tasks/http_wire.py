"""One webhook call on the wire: a connection pinned to the address the guard checked, the parts of
the request for one start, its exchange, and the task's result read from the answer."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from punctual.platform import signing
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import ANSWER_PREVIEW_BYTES, TaskContext, TaskFailed, decode_answer, retryable_status
from punctual.tasks.netguard import AddressRefused, BadUrl, OutboundUrl, resolve_url


class Call(Protocol):
    """What a call is made of (the task's parameters, `punctual.tasks.http.HttpParams`)."""

    @property
    def url(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def body(self) -> Any: ...
    @property
    def timeout_seconds(self) -> float | None: ...


class _Sending(http.client.HTTPConnection):
    """A connection that can hold a request written ahead (`write_ahead`) until `send_written`, and
    says whether anything of its request went out (`sent`)."""

    def _init_sending(self) -> None:
        # Whether a send of the request went out whole. The first is the request's head: until it is
        # out, no server can have acted on the request, and it may go again on another connection.
        self.sent = False
        self.written: list[Any] | None = None  # the request written ahead, not yet sent

    def send(self, data: Any) -> None:
        if self.written is not None:
            self.written.append(data)
            return
        super().send(data)
        self.sent = True

    def send_written(self) -> None:
        """Send the request written ahead."""
        written, self.written = self.written or [], None
        for data in written:
            self.send(data)


class PinnedHTTPConnection(_Sending):
    """Connects to an address already checked by the guard, not to a fresh lookup of the host."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self._init_sending()

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


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


class PinnedHTTPSConnection(http.client.HTTPSConnection, _Sending):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=_tls_context())
        self._address = address
        self._init_sending()

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


Connection = PinnedHTTPConnection | PinnedHTTPSConnection


def target(params: Call, context: TaskContext) -> tuple[OutboundUrl, list[str]]:
    """The URL as the guard read it (where the request goes: its host, port and target) and the
    addresses it may connect to; TaskFailed when refused."""
    try:
        return resolve_url(params.url, context.policy.allowed_networks, context.resolver)
    except (BadUrl, AddressRefused) as exc:
        raise TaskFailed(str(exc), retryable=False) from exc


def timeout_for(params: Call, context: TaskContext) -> float:
    return min(params.timeout_seconds or context.timeout_seconds, context.timeout_seconds)


def request_parts(
    params: Call, context: TaskContext, at: datetime | None = None
) -> tuple[bytes | None, dict[str, str]]:
    """The request's body and headers for this start, sent `at` (its signature's timestamp; None:
    now)."""
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
        sent_at = at or context.clock.now()
        headers.update(signing.headers(context.signing_keys, message_id, sent_at, body or b""))
    return body, headers


def pinned_connection(url: OutboundUrl, address: str, timeout: float) -> Connection:
    connection_type = PinnedHTTPSConnection if url.is_https else PinnedHTTPConnection
    return connection_type(url.host, address, url.port, timeout)


def write_ahead(
    connection: Connection, method: str, target: str, body: bytes | None, headers: dict[str, str]
) -> None:
    """The request made on `connection` and held there, not a byte sent (`send_written` sends it)."""
    connection.written = []
    try:
        connection.request(method, target, body=body, headers=headers)
    except BaseException:
        connection.written = None
        raise


def send_on(
    connection: Connection, method: str, target: str, body: bytes | None, headers: dict[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    try:
        connection.request(method, target, body=body, headers=headers)
        return answer_on(connection)
    finally:
        connection.close()


def answer_on(connection: Connection) -> tuple[http.client.HTTPResponse, bytes]:
    """The answer to the request sent on `connection`, as much of its body as a result keeps."""
    response = connection.getresponse()
    return response, response.read(ANSWER_PREVIEW_BYTES)


def exchange(send: Callable[[], tuple[http.client.HTTPResponse, bytes]]) -> Any:
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
