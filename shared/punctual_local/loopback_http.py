"""The local stack's HTTP to its moto: each request written in one send, each answer read by its length.

botocore sends through urllib3 and http.client, which build a request header by header and parse
every answer's headers with the email package. At the local stack's rate of calls to moto that was a
third of its process's CPU (py-spy over a creation flood: 33 % of the samples holding the interpreter
lock were in `URLLib3Session.send`), CPU the API, the scanner and the workers share. moto is on
loopback, over plain HTTP/1.1 with keep-alive, so a request here is one `sendall` and an answer a
status line, a few headers and a body of a known length (or chunked). Never used on AWS.

A socket given a timeout in Python polls before every send and receive, and each of those system
calls lets go of the interpreter lock: under a burst, a thread that lets go of it waits behind all
the others for it back, so a call to moto took four turns where two do. The read timeout is the
kernel's here (SO_RCVTIMEO, SO_SNDTIMEO) on a blocking socket. For the same reason the invocation id
botocore gives each call is taken from punctual.platform.randomness rather than from a system call of its own.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any, cast
from urllib.parse import urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from punctual.platform import randomness

# Idle connections kept for reuse; more than this at once are closed after their answer.
MAX_IDLE = 64
READ_TIMEOUT_SECONDS = 60.0  # botocore's default read timeout; SQS long polls wait 20 s at most
CONNECT_TIMEOUT_SECONDS = 10.0
_CHUNK = 65536


class _Closed(Exception):
    """The connection ended before a whole answer; `untouched`: before its first byte."""

    def __init__(self, untouched: bool) -> None:
        super().__init__("connection closed by the server")
        self.untouched = untouched


class _Body:
    """What AWSResponse reads its content from (`raw.stream()`)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> list[bytes]:
        return [self._data]


