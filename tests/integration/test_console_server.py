"""The console's server on 127.0.0.1: who may use it, what it forwards to the API, and the headers
that keep a page of another site from reading or driving it. The API is a double that records calls."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.credentials import Credentials

from punctual_cli.console.server import ACTION_HEADER, SESSION_HEADER, ConsoleServer, Session
from punctual_client.auth import SigV4Auth
from punctual_client.transport import PunctualClient

SESSION = Session(url_token="url-token", secret="session-secret", action_token="action-token")


@dataclass
class Answer:
    status: int
    body: Any


@dataclass
class RecordingApi:
    endpoint: str = "http://127.0.0.1:9"
    calls: list[tuple[str, str, Any]] = field(default_factory=list)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> Answer:
        shown = path + ("?" + urllib.parse.urlencode(query) if query else "")
        self.calls.append((method, shown, body))
        return Answer(200, {"items": [], "next_cursor": None, "echo": shown})


@contextlib.contextmanager
def serving(session: Session | None = None) -> Iterator[tuple[ConsoleServer, RecordingApi]]:
    api = RecordingApi()
    server = ConsoleServer(api, session=session)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server, api
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def console() -> Iterator[tuple[ConsoleServer, RecordingApi]]:
    with serving(SESSION) as served:
        yield served


def call(
    server: ConsoleServer, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    sent = {"Host": f"127.0.0.1:{server.port}", **(headers or {})}
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        sent["Content-Type"] = "application/json"
    connection.request(method, path, body=data, headers=sent)
    answer = connection.getresponse()
    result = answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    connection.close()
    return result


def signed_in(server: ConsoleServer, **extra: str) -> dict[str, str]:
    return {SESSION_HEADER: server.session.secret, **extra}


def test_the_printed_url_serves_the_page_that_exchanges_its_token_for_the_sessions_secret(
    console,
) -> None:
    server, _ = console
    origin = f"http://127.0.0.1:{server.port}"
    # Given the URL the console prints
    assert server.url == f"http://127.0.0.1:{server.port}/login?token=url-token"
    # When it is opened, then it is the page (which drops the token from its address), and no cookie
    status, headers, page = call(server, "GET", "/login?token=url-token")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"/static/js/app.js" in page and "set-cookie" not in headers
    # When the page posts the token from the console's own origin, it gets the session's secret
    status, headers, body = call(server, "POST", "/session", {"Origin": origin}, {"token": "url-token"})
    assert status == 200 and json.loads(body) == {"session": "session-secret"}
    assert "set-cookie" not in headers
    # And another token, or the token posted from another origin or with none, gets nothing
    refused = [
        call(server, "POST", "/session", {"Origin": origin}, {"token": "guess"}),
        call(server, "POST", "/session", {"Origin": origin}, {"token": ["url-token"]}),
        call(server, "POST", "/session", {"Origin": origin}),
        call(server, "POST", "/session", {"Origin": "http://127.0.0.1:3000"}, {"token": "url-token"}),
        call(server, "POST", "/session", {}, {"token": "url-token"}),
    ]
    assert [status for status, _, _ in refused] == [403] * 5
    assert all(b"session-secret" not in body for _, _, body in refused)


def test_cookies_count_for_nothing_the_session_header_alone_signs_in(console) -> None:
    server, api = console
    # Given cookies of 127.0.0.1 that any port's server receives: one holding the session's secret
    # itself, and other apps' cookies that Python's SimpleCookie stops parsing at
    foreign = 'json={"x":1}; x=a b; a="b; y=\u00e9; z=a\\b'
    for cookie in (f"punctual_console={SESSION.secret}", f"{foreign}; punctual_console={SESSION.secret}"):
        # When they come without the session header (a page of another local server, or curl)
        # Then nothing is read, and the action token is not handed out
        assert call(server, "GET", "/api/jobs", {"Cookie": cookie})[0] == 401
        assert call(server, "GET", "/session", {"Cookie": cookie})[0] == 401
    assert api.calls == []
    # When the same cookies come with the session header, then they change nothing
    status, _, _ = call(server, "GET", "/api/jobs", signed_in(server, Cookie=foreign))
    assert status == 200 and len(api.calls) == 1


def test_one_consoles_session_does_not_sign_in_to_another(console) -> None:
    server, api = console
    # Given a second console on another port (another owner, say), with its own session
    with serving() as (other, other_api):
        # When each is called with the other's secret, then each refuses it
        assert call(other, "GET", "/api/jobs", signed_in(server))[0] == 401
        assert call(server, "GET", "/api/jobs", signed_in(other))[0] == 401
        assert (
            call(other, "GET", "/session", signed_in(server, Origin=f"http://127.0.0.1:{other.port}"))[0]
            == 401
        )
        # And each takes its own
        assert call(other, "GET", "/api/jobs", signed_in(other))[0] == 200
        assert call(server, "GET", "/api/jobs", signed_in(server))[0] == 200
        assert len(api.calls) == 1 and len(other_api.calls) == 1
    assert other.session.secret != server.session.secret


def test_the_api_needs_the_session_header_and_reads_are_forwarded_with_their_query(console) -> None:
    server, api = console
    # Given no session header, then the API is not reached
    assert call(server, "GET", "/api/jobs")[0] == 401
    assert api.calls == []
    # When signed in, a read goes to the API as it was asked
    status, _, body = call(
        server, "GET", "/api/jobs?status=PAUSED&name_prefix=a%20b&limit=5", signed_in(server)
    )
    assert status == 200
    # (encoded again as the CLI's client encodes its own)
    assert api.calls == [("GET", "/jobs?status=PAUSED&name_prefix=a+b&limit=5", None)]
    assert json.loads(body)["echo"] == "/jobs?status=PAUSED&name_prefix=a+b&limit=5"


def test_an_action_needs_the_action_token_and_this_servers_origin(console) -> None:
    server, api = console
    origin = f"http://127.0.0.1:{server.port}"
    pause = "/api/jobs/job_1/pause"
    # Given a signed-in browser, when a page of another site, or one without the token, posts
    refused = [
        call(
            server,
            "POST",
            pause,
            signed_in(server, Origin="https://evil.example", **{"X-Console-Token": "action-token"}),
        ),
        call(server, "POST", pause, signed_in(server, **{"X-Console-Token": "action-token"})),  # no Origin
        call(server, "POST", pause, signed_in(server, Origin=origin)),  # no token
        call(server, "POST", pause, signed_in(server, Origin=origin, **{"X-Console-Token": "other"})),
        call(
            server,
            "DELETE",
            "/api/jobs/job_1",
            signed_in(
                server, Origin=origin, **{"X-Console-Token": "action-token", "Sec-Fetch-Site": "cross-site"}
            ),
        ),
    ]
    # (nor may another site's page read the action token)
    refused.append(call(server, "GET", "/session", signed_in(server, Origin="https://evil.example")))
    # Then each is refused and the API hears nothing
    assert [status for status, _, _ in refused] == [403] * 6
    assert api.calls == []
    # When the console's own page reads the action token and posts with it, the action goes through
    status, _, body = call(server, "GET", "/session", signed_in(server, Origin=origin))
    assert status == 200 and json.loads(body)["action_token"] == "action-token"
    status, _, _ = call(
        server,
        "POST",
        pause,
        signed_in(server, Origin=origin, **{"X-Console-Token": "action-token"}),
        {"note": "x"},
    )
    assert status == 200
    assert api.calls == [("POST", "/jobs/job_1/pause", {"note": "x"})]


def test_another_host_name_is_refused_even_on_loopback(console) -> None:
    server, api = console
    # Given a request naming another host (a name rebound to 127.0.0.1 by another site)
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1:1"):
        status, _, _ = call(server, "GET", "/api/jobs", signed_in(server, Host=host))
        # Then it is refused, before anything is read
        assert status == 421, host
    assert api.calls == []
    assert call(server, "GET", "/", {"Host": f"localhost:{server.port}"})[0] == 200


def raw(server: ConsoleServer, data: bytes) -> bytes:
    """What the server answers on one connection to `data` sent as it is, until it closes it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_request_hidden_in_a_refused_ones_body_is_never_answered(console) -> None:
    server, api = console
    # Given a request refused for its Host, whose body is another request, signed in and for this host
    hidden = (
        f"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"{SESSION_HEADER}: {server.session.secret}\r\n\r\n"
    ).encode()
    outer = (
        f"POST /api/jobs HTTP/1.1\r\nHost: evil.example\r\nContent-Length: {len(hidden)}\r\n\r\n"
    ).encode()
    # When both are sent on one connection
    answer = raw(server, outer + hidden)
    # Then only the refusal is answered, and the connection closed after it
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 421")
    assert b"Connection: close" in answer
    assert api.calls == []


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        ("PUT /api/jobs HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0", 405),
        ("OPTIONS / HTTP/1.1\r\nHost: {host}", 405),
        ("PUT / HTTP/1.1\r\nHost: evil.example", 421),
        ("GET / HTTP/1.1\r\nHost: {host}\r\nHost: evil.example", 400),
        ("POST /api/jobs HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked", 411),
    ],
)
def test_other_methods_two_hosts_and_chunks_are_refused_in_the_consoles_words(
    console, request_head: str, status: int
) -> None:
    server, api = console
    answer = raw(server, (request_head.format(host=f"127.0.0.1:{server.port}") + "\r\n\r\n").encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode()), head
    assert b"Content-Security-Policy" in head and json.loads(body)["message"]
    assert api.calls == []


