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

from punctual.local.server import ApiServer


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


def test_writes_are_refused_with_503_and_the_reason_once_the_data_directory_fails():
    # Given a stack whose store failed to save a write (its disk is full)
    calls: list[str] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        calls.append(event["requestContext"]["http"]["method"])
        return {"statusCode": 500, "body": '{"message": "Internal server error"}'}

    server = ApiServer(
        ("127.0.0.1", 0),
        invoke,
        {"t1": "alice"},
        access_log=False,
        storage_failure=lambda: "No space left on device (errno 28)",
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # When a write fails, Then it is answered 503 saying why
        status, _, body = raw(server, "POST", "/jobs", **{"Content-Length": "0"})
        assert status == 503 and "No space left on device" in body["message"]
        # And later writes are refused without reaching the function, while reads still do
        assert raw(server, "DELETE", "/jobs/job_1")[0] == 503
        raw(server, "GET", "/jobs")
        assert calls == ["POST", "GET"]
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
