"""The local stack's HTTP front end: the events it hands the API function, and how it answers."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from punctual_client.errors import ApiError
from punctual_client.transport import PunctualClient
from punctual_local.connection import Limits
from punctual_local.server import ApiServer


@pytest.fixture
def served() -> Iterator[tuple[ApiServer, list[dict[str, Any]]]]:
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        events.append(event)
        # an HTTP API (payload 2.0) answer: headers one value each, cookies apart
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json"},
            "cookies": ["a=1", "b=2"],
            "body": '{"ok": true}',
            "isBase64Encoded": False,
        }

    server = ApiServer(("127.0.0.1", 0), invoke, {"t1": "alice"}, access_log=False)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, events
    finally:
        server.shutdown()
        server.server_close()


def test_requests_reach_the_api_function_as_http_api_events(served):
    server, events = served
    # When a client calls the local stack with its token
    request = urllib.request.Request(
        f"{server.url}/jobs/job%5F1?limit=2",
        headers={"Authorization": "Bearer t1", "X-Trace": "1"},
        method="GET",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        status, cookies, body = answer.status, answer.headers.get_all("Set-Cookie"), answer.read()
    # Then the function got a payload 2.0 event with the token's owner where the IAM authorizer
    # puts the caller, and no credentials
    (event,) = events
    assert event["version"] == "2.0"
    assert event["requestContext"]["authorizer"]["iam"]["userArn"] == "alice"
    assert event["rawPath"] == "/jobs/job_1"
    assert event["rawQueryString"] == "limit=2"
    assert event["headers"]["x-trace"] == "1"
    assert "authorization" not in event["headers"]
    # and its answer, cookies included, is the HTTP response
    assert (status, body) == (200, b'{"ok": true}')
    assert cookies == ["a=1", "b=2"]


def raw(server: ApiServer, method: str, target: str, **headers: str) -> tuple[int, str, Any]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=5)
    try:
        connection.request(method, target, headers={"Authorization": "Bearer t1", **headers})
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type") or "", json.loads(answer.read())
    finally:
        connection.close()


@pytest.mark.parametrize("method", ["TRACE", "PROPFIND", "BREW"])
def test_any_other_method_is_answered_in_the_apis_error_shape(served, method):
    server, events = served
    status, content_type, body = raw(server, method, "/jobs")
    assert (status, content_type) == (405, "application/json")
    assert method in body["message"]
    assert events == []


def test_a_request_line_too_long_is_answered_as_json(served):
    server, _ = served
    status, content_type, body = raw(server, "GET", "/jobs?q=" + "x" * 100_000)
    assert (status, content_type) == (414, "application/json")
    assert body["message"]


def test_a_client_that_expects_100_continue_gets_it_before_it_sends_its_body_and_then_its_answer(served):
    server, events = served
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=5) as client:
        client.sendall(
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\nContent-Length: 2\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        # (answered at once, though the answers after it wait in a buffer until their request is done)
        assert client.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n")
        client.sendall(b"{}")
        answer = b""
        while b'{"ok": true}' not in answer:
            chunk = client.recv(4096)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert events[0]["body"] == "{}"


def test_a_client_that_disconnects_early_is_one_line_and_the_server_goes_on(served, capsys):
    server, events = served
    host, port = server.server_address[:2]
    # Given a client that announces a body and leaves before sending it
    with socket.create_connection((str(host), int(port)), timeout=5) as client:
        client.sendall(
            b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\nContent-Length: 100\r\n\r\n{"
        )
    # Then the function is not called, no traceback is printed, and the next request is answered
    assert raw(server, "GET", "/jobs")[0] == 200
    assert len(events) == 1 and events[0]["requestContext"]["http"]["method"] == "GET"
    assert "Traceback" not in capsys.readouterr().err


def test_while_the_data_directory_fails_writes_are_503_with_the_reason_and_the_rest_goes_on():
    # Given a stack whose store cannot save a write (its disk is full), its function answering as then
    full = [True]
    calls: list[str] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        http = event["requestContext"]["http"]
        calls.append(f"{http['method']} {http['path']}")
        if full[0] and http["method"] != "GET" and http["path"] != "/schedules/preview":
            return {"statusCode": 500, "body": '{"message": "Internal server error"}'}
        created = http["method"] == "POST" and http["path"] == "/jobs"
        return {"statusCode": 201 if created else 200, "body": "{}"}

    server = ApiServer(
        ("127.0.0.1", 0),
        invoke,
        {"t1": "alice"},
        access_log=False,
        storage_failure=lambda: "No space left on device (errno 28)" if full[0] else None,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # When a write fails, Then it is answered 503 saying why
        status, _, body = raw(server, "POST", "/jobs", **{"Content-Length": "0"})
        assert status == 503 and "No space left on device" in body["message"]
        # And a call that stores nothing, and reads, are answered meanwhile
        assert raw(server, "POST", "/schedules/preview", **{"Content-Length": "0"})[0] == 200
        assert raw(server, "GET", "/jobs")[0] == 200
        # When the disk has room again, Then the next write is answered without a restart
        full[0] = False
        assert raw(server, "POST", "/jobs", **{"Content-Length": "0"})[0] == 201
        assert calls == ["POST /jobs", "POST /schedules/preview", "GET /jobs", "POST /jobs"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_write_the_store_refused_is_503_even_when_the_disk_takes_a_smaller_write_by_then():
    # Given a function whose write the store refused, raised as the SDK raises it, while a smaller
    # write that fitted since makes the store's status say it takes writes again
    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        error = {"Error": {"Code": "PunctualStorageFailed", "Message": "File too large (errno 27)"}}
        try:
            raise ClientError(error, "PutItem")
        except ClientError as exc:
            raise RuntimeError("the store failed") from exc

    server = ApiServer(
        ("127.0.0.1", 0), invoke, {"t1": "alice"}, access_log=False, storage_failure=lambda: None
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # When a creation meets it, Then it is answered 503 with the store's reason, not 502
        status, content_type, body = raw(server, "POST", "/jobs", **{"Content-Length": "0"})
        assert (status, content_type) == (503, "application/json")
        assert "cannot save changes" in body["message"] and "File too large" in body["message"], body
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_that_leaves_before_its_answer_is_one_line_and_the_server_goes_on(capsys):
    # Given a slow answer, larger than the socket's buffers, to a client that leaves before it comes
    # (the local stack's log printed a BrokenPipeError traceback for this)
    def slow(event: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.3)
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json"},
            "body": '"' + "x" * 4_000_000 + '"',
        }

    server = ApiServer(("127.0.0.1", 0), slow, {"t1": "alice"}, access_log=False)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), int(port)), timeout=5) as client:
            client.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\n\r\n")
        time.sleep(0.6)
        # Then no traceback is printed, and the next request is answered
        assert raw(server, "GET", "/jobs")[0] == 200
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------------ hostile and slow clients
def exchange(server: ApiServer, data: bytes, *, wait: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, then read one answer: its status, headers (lowercased) and body."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=wait) as client:
        client.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = client.recv(65536)
            assert chunk, answer
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        while len(body) < int(headers.get("content-length", 0)):
            chunk = client.recv(65536)
            assert chunk, answer
            body += chunk
    return int(status_line.split(" ")[1]), headers, body


@pytest.fixture
def strict() -> Iterator[tuple[ApiServer, list[dict[str, Any]]]]:
    """A server with short timeouts and small limits, whose function records the events it gets."""
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        events.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}

    limits = Limits(head_seconds=0.5, body_seconds=0.5, idle_seconds=0.5, body_bytes=1000)
    server = ApiServer(("127.0.0.1", 0), invoke, {"t1": "alice"}, access_log=False, limits=limits)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server, events
    finally:
        server.shutdown()
        server.server_close()


def test_a_caller_without_a_token_is_refused_before_its_body_is_read(served):
    server, events = served
    # Given a chunked body with no token and a chunk size of -1, whose data has not been sent
    head = b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n"
    # Then it is answered 401 at once (the old front end read the body first, to its end)
    status, headers, _ = exchange(server, head)
    assert status == 401 and headers["connection"] == "close"
    assert events == []


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(served):
    server, events = served
    status, _, body = exchange(
        server,
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\nContent-Length: 11000000\r\n\r\n",
    )
    assert status == 413 and b"10485760" in body
    assert events == []


def test_a_chunked_body_over_the_limit_is_refused(strict):
    server, events = strict
    status, _, _ = exchange(
        server,
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"3e8\r\n"
        + b"x" * 1000
        + b"\r\n1\r\nx\r\n0\r\n\r\n",
    )
    assert status == 413
    assert events == []


@pytest.mark.parametrize(
    "framing",
    [
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\n-1\r\n" + b"x" * 1000, id="chunk size -1"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\n0x1b\r\n" + b"x" * 27 + b"\r\n0\r\n\r\n", id="0x1b"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\n+1b\r\n" + b"x" * 27 + b"\r\n0\r\n\r\n", id="+1b"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\n1_b\r\n" + b"x" * 27 + b"\r\n0\r\n\r\n", id="1_b"),
        pytest.param(
            b"Transfer-Encoding: chunked\r\n\r\n" + b"0" * 1999 + b"2\r\n{}\r\n0\r\n\r\n", id="long size"
        ),
        pytest.param(b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", id="two lengths"),
    ],
)
def test_a_body_framed_ambiguously_is_refused_with_400(served, framing):
    server, events = served
    # Given a request with a token whose body's framing is not exactly HTTP/1.1's
    request = b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\n" + framing
    # Then it is answered 400 at once, and the function is not called
    status, headers, _ = exchange(server, request)
    assert status == 400 and headers["content-type"] == "application/json"
    assert events == []


def test_a_transfer_coding_other_than_chunked_is_not_read_as_chunked(served):
    server, events = served
    status, _, _ = exchange(
        server,
        b"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\nTransfer-Encoding: notchunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n",
    )
    assert status == 501
    assert events == []


def test_headers_over_the_limit_are_refused_with_431(served):
    server, events = served
    status, _, _ = exchange(server, b"GET /jobs HTTP/1.1\r\nHost: x\r\nX-Big: " + b"x" * 70_000 + b"\r\n\r\n")
    assert status == 431
    assert events == []


def test_a_client_slow_to_send_its_headers_is_answered_408_and_dropped(strict):
    server, events = strict
    host, port = server.server_address[:2]
    # Given a client that sends its headers a byte at a time, slower than the head's time limit
    with socket.create_connection((str(host), int(port)), timeout=5) as client:
        client.sendall(b"GET /jobs HTTP/1.1\r\n")
        answer = b""
        for byte in b"Host: x\r\nAuthorization: Bearer t1\r\n\r\n":
            try:
                client.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
        # Then the connection is answered 408 and closed before the head is complete
        while chunk := client.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert events == []


def test_an_idle_connection_is_closed_after_its_limit(strict):
    server, _ = strict
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=5) as client:
        # (closed without an answer: the client asked nothing)
        assert client.recv(100) == b""


def test_requests_over_the_admission_limit_are_answered_503_with_retry_after():
    # Given a server that lets one request into the function at once and none wait, and one request in
    release, inside = threading.Event(), threading.Event()

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        inside.set()
        release.wait(5)
        return {"statusCode": 200, "body": "{}"}

    limits = Limits(active=1, queued=0)
    server = ApiServer(("127.0.0.1", 0), invoke, {"t1": "alice"}, access_log=False, limits=limits)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        first = threading.Thread(target=raw, args=(server, "GET", "/jobs"))
        first.start()
        assert inside.wait(5)
        # When another comes, Then it is answered 503 at once, with when to retry
        status, headers, body = exchange(
            server, b"GET /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t1\r\n\r\n"
        )
        assert (status, headers["retry-after"]) == (503, "1")
        assert "busy" in json.loads(body)["message"]
        # And once the first is answered, the next gets in
        release.set()
        first.join(5)
        assert raw(server, "GET", "/jobs")[0] == 200
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_requests_share_a_kept_alive_connection_and_a_head_is_answered_without_a_body(served):
    server, events = served
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=5)
    try:
        for method in ("GET", "HEAD", "GET"):
            connection.request(method, "/jobs", headers={"Authorization": "Bearer t1"})
            answer = connection.getresponse()
            body = answer.read()
            assert answer.status == 200
            assert body == (b"" if method == "HEAD" else b'{"ok": true}')
        # (no token: refused, and the connection still serves the next request)
        connection.request("GET", "/jobs")
        assert connection.getresponse().read() and len(events) == 3
        connection.request("GET", "/health")
        connection.getresponse().read()
    finally:
        connection.close()
    assert [e["requestContext"]["http"]["method"] for e in events] == ["GET", "GET", "GET", "GET"]


def test_the_cli_client_sends_a_request_refused_for_load_again_after_the_wait_it_names():
    # Given a server that lets one request in at once, and one request in
    release, inside = threading.Event(), threading.Event()

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        inside.set()
        release.wait(5)
        return {"statusCode": 200, "body": '{"items": [], "next_cursor": null}'}

    server = ApiServer(
        ("127.0.0.1", 0), invoke, {"t1": "alice"}, access_log=False, limits=Limits(active=1, queued=0)
    )
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        first = threading.Thread(target=raw, args=(server, "GET", "/jobs"))
        first.start()
        assert inside.wait(5)
        waits: list[float] = []

        def sleep(seconds: float) -> None:  # the first request ends while the client waits
            waits.append(seconds)
            release.set()
            first.join(5)

        client = PunctualClient.from_endpoint(server.url, token="t1")
        client.sleep = sleep
        # When the CLI's client lists jobs, Then it is refused once, waits as told, and gets its answer
        assert client.request("GET", "/jobs").status == 200
        assert waits == [1.0]
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_the_cli_client_does_not_wait_out_a_long_refusal():
    # Given a stack whose data directory refuses writes (503, retry in 60 s)
    server = ApiServer(
        ("127.0.0.1", 0),
        lambda event: {"statusCode": 500, "body": "{}"},
        {"t1": "alice"},
        access_log=False,
        storage_failure=lambda: "No space left on device (errno 28)",
    )
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        client = PunctualClient.from_endpoint(server.url, token="t1")
        client.sleep = lambda seconds: pytest.fail(f"waited {seconds} s")
        # When it creates a job, Then the 503 is its error at once
        with pytest.raises(ApiError) as raised:
            client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}})
        assert raised.value.status == 503
    finally:
        server.shutdown()
        server.server_close()