def test_a_head_request_is_answered_without_a_body(console) -> None:
    server, _ = console
    answer = raw(server, f"HEAD / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405") and body == b""


def test_only_the_apis_resources_are_forwarded(console) -> None:
    server, api = console
    for path in ("/api/health", "/api/openapi.json", "/api/jobs/../x", "/api//jobs", "/api/admin"):
        assert call(server, "GET", path, signed_in(server))[0] == 404, path
    assert api.calls == []


def test_every_answer_carries_a_policy_without_inline_script(console) -> None:
    server, _ = console
    for path in ("/", "/static/js/app.js", "/api/jobs", "/nowhere"):
        _, headers, _ = call(server, "GET", path)
        policy = headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy, path
        assert "unsafe-inline" not in policy
        assert headers["x-content-type-options"] == "nosniff"
    status, headers, page = call(server, "GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'<script type="module" src="/static/js/app.js"></script>' in page
    assert b"<script>" not in page and b"onerror" not in page and b"onclick" not in page


def test_the_server_listens_on_loopback_only(console) -> None:
    server, _ = console
    assert server.server_address[0] == "127.0.0.1"


def test_calls_reach_a_deployed_api_signed_with_sigv4_and_without_the_browsers_secrets() -> None:
    # Given an API on 127.0.0.1 that records what it receives, reached as a deployed one would be:
    # through the CLI's client signing with SigV4 (fixed credentials, no lookup)
    received: list[tuple[str, dict[str, str]]] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append((self.path, dict(self.headers.items())))
            payload = b'{"items": [], "next_cursor": null}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    api_server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=api_server.serve_forever, args=(0.05,), daemon=True).start()
    auth = SigV4Auth("eu-west-1", credentials=Credentials("AKIDEXAMPLE", "secret"))
    client = PunctualClient(f"http://127.0.0.1:{api_server.server_address[1]}/v1", auth)
    console = ConsoleServer(client, session=SESSION)
    threading.Thread(target=console.serve_forever, args=(0.05,), daemon=True).start()
    try:
        # When the signed-in page lists its failed jobs
        status, _, _ = call(console, "GET", "/api/jobs?outcome=failed", signed_in(console))
    finally:
        console.shutdown()
        console.server_close()
        api_server.shutdown()
        api_server.server_close()
    # Then the API got the request signed for execute-api, and nothing of the browser's session
    assert status == 200
    [(path, headers)] = received
    assert path == "/v1/jobs?outcome=failed"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]
    assert SESSION_HEADER not in headers and ACTION_HEADER not in headers
    assert SESSION.secret not in str(headers) and SESSION.action_token not in str(headers)
