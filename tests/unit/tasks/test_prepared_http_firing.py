"""The `http` task prepared ahead of its start, fired: a start as good as a cold one whatever happened
to its connection meanwhile (closed by the server, never opened, idle too long), with the same
request (templates, signature, attempt) and the same reading of the answer. Name resolution is
stubbed; nothing leaves the machine."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.platform import signing
from punctual.platform.clock import ManualClock
from punctual.tasks import PREPARE_AHEAD_SECONDS, TaskFailed, http_wire
from punctual.tasks.http_ahead import PREPARED_IDLE_SECONDS
from tests.unit.tasks.connections import Listener
from tests.unit.tasks.webhook import Reply, Webhook, context, http_spec


def test_a_connection_the_server_closed_while_it_waited_is_replaced_at_the_start(
    receiver: Listener, clock: ManualClock
) -> None:
    # Given a prepared webhook whose connection the server closed while it waited
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    assert receiver.close_idle() == 1
    receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    # When it fires / Then it connects afresh and succeeds
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.connections) == 2 and len(receiver.requests()) == 1


def test_a_tls_connection_the_server_closed_is_replaced_at_the_start(
    tls_receiver: Listener, clock: ManualClock
) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": tls_receiver.url}, ctx), ctx)
    tls_receiver.wait_for(lambda r: len(r.connections) == 1)
    assert tls_receiver.close_idle() == 1
    tls_receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    assert prepared.fire(ctx)["status"] == 200
    assert len(tls_receiver.connections) == 2 and len(tls_receiver.requests()) == 1


def test_a_failed_early_connect_is_made_again_at_the_start(
    receiver: Listener, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, connects: list[tuple[str, int]]
) -> None:
    # Given a connection that could not be opened ahead
    real = socket.create_connection
    failing = [True]

    def flaky(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        if failing.pop() if failing else False:
            raise ConnectionRefusedError("not yet")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(http_wire.socket, "create_connection", flaky)
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    # When it fires / Then it connects then, and succeeds: preparing made no failure
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.requests()) == 1


def test_a_connection_idle_longer_than_the_bound_is_not_used(receiver: Listener, clock: ManualClock) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    # When it fires longer after its preparing than a connection may wait idle
    clock.advance(PREPARED_IDLE_SECONDS + 1)
    assert prepared.fire(ctx)["status"] == 200
    # Then the request went on a fresh connection, and the old one was closed
    receiver.wait_for(
        lambda r: len(r.connections) == 2 and any(c.ended_unused for c in r.connections.values())
    )
    assert len(receiver.requests()) == 1


def test_a_connection_opened_the_furthest_ahead_serves_a_start_that_comes_late(
    receiver: Listener, clock: ManualClock
) -> None:
    # Given a connection opened as far ahead as may be, and a start that comes a second late
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=PREPARE_AHEAD_SECONDS))
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    clock.advance(PREPARE_AHEAD_SECONDS + 1)
    # Then the request goes on it
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.connections) == 1 and len(receiver.requests()) == 1


TEMPLATED: dict[str, Any] = {
    "url": "/{{ job.name | urlencode }}?run={{ execution.id }}",
    "method": "PUT",
    "headers": {"X-Run": "{{ execution.id }} of {{ job.id }}", "X-Attempt": "try {{ execution.attempt }}"},
    "body": {
        "at": "{{ execution.scheduled_at }}",
        "attempt": "{{ execution.attempt }}",
        "name": "{{ job.name }}",
    },
}


def _templated(url: str) -> dict[str, Any]:
    params = json.loads(json.dumps(TEMPLATED))
    params["url"] = url.removesuffix("/hook") + TEMPLATED["url"]
    return params


def test_templates_render_the_same_prepared_as_cold(receiver: Listener, clock: ManualClock) -> None:
    # Given a task whose URL, headers and body refer to the execution
    ctx = context(clock=clock, job_name="nightly report", attempt=1)
    task = http_spec(_templated(receiver.url), ctx)
    # When it runs cold, then prepared and fired
    tasks.run(task, ctx)
    tasks.prepare(task, ctx).fire(ctx)
    # Then both requests are the same
    cold, prepared = sorted(receiver.requests(), key=lambda c: c.accepted_at)
    assert cold.request is not None and prepared.request is not None
    assert cold.request == prepared.request
    method, path, headers, body = prepared.request
    assert (method, path) == ("PUT", "/nightly%20report?run=job-42.19ad6b9e2a3.3")
    assert headers["X-Attempt"] == "try 1" and json.loads(body)["attempt"] == 1


def test_a_start_of_another_attempt_than_prepared_for_runs_cold(
    receiver: Listener, clock: ManualClock
) -> None:
    ctx = context(clock=clock, attempt=1)
    prepared = tasks.prepare(http_spec(_templated(receiver.url), ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    # When it fires as attempt 2 / Then its templates say 2, and the connection made for 1 is closed
    prepared.fire(context(clock=clock, attempt=2))
    [request] = receiver.requests()
    assert request.request is not None and json.loads(request.request[3])["attempt"] == 2
    receiver.wait_for(
        lambda r: len(r.connections) == 2 and any(c.ended_unused for c in r.connections.values())
    )


def test_a_prepared_start_reads_its_answer_as_a_cold_one(webhook: Webhook, clock: ManualClock) -> None:
    # Given a server that answers 503 (a retryable status) with a body
    webhook.replies["/busy"] = Reply(503, b'{"retry": "later"}')
    ctx = context(clock=clock)
    task = http_spec({"url": webhook.url("/busy")}, ctx)
    # When it is started prepared, and cold / Then it fails the same way, with the same result
    with pytest.raises(TaskFailed) as fired:
        tasks.prepare(task, ctx).fire(ctx)
    with pytest.raises(TaskFailed) as cold:
        tasks.run(task, ctx)
    assert fired.value.retryable and fired.value.result == {"status": 503, "body": {"retry": "later"}}
    assert (str(fired.value), fired.value.result) == (str(cold.value), cold.value.result)


def test_a_prepared_start_to_where_nothing_listens_fails_as_a_cold_one(clock: ManualClock) -> None:
    ctx = context(clock=clock)
    task = http_spec({"url": "http://127.0.0.1:9/nothing-listens"}, ctx)
    with pytest.raises(TaskFailed) as fired:
        tasks.prepare(task, ctx).fire(ctx)
    with pytest.raises(TaskFailed) as cold:
        tasks.run(task, ctx)
    assert (str(fired.value), fired.value.retryable) == (str(cold.value), cold.value.retryable)
    assert fired.value.retryable


def test_a_task_type_that_does_not_prepare_starts_cold() -> None:
    ctx = context()
    task = tasks.validate(TaskSpec(type="noop", params={}), ctx.policy)
    assert tasks.prepare(task, ctx).fire(ctx) == tasks.run(task, ctx)


def test_a_prepared_start_is_signed_when_it_fires(receiver: Listener, clock: ManualClock) -> None:
    # Given a signed webhook prepared 5 seconds before its start
    ctx = context(clock=clock, signing_keys=(b"k" * 32,), scheduled_at=clock.now() + timedelta(seconds=5))
    prepared = tasks.prepare(http_spec({"url": receiver.url, "body": {"n": 1}}, ctx), ctx)
    # When it fires at its instant / Then its signature's timestamp is the start's
    clock.advance(5)
    prepared.fire(ctx)
    [request] = receiver.requests()
    assert request.request is not None
    assert request.request[2][signing.TIMESTAMP_HEADER] == str(int(clock.now().timestamp()))
