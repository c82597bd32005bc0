"""The console's web server: loopback only, the page's assets, and `/api/...` forwarded to Punctual's
API through the CLI's client (a bearer token locally, SigV4 deployed), so that the browser holds no
credential and the console adds no path the API does not have.

Who may use it: whoever opened the URL it printed, which carries a per-run token. The page
exchanges that token for the session's secret, keeps it in the tab's sessionStorage and sends it in a
header with each call. No cookie: a browser sends a cookie of 127.0.0.1 to every port of it (another
local server would receive it, and two consoles would share one name), while sessionStorage is
scoped to the origin, port included. Every `/api` call needs the secret; an action (POST, PATCH,
DELETE) also needs the session's action token in a header and an Origin that is this server, so that
no other site (nor a page that rebinds a name to 127.0.0.1) can drive it.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import re
import secrets
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Protocol

SESSION_HEADER = "X-Console-Session"
ACTION_HEADER = "X-Console-Token"
MAX_BODY = 1 << 20  # what the page sends: a job's changes, a pause note
# The API's resources the page may call (docs/api.md); anything else answers 404 here.
API_PATH = re.compile(r"/(?:jobs|dead-letters|schedules|tasks|coming-up)(?:/[A-Za-z0-9._~%:@!$&'()*+,;=-]+)*")
ACTIONS = frozenset({"POST", "PATCH", "DELETE"})
SECURITY_HEADERS = {
    # No inline script or style, nothing from elsewhere: a string that slipped into the page as markup
    # still could not run.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class ApiResponse(Protocol):
    status: int
    body: Any


class Api(Protocol):
    """What the console needs of `punctual_client.transport.PunctualClient`."""

    endpoint: str

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> ApiResponse: ...


@dataclass(frozen=True)
class Session:
    """The secrets of one console run: the token in the printed URL, the secret the page exchanges it
    for (sent with each call), and the token the page sends with each action."""

    url_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    action_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))


def _assets() -> dict[str, bytes]:
    """The page's files, read once from the package: `/static/<path>` serves exactly these."""
    root = resources.files("punctual_cli.console") / "static"
    found: dict[str, bytes] = {}

    def walk(folder: Any, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif not entry.name.startswith("."):
                found[prefix + entry.name] = entry.read_bytes()

    walk(root, "")
    return found


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        api: Api,
        *,
        port: int = 0,
        unreachable: tuple[type[Exception], ...] = (OSError,),
        session: Session | None = None,
    ) -> None:
        self.api = api
        self.unreachable = unreachable
        self.session = session or Session()
        self.assets = _assets()
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser that drops a request (a reload, a tab closed) is no error to print a traceback for.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def origins(self) -> frozenset[str]:
        return frozenset({f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"})

    @property
    def url(self) -> str:
        """What to open: it signs the browser in for this run."""
        return f"http://127.0.0.1:{self.port}/login?token={self.session.url_token}"


class _Handler(BaseHTTPRequestHandler):
    server: ConsoleServer
    protocol_version = "HTTP/1.1"
    server_version = "punctual-console"
    sys_version = ""

    # -- dispatch --------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        self._handle(self.command)

    # (every method to the same checks: those the console does not take answer its own 405)
    do_GET = do_POST = do_PATCH = do_DELETE = do_HEAD = _dispatch
    do_PUT = do_OPTIONS = do_TRACE = do_CONNECT = _dispatch

    def _handle(self, method: str) -> None:
        if len(self.headers.get_all("Host") or []) != 1:
            self._send_json(HTTPStatus.BAD_REQUEST, {"message": "one Host header, please"})
            return
        if not self._host_allowed():
            # A name rebound to 127.0.0.1 by another site's DNS sends its own name here.
            self._send_json(HTTPStatus.MISDIRECTED_REQUEST, {"message": "unknown host"})
            return
        if method not in ("GET", "POST", "PATCH", "DELETE"):
            self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "method not allowed"})
            return
        if "Transfer-Encoding" in self.headers:
            # (its chunks unread would be taken for the next request on the connection)
            self._send_json(HTTPStatus.LENGTH_REQUIRED, {"message": "send a Content-Length, not chunks"})
            return
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        if path.startswith("/api/"):
            self._api(method, path[len("/api") :], parts.query)
        elif path == "/session" and method == "POST":
            self._sign_in()
        elif method != "GET":
            self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"message": "method not allowed"})
        elif path == "/session":
            self._session()
        elif path in ("/", "/index.html", "/login"):
            # (at /login the page takes the token from its address, drops it, and exchanges it)
            self._send_asset("index.html")
        elif path.startswith("/static/") and path[len("/static/") :] in self.server.assets:
            self._send_asset(path[len("/static/") :])
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"message": "not found"})

    # -- checks ----------------------------------------------------------------------------------

    def _host_allowed(self) -> bool:
        host = self.headers.get("Host", "")
        return f"http://{host}" in self.server.origins

    def _signed_in(self) -> bool:
        # (a header the page sets, never a cookie: nothing of another port's, or any cookie, counts)
        given = self.headers.get(SESSION_HEADER, "")
        return hmac.compare_digest(given.encode(), self.server.session.secret.encode())

    def _same_origin(self, method: str) -> bool:
        """An action's Origin must be this server; a read's may be absent (a same-origin GET often
        sends none) but never another. Sec-Fetch-Site, where the browser sends it, must agree."""
        origin = self.headers.get("Origin")
        if origin is None and method in ACTIONS:
            return False
        if origin is not None and origin not in self.server.origins:
            return False
        site = self.headers.get("Sec-Fetch-Site")
        return site in (None, "same-origin", "none")

    # -- routes ----------------------------------------------------------------------------------

    def _sign_in(self) -> None:
        """The printed URL's token, posted by the console's own page, for the session's secret."""
        if not self._same_origin("POST"):
            self._send_json(HTTPStatus.FORBIDDEN, {"message": "cross-site request refused"})
            return
        body, refused = self._json_body()
        if refused:
            return
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode(), self.server.session.url_token.encode()
        ):
            self._send_json(
                HTTPStatus.FORBIDDEN, {"message": "not this console's URL: open the one it printed"}
            )
            return
        self._send_json(HTTPStatus.OK, {"session": self.server.session.secret})

    def _session(self) -> None:
        """The action token and the API's address, for a page signed in from this server's origin."""
        if not self._same_origin("GET"):
            self._send_json(HTTPStatus.FORBIDDEN, {"message": "cross-site request refused"})
        elif not self._signed_in():
            self._send_json(HTTPStatus.UNAUTHORIZED, {"message": "open the URL `punctual console` printed"})
        else:
            self._send_json(
                HTTPStatus.OK,
                {"action_token": self.server.session.action_token, "endpoint": self.server.api.endpoint},
            )

    def _api(self, method: str, path: str, query: str) -> None:
        if not self._signed_in():
            self._send_json(HTTPStatus.UNAUTHORIZED, {"message": "open the URL `punctual console` printed"})
            return
        if not self._same_origin(method):
            self._send_json(HTTPStatus.FORBIDDEN, {"message": "cross-site request refused"})
            return
        if method in ACTIONS:
            given = self.headers.get(ACTION_HEADER, "")
            if not hmac.compare_digest(given.encode(), self.server.session.action_token.encode()):
                self._send_json(HTTPStatus.FORBIDDEN, {"message": "missing or wrong action token"})
                return
        if not API_PATH.fullmatch(path) or ".." in path:
            self._send_json(HTTPStatus.NOT_FOUND, {"message": f"no such endpoint: {method} {path}"[:300]})
            return
        body, refused = self._json_body()
        if refused:
            return
        # The query is encoded again by the client, as the CLI's own are: a deployed API's SigV4
        # signature then covers exactly what the CLI would send.
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        try:
            answer = self.server.api.request(method, path, query=params, body=body, check=False)
        except self.server.unreachable as exc:
            self._send_json(HTTPStatus.BAD_GATEWAY, {"message": str(exc)})
            return
        self._send_json(answer.status, answer.body)

    def _json_body(self) -> tuple[Any, bool]:
        """The request's JSON body (None without one), and whether it was refused (answered)."""
        length_text = self.headers.get("Content-Length") or "0"
        if not length_text.isdigit() or int(length_text) > MAX_BODY:
            self._send_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"message": "body too large"})
            return None, True
        raw = self.rfile.read(int(length_text)) if int(length_text) else b""
        if not raw:
            return None, False
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media != "application/json":
            self._send_json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"message": "send JSON"})
            return None, True
        try:
            return json.loads(raw), False
        except ValueError:
            self._send_json(HTTPStatus.BAD_REQUEST, {"message": "the body is not JSON"})
            return None, True

    # -- answers ---------------------------------------------------------------------------------

    def _common_headers(self) -> None:
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)

    def _send(self, status: int, content_type: str, payload: bytes, *, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "max-age=0, must-revalidate" if cache else "no-store")
        self._common_headers()
        if status >= 400:
            # A refused request's body may not have been read: taken for the next request on the
            # connection, it would be answered past the checks that refused this one.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send_json(self, status: int, body: Any) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        self._send(status, "application/json", payload)

    def _send_asset(self, name: str) -> None:
        kind = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
        suffix = name[name.rfind(".") :]
        content_type = kind.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
        if content_type.startswith("text/"):
            content_type += "; charset=utf-8"
        self._send(HTTPStatus.OK, content_type, self.server.assets[name], cache=True)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the page polls: a line a request would bury what matters