class LoopbackHttp:
    """A botocore HTTP session (`send(request) -> AWSResponse`) for one plain-HTTP endpoint."""

    def __init__(
        self, endpoint_url: str, *, authorization: str = "", read_timeout: float = READ_TIMEOUT_SECONDS
    ) -> None:
        parts = urlsplit(endpoint_url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"a plain http://host:port endpoint is needed, not {endpoint_url!r}")
        self._address = (parts.hostname, parts.port)
        self._host = parts.netloc
        self._authorization = authorization
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._idle: list[socket.socket] = []

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        data = _request_bytes(request, self._host, self._authorization)
        while True:
            conn, reused = self._checkout(request.url)
            try:
                conn.sendall(data)
                status, headers, body, keep = _read_answer(conn)
            except _Closed as exc:
                conn.close()
                if reused and exc.untouched:
                    # A kept-alive connection the server had closed: it never read this request.
                    continue
                raise ConnectionClosedError(endpoint_url=request.url, request=request, error=exc) from exc
            except (TimeoutError, BlockingIOError) as exc:  # (the kernel's timeout: EAGAIN)
                conn.close()
                raise ReadTimeoutError(endpoint_url=request.url, error=exc) from exc
            except OSError as exc:
                conn.close()
                if reused and isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                    continue
                raise ConnectionClosedError(endpoint_url=request.url, request=request, error=exc) from exc
            self._checkin(conn, keep)
            # (AWSResponse copies the headers into its own case-blind mapping)
            return AWSResponse(request.url, status, cast(Any, headers), _Body(body))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _checkout(self, url: str) -> tuple[socket.socket, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        try:
            conn = socket.create_connection(self._address, timeout=CONNECT_TIMEOUT_SECONDS)
        except OSError as exc:
            raise EndpointConnectionError(endpoint_url=url, error=exc) from exc
        _kernel_timeout(conn, self._read_timeout)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def _checkin(self, conn: socket.socket, keep: bool) -> None:
        if keep:
            with self._lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                    return
        conn.close()


def _request_bytes(request: AWSPreparedRequest, host: str, authorization: str) -> bytes:
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = request.body
    if body is None:
        payload = b""
    elif isinstance(body, bytes | bytearray):
        payload = bytes(body)
    elif isinstance(body, str):
        payload = body.encode("utf-8")
    else:  # a file-like body
        read = body.read()
        payload = read.encode("utf-8") if isinstance(read, str) else read
    lines = [f"{request.method} {target} HTTP/1.1", f"Host: {host}"]
    named = set()
    for name, value in request.headers.items():
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        lines.append(f"{name}: {text}")
        named.add(name.lower())
    if authorization and "authorization" not in named:
        lines.append(f"Authorization: {authorization}")
    if "content-length" not in named and "transfer-encoding" not in named:
        lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def _read_answer(conn: socket.socket) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers, body, and whether the connection may carry another request."""
    buffer = b""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        chunk = conn.recv(_CHUNK)
        if not chunk:
            raise _Closed(untouched=not buffer)
        buffer += chunk
    head, rest = buffer[:end].decode("latin-1"), buffer[end + 4 :]
    status_line, *header_lines = head.split("\r\n")
    version, status, *_ = status_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    lowered = {name.lower(): value for name, value in headers.items()}
    keep = version == "HTTP/1.1" and lowered.get("connection", "").lower() != "close"
    if "chunked" in lowered.get("transfer-encoding", "").lower():
        body = _read_chunked(conn, rest)
    elif "content-length" in lowered:
        body = _read_exactly(conn, rest, int(lowered["content-length"]))
    elif int(status) in (204, 304) or 100 <= int(status) < 200:
        body = rest
    else:  # the body runs to the connection's end
        parts = [rest]
        while chunk := conn.recv(_CHUNK):
            parts.append(chunk)
        body, keep = b"".join(parts), False
    return int(status), headers, body, keep


def _read_exactly(conn: socket.socket, start: bytes, length: int) -> bytes:
    parts, have = [start], len(start)
    while have < length:
        chunk = conn.recv(max(_CHUNK, length - have))
        if not chunk:
            raise _Closed(untouched=False)
        parts.append(chunk)
        have += len(chunk)
    data = b"".join(parts)
    return data[:length]


def _read_chunked(conn: socket.socket, buffer: bytes) -> bytes:
    body: list[bytes] = []
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            buffer += _more(conn)
        size = int(buffer[:end].split(b";", 1)[0], 16)
        buffer = buffer[end + 2 :]
        while len(buffer) < size + 2:
            buffer += _more(conn)
        if size == 0:
            # (trailers are not used by moto: the terminating blank line follows)
            return b"".join(body)
        body.append(buffer[:size])
        buffer = buffer[size + 2 :]


def _more(conn: socket.socket) -> bytes:
    chunk = conn.recv(_CHUNK)
    if not chunk:
        raise _Closed(untouched=False)
    return chunk


def _kernel_timeout(conn: socket.socket, seconds: float) -> None:
    """A blocking socket whose sends and receives end with EAGAIN after `seconds` (Python's own
    timeout where the kernel's cannot be set)."""
    whole = int(seconds)
    value = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))  # a struct timeval
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    except OSError:
        conn.settimeout(seconds)
        return
    conn.settimeout(None)


def _invocation_ids(endpoint: Any) -> None:
    """botocore's per-call invocation id, from punctual.platform.randomness (the module docstring says why)."""
    update = endpoint._update_retries_context

    def with_id(context: dict[str, Any], attempt: int, success_response: Any = None) -> None:
        context.setdefault("retries", {}).setdefault("invocation-id", str(randomness.uuid4()))
        update(context, attempt, success_response)

    endpoint._update_retries_context = with_id


def use_loopback_http(client: Any) -> None:
    """Send a boto3 client's requests (every attempt, retries included) through LoopbackHttp.

    A client made with `signature_version=UNSIGNED` gets an Authorization header that is not a
    signature but names the service and region, which is all moto reads from it (the service to
    dispatch to, the region); signing each request was an eighth of the process's CPU under a
    creation flood, and moto checks no signature."""
    endpoint = client._endpoint
    meta = client.meta
    scope = f"local/20260101/{meta.region_name}/{meta.service_model.signing_name}/aws4_request"
    authorization = f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"
    endpoint.http_session = LoopbackHttp(endpoint.host, authorization=authorization)
    _invocation_ids(endpoint)
