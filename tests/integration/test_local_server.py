"""The local stack's HTTP front end: the events it hands the API function, and how it answers."""

from __future__ import annotations

import threading
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
