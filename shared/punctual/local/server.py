"""The local stack's HTTP front end: what API Gateway does in front of the API function.

Each request is authenticated by its bearer token (docs/api.md: `PUNCTUAL_LOCAL_TOKENS`), turned into a
proxy event with the token's owner where IAM authorization puts the caller, and handed to the API
handler; its answer becomes the HTTP response. The events are those of an HTTP API (payload format
2.0), the deployed default; `api_event` chooses.
"""

from __future__ import annotations

import base64
import hmac
import json
import socket
import sys
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from punctual.local import lambda_events
from punctual.observability import logger

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

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


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


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Gone(Exception):
    """The client closed the connection before its request was read."""


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    # Many clients connecting at once (socketserver's default backlog is 5) would be reset.
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
    ) -> None:
        """`listening`: a socket already bound and listening (the stack binds it, then hands it to
        the API's process), used instead of binding `address`."""
        self.invoke = invoke
        self.tokens = dict(tokens)
        self.access_log = access_log
        self.stopping = False
        # Asked after a write failed: why the data directory refuses writes, if it does.
        self.storage_failure = storage_failure or (lambda: None)
        self.refusing_writes: str | None = None
        super().__init__(address, _Handler, bind_and_activate=listening is None)
        if listening is not None:
            self.socket.close()
            self.socket = listening
            self.server_address = listening.getsockname()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is one line in the log, not a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            logger.info("client disconnected", extra={"client": str(client_address), "error": repr(error)})
            return
        logger.exception("request failed", extra={"client": str(client_address)})

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

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


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"
    server_version = "PunctualLocal/1"
    # An answer's headers and body leave in one send (flushed after each request), not one each:
    # every send lets go of the interpreter lock, which the executions starting at that moment share.
    wbufsize = 64 * 1024

    def do_GET(self) -> None:
        self._handle()

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # now: the client waits for it before it sends its body
        return answered

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def __getattr__(self, name: str) -> Any:
        # Any other method (TRACE, PROPFIND...): answered in the API's error shape.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._send_json(
            405,
            {"message": f"method {self.command} is not allowed"},
            {"Allow": ", ".join(sorted(METHODS))},
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line, a 414 URI...) as JSON, not HTML."""
        self.close_connection = True
        short = self.responses.get(code, ("Error", ""))[0]
        body = json.dumps({"message": message or short}).encode()
        self.send_response(code, short)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def _handle(self) -> None:
        started = time.monotonic()
        status = self._answer()
        if self.server.access_log:
            logger.info(
                "request",
                extra={
                    "method": self.command,
                    "path": self.path,
                    "status": status,
                    "ms": round((time.monotonic() - started) * 1000),
                },
            )

    def _answer(self) -> int:
        parts = urlsplit(self.path)
        path = parts.path or "/"  # as requested, percent-encoded: the event builder decodes it if need be
        try:
            body = self._read_body()
        except _BadRequest as exc:
            self.close_connection = True
            return self._send_json(exc.status, {"message": str(exc)})
        except _Gone:
            self.close_connection = True
            logger.info("client disconnected", extra={"method": self.command, "path": path})
            return 499  # nginx's "client closed request": nothing was sent
        if self.server.stopping:
            return self._send_json(503, {"message": "the local stack is stopping"})
        if self.command in _WRITES and self.server.refusing_writes:
            return self._refuse_write(self.server.refusing_writes)
        owner = self.server.owner_for(self.headers.get("Authorization"))
        if owner is None and not (self.command in ("GET", "HEAD") and path in PUBLIC_PATHS):
            message = "unknown bearer token" if self.headers.get("Authorization") else "missing bearer token"
            return self._send_json(
                401,
                {"message": f"{message}: send Authorization: Bearer <token>"},
                {"WWW-Authenticate": 'Bearer realm="punctual"'},
            )
        # Credentials stop here, as API Gateway's IAM authorization keeps them from the function.
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        method = "GET" if self.command == "HEAD" else self.command
        event = api_event(method, path, owner=owner, query=parts.query, headers=headers, body=body)
        try:
            response = self.server.invoke(event)
        except Exception:
            logger.exception("API handler failed", extra={"method": self.command, "path": path})
            response = {
                "statusCode": 502,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"message": "Internal server error"}),
            }
        if self.command in _WRITES and int(response.get("statusCode") or 502) >= 500:
            why = self.server.storage_failure()
            if why:
                self.server.refusing_writes = why
                return self._refuse_write(why)
        return self._send_proxy_response(response)

    def _refuse_write(self, why: str) -> int:
        message = f"the local stack cannot save changes to its data directory, so it refuses them: {why}"
        return self._send_json(503, {"message": message}, {"Retry-After": "60"})

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return None
        try:
            length = int(length_header)
        except ValueError:
            raise _BadRequest(400, "Content-Length is not a number") from None
        if length < 0:
            raise _BadRequest(400, "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
        if not length:
            return None
        data = self.rfile.read(length)
        if len(data) < length:
            raise _Gone
        return data

    def _read_chunked(self) -> bytes | None:
        data = bytearray()
        while True:
            line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise _BadRequest(400, "malformed chunked body") from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return bytes(data) or None
            if len(data) + size > MAX_BODY_BYTES:
                raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes")
            data += self.rfile.read(size)
            self.rfile.readline(1024)

    def _send_proxy_response(self, response: dict[str, Any]) -> int:
        status = int(response.get("statusCode") or 502)
        raw = response.get("body") or ""
        data = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode()
        headers: dict[str, list[str]] = {k: [str(v)] for k, v in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():  # payload 1.0
            headers[name] = [str(v) for v in values]
        if response.get("cookies"):  # payload 2.0
            headers["Set-Cookie"] = [str(c) for c in response["cookies"]]
        self._send(status, data, headers)
        return status

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> int:
        all_headers = {"Content-Type": ["application/json"], **{k: [v] for k, v in (headers or {}).items()}}
        self._send(status, json.dumps(body).encode(), all_headers)
        return status

    def _send(self, status: int, data: bytes, headers: Mapping[str, list[str]]) -> None:
        self.send_response(status)
        for name, values in headers.items():
            if name.lower() not in _HOP_BY_HOP:
                for value in values:
                    self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are logged by _handle (with --verbose), not on stderr."""
