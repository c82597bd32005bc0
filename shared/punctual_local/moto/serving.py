"""moto's HTTP server made cheaper per request, for the local stack's moto process. Never used on AWS.

Under load, much of moto's time went to serving HTTP rather than to DynamoDB or SQS: a TCP connection
per call, the email package's header parser, a Flask app and a dispatcher lock per request. Each
function here removes one of those costs; what moto answers stays the same (tests/local/moto/
test_speedups.py compares the answers with and without the lane for JSON calls).
"""

from __future__ import annotations

import io
import selectors
import threading
from typing import Any


def parse_headers_plainly() -> None:
    """http.server reads each request's headers through the email package's parser, a tenth of moto's
    CPU under a creation flood. The stack's requests carry plain `Name: value` lines, read here into
    the same HTTPMessage; anything else (a folded line, a line without a colon) still goes to the
    email parser."""
    import email.parser
    import http.client

    read_lines = getattr(http.client, "_read_headers", None)
    if read_lines is None:  # (not in every Python: then the parser as it is)
        return

    def parse_headers(fp: Any, _class: Any = http.client.HTTPMessage) -> Any:
        lines = read_lines(fp)
        message = _class()
        for line in lines[:-1]:  # the last: the blank line that ends them
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if not colon or not name or name != name.strip():
                return email.parser.Parser(_class=_class).parsestr(b"".join(lines).decode("iso-8859-1"))
            message[name] = value.lstrip(" \t").rstrip("\r\n")
        return message

    http.client.parse_headers = parse_headers


class JsonCallsLane:
    """WSGI: DynamoDB's and SQS's calls (a POST to / naming its action in X-Amz-Target) go straight to
    moto's handler for the service, not through its Flask app.

    For each such call moto's server finds the service's Flask app, which routes the one URL those
    services have to the handler, wraps the request and the answer and runs its CORS hook: a fifth
    of moto's CPU per DynamoDB call (sampled, under the calibration's load). The handler here gets
    the request as the app would have given it (moto's Request, marked as coming from its server),
    and its answer becomes the response the app would have made; the CORS headers, which no AWS SDK
    reads, are left out. Anything else goes to the app.
    """

    def __init__(self, app: Any) -> None:
        from botocore.exceptions import ClientError
        from flask import Response
        from moto.core.request import Request
        from moto.dynamodb.responses import DynamoHandler
        from moto.sqs.responses import SQSResponse

        class ServerRequest(Request):
            from_wsgi_server = True

        self._app = app
        self._request = ServerRequest
        self._response = Response
        self._client_error = ClientError
        self._handlers = {"DynamoDB_20120810": DynamoHandler.dispatch, "AmazonSQS": SQSResponse.dispatch}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        handler = None
        if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO") == "/":
            handler = self._handlers.get(environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0])
        if handler is None:
            return self._app(environ, start_response)
        request = self._request(environ)
        try:
            result = handler(request, request.raw_url, dict(request.headers))
        except self._client_error as exc:  # (as moto's app answers one)
            result = 400, {}, exc.response["Error"]["Message"]
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        return self._response(response=content, status=status, headers=headers)(environ, start_response)


_request = threading.local()


def keep_alive_handler(base: Any) -> Any:
    """moto's request handler, keeping each client's connection open between requests.

    werkzeug's development server closes every connection after its response, because http.server
    cannot skip a body the application left unread, and after each response it reads whatever the
    socket still holds and throws it away. So every moto call cost a TCP connection, a server thread
    and a client-side connect: a quarter of the stack's and moto's time under load. This handler reads
    each Content-Length body in full before the application sees it, so the stream stands at the next
    request line; only for such a request is the connection kept and the discarding read skipped
    (it would swallow the client's next request). A chunked body still closes the connection.
    Responses go out without Nagle's delay, since headers and body are written separately.
    """
    import werkzeug.serving

    werkzeug.serving.selectors = _SkipDrainWhenBodyRead  # type: ignore[assignment]

    class KeepAliveHandler(base):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            _request.whole_body_read = False
            if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
                return environ
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return environ
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length > 0 else b"")
            _request.whole_body_read = True
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if keyword.lower() == "connection" and value.lower() == "close" and _body_read():
                return
            super().send_header(keyword, value)

    return KeepAliveHandler


def _body_read() -> bool:
    return bool(getattr(_request, "whole_body_read", False))


class _NothingLeft:
    """The selector of werkzeug's discarding read, when the request's body was read in full."""

    def register(self, *args: Any) -> None:
        pass

    def select(self, timeout: float | None = None) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class _SkipDrainWhenBodyRead:
    """Stands in for the selectors module inside werkzeug.serving, which uses it only for that read."""

    EVENT_READ = selectors.EVENT_READ

    @staticmethod
    def DefaultSelector() -> Any:
        return _NothingLeft() if _body_read() else selectors.DefaultSelector()


# Services whose backend follows from the signed service name and the X-Amz-Target prefix alone.
_KEYED_SERVICES = frozenset({"dynamodb", "sqs"})


def remember_each_services_app(app: Any) -> None:
    """Find a DynamoDB or SQS request's backend once per service, not on every request.

    moto's DomainDispatcherApplication works out each request's service under one lock, matching the
    host against every backend's URL patterns: a fifth of its server's time under the local stack's
    load, and a point where all requests queue. For the two services the stack calls on every
    execution, the answer depends only on the SigV4 credential scope's service and the target's
    prefix (DynamoDB_20120810 or DynamoDBStreams_...), so it is kept per such key; other requests
    are dispatched as moto does.
    """
    original = app.get_application
    known: dict[tuple[str, str], Any] = {}

    def get_application(environ: dict[str, Any]) -> Any:
        key = _service_key(environ)
        if key is None:
            return original(environ)
        found = known.get(key)
        if found is None:
            found = known[key] = original(environ)
        return found

    app.get_application = get_application


def _service_key(environ: dict[str, Any]) -> tuple[str, str] | None:
    path = environ.get("PATH_INFO", "")
    if not isinstance(path, str) or path.startswith(("/moto-api", "/latest/", "/_punctual")):
        return None
    try:  # "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request, ..."
        service = environ["HTTP_AUTHORIZATION"].split(",")[0].split()[1].split("/")[3].lower()
    except (KeyError, IndexError):
        return None
    if service not in _KEYED_SERVICES:
        return None
    return service, environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0]
