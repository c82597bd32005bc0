"""The `http` task against a real server on 127.0.0.1: what it sends, how it reads the answer, and
the address guard at run time. Name resolution is stubbed; nothing leaves the machine."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.tasks import TaskFailed, TaskPolicy
from tests.stubs import StubResolver
from tests.unit.tasks.webhook import LOOPBACK, Reply, Webhook, context, http_failure, run_http

# --- what the http task sends ---------------------------------------------------------------------


def test_http_task_sends_method_path_body_headers_and_execution_identity(webhook: Webhook) -> None:
    # Given a PUT with a JSON body and a custom header, for attempt 2 of an execution
    params = {
        "url": webhook.url("/hooks/report?tenant=acme&x=1"),
        "method": "put",
        "headers": {"X-Tenant": "acme", "Authorization": "Bearer s3cret"},
        "body": {"report": "nightly", "sizes": [1, 2.5, None], "name": "café"},
    }

    # When the task runs
    run_http(params)

    # Then the receiver got exactly that request, with the four identity headers
    [request] = webhook.received
    assert request.method == "PUT"
    assert request.path == "/hooks/report?tenant=acme&x=1"
    assert json.loads(request.body) == params["body"]
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Tenant"] == "acme"
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert request.headers["X-Punctual-Job-Id"] == "job-42"
    assert request.headers["X-Punctual-Execution-Id"] == "job-42.19ad6b9e2a3.3"
    assert request.headers["X-Punctual-Scheduled-At"] == "2026-12-01T09:00:00.123Z"
    assert request.headers["X-Punctual-Attempt"] == "2"


def test_http_task_identity_headers_follow_the_context(webhook: Webhook) -> None:
    # Given another execution, attempt 1 / Then the headers say so (they are not constants)
    run_http(
        {"url": webhook.url()},
        context(
            job_id="j2",
            execution_id="j2.e",
            attempt=1,
            scheduled_at=datetime(2027, 1, 2, 3, 4, 5, tzinfo=UTC),
        ),
    )
    headers = webhook.received[0].headers
    assert (
        headers["X-Punctual-Job-Id"],
        headers["X-Punctual-Execution-Id"],
        headers["X-Punctual-Scheduled-At"],
        headers["X-Punctual-Attempt"],
    ) == ("j2", "j2.e", "2027-01-02T03:04:05.000Z", "1")


def test_http_task_posts_by_default(webhook: Webhook) -> None:
    run_http({"url": webhook.url()})
    assert webhook.received[0].method == "POST"


@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH", "HEAD"])
def test_http_task_uses_the_given_method(webhook: Webhook, method: str) -> None:
    run_http({"url": webhook.url(), "method": method})
    assert webhook.received[0].method == method


def test_http_task_without_body_sends_no_body_and_no_content_type(webhook: Webhook) -> None:
    run_http({"url": webhook.url(), "method": "GET"})
    request = webhook.received[0]
    assert request.body == b""
    assert "Content-Type" not in request.headers


@pytest.mark.parametrize(
    ("name", "value"),
    [("content-type", "application/cloudevents+json"), ("user-agent", "acme-hooks/2")],
)
def test_http_task_user_header_replaces_the_default_whatever_its_case(
    webhook: Webhook, name: str, value: str
) -> None:
    # Given a header Punctual also sets by default, written in lower case
    run_http({"url": webhook.url(), "headers": {name: value}, "body": {"a": 1}})

    # Then the receiver sees it once, with the user's value
    assert webhook.received[0].headers.get_all(name) == [value]


# --- how the http task reads the answer -----------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected_body"),
    [
        (Reply(200, b'{"ok": true, "n": 3}', {"Content-Type": "application/json"}), {"ok": True, "n": 3}),
        (Reply(201, b"created"), "created"),
        (Reply(204), None),
    ],
)
def test_http_task_2xx_succeeds_with_status_and_body(
    webhook: Webhook, reply: Reply, expected_body: Any
) -> None:
    webhook.replies["/hook"] = reply
    assert run_http({"url": webhook.url()}) == {"status": reply.status, "body": expected_body}


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (502, True),
        (503, True),
        (429, True),
        (408, True),
        (404, False),
        (400, False),
        (401, False),
        (410, False),
    ],
)
def test_http_task_error_status_fails_retryably_only_when_retrying_can_help(
    webhook: Webhook, status: int, retryable: bool
) -> None:
    # Given a receiver answering an error status
    webhook.replies["/hook"] = Reply(status, b'{"error": "nope"}')

    # When the task runs / Then it fails, retryable for 408, 429 and 5xx, with the answer as its result
    failure = http_failure({"url": webhook.url()})
    assert failure.retryable is retryable
    assert str(status) in str(failure)
    assert failure.result == {"status": status, "body": {"error": "nope"}}
    assert len(webhook.received) == 1  # one attempt per run: retries are the worker's business


def test_http_task_does_not_follow_redirects(webhook: Webhook) -> None:
    # Given a receiver redirecting to another path on the same server
    webhook.replies["/hook"] = Reply(302, headers={"Location": webhook.url("/elsewhere")})

    # When the task runs / Then the redirect is a final failure, and the target is never called
    failure = http_failure({"url": webhook.url()})
    assert failure.retryable is False
    assert failure.result["status"] == 302
    assert [r.path for r in webhook.received] == ["/hook"]


def test_http_task_connection_refused_is_retryable() -> None:
    # Given a port nothing listens on (bound, then closed)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    # When the task runs / Then it fails, retryably
    failure = http_failure({"url": f"http://127.0.0.1:{port}/hook"})
    assert failure.retryable is True


@pytest.mark.parametrize(
    ("params_timeout", "context_timeout"),
    [(0.5, 30), (10, 0.3)],
    ids=["task-timeout", "job-timeout-is-the-ceiling"],
)
def test_http_task_timeout_is_retryable(
    webhook: Webhook, params_timeout: float, context_timeout: float
) -> None:
    # Given a receiver that does not answer
    webhook.replies["/hook"] = Reply(hang=True)

    # When the task runs with the smaller of its own and the job's timeout
    started = time.monotonic()
    failure = http_failure(
        {"url": webhook.url(), "timeout_seconds": params_timeout}, context(timeout_seconds=context_timeout)
    )
    elapsed = time.monotonic() - started

    # Then it gives up after about that long, retryably
    assert failure.retryable is True
    assert min(params_timeout, context_timeout) * 0.8 <= elapsed < 3


# --- the address guard, at run time ---------------------------------------------------------------


def test_http_task_refuses_a_name_resolving_to_loopback_without_connecting(webhook: Webhook) -> None:
    # Given a deployment that allows no private network, and a name that resolves to 127.0.0.1
    resolver = StubResolver({"hooks.example.test": ["127.0.0.1"]})
    ctx = context(allowed_networks=(), resolver=resolver)

    # When the task runs / Then it fails for good, and the receiver never saw a request
    failure = http_failure({"url": webhook.url(host="hooks.example.test")}, ctx)
    assert failure.retryable is False
    assert "127.0.0.1" in str(failure)
    assert webhook.received == []


def test_http_task_refuses_a_literal_loopback_url_once_loopback_is_no_longer_allowed(
    webhook: Webhook,
) -> None:
    # Given a job validated while loopback was allowed, run by a deployment that does not allow it
    spec = tasks.validate(TaskSpec(type="http", params={"url": webhook.url()}), TaskPolicy(LOOPBACK))

    # When it runs / Then it is refused without connecting
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec, context(allowed_networks=()))
    assert caught.value.retryable is False
    assert webhook.received == []


def test_http_task_connects_to_the_checked_address_and_keeps_the_host_name(webhook: Webhook) -> None:
    # Given a name that resolves (once) to an allowed address
    resolver = StubResolver({"hooks.example.test": ["127.0.0.1"]})

    # When the task runs
    run_http({"url": webhook.url(host="hooks.example.test")}, context(resolver=resolver))

    # Then it looked the name up once (no second lookup to rebind), connected to that address, and
    # sent the name in Host
    assert resolver.asked == [("hooks.example.test", webhook.port)]
    assert webhook.received[0].headers["Host"] == f"hooks.example.test:{webhook.port}"
