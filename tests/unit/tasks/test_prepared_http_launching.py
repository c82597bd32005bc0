"""The `http` task prepared ahead of its start, launched: its request sent on the connection opened
ahead without waiting for the answer, which `fire` then takes; and, where it cannot be launched, a
start by `fire` as good as before. Name resolution is stubbed; nothing leaves the machine."""

from __future__ import annotations

import resource
import socket
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from punctual import tasks
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskFailed, http_ahead
from punctual.tasks.http import HttpParams
from punctual.tasks.http_ahead import connections_max
from tests.unit.tasks.connections import Listener
from tests.unit.tasks.test_prepared_http_resend import scripted
from tests.unit.tasks.webhook import context, http_spec

KEY = b"k" * 32


def test_a_launched_request_goes_on_the_connection_opened_ahead_and_fire_takes_its_answer(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    # Given a prepared webhook, its connection open
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url, "body": {"n": 1}}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    # When it is launched
    assert prepared.launch(ctx) is True
    # Then its request reaches the receiver before anything waits for the answer
    receiver.wait_for(lambda r: len(r.requests()) == 1)
    # and fire takes that answer, sending nothing more
    assert prepared.fire(ctx) == {"status": 200, "body": {"ok": True}}
    [only] = receiver.requests()
    assert only.request is not None and only.request[3] == b'{"n": 1}'
    assert only.request[2]["X-Punctual-Execution-Id"] == ctx.execution_id
    assert len(receiver.connections) == 1 and len(connects) == 1


def test_a_webhook_whose_connection_the_server_closed_is_not_launched_and_fire_connects_afresh(
    receiver: Listener, clock: ManualClock
) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    assert receiver.close_idle() == 1
    receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    assert prepared.launch(ctx) is False and receiver.requests() == []
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.connections) == 2 and len(receiver.requests()) == 1


def test_a_webhook_without_a_connection_held_ahead_is_not_launched(
    receiver: Listener, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process holding no connection ahead
    monkeypatch.setattr(http_ahead, "_OPEN_AHEAD", threading.BoundedSemaphore(1))
    http_ahead._OPEN_AHEAD.acquire()
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    # Then it does not launch, and starts cold when fired
    assert prepared.launch(ctx) is False and receiver.connections == {}
    assert prepared.fire(ctx)["status"] == 200 and len(receiver.requests()) == 1


def test_a_launch_reset_before_its_request_went_out_is_sent_by_fire_on_a_fresh_connection(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a prepared webhook whose server resets the idle connection just before the start
    with scripted("reset when told") as server:
        ctx = context(clock=clock)
        prepared = tasks.prepare(http_spec({"url": server.url, "body": {"n": 1}}, ctx), ctx)
        monkeypatch.setattr(http_ahead, "_still_open", lambda sock: True)
        server.let_go.set()
        assert server.gone.wait(10)
        # When it is launched (the send meets the reset), then fired
        prepared.launch(ctx)
        # Then the request is sent once more, on a connection of its own, and answered
        assert prepared.fire(ctx) == {"status": 200, "body": {"ok": True}}
        assert server.accepted == 2 and len(server.requests) == 1


def test_a_launched_request_the_server_read_and_did_not_answer_fails_retryable(clock: ManualClock) -> None:
    with scripted("close after reading") as server:
        ctx = context(clock=clock, timeout_seconds=5)
        prepared = tasks.prepare(http_spec({"url": server.url}, ctx), ctx)
        server.wait_accepted(1)
        assert prepared.launch(ctx) is True
        with pytest.raises(TaskFailed) as failed:
            prepared.fire(ctx)
        # (as a cold start's would: never sent again, since the server may have acted on it)
        assert failed.value.retryable and server.accepted == 1 and len(server.requests) == 1


def test_closing_a_launched_call_that_never_fired_closes_its_connection(
    receiver: Listener, clock: ManualClock
) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    assert prepared.launch(ctx) is True
    receiver.wait_for(lambda r: len(r.requests()) == 1)
    prepared.close()
    prepared.close()  # (idempotent)


def test_a_call_prepared_for_other_references_is_not_launched(receiver: Listener, clock: ManualClock) -> None:
    # Given a webhook prepared for one attempt's references, launched with another's
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    other = context(clock=clock, attempt=ctx.attempt + 1)
    # Then it is not launched; fire runs it cold with the references it gets
    assert prepared.launch(other) is False and receiver.requests() == []


def test_the_connections_held_ahead_are_half_the_descriptors_left_beside_the_process_own() -> None:
    # Lambda gives an environment 1,024 descriptors: a default pack's worth, 500
    assert connections_max(1024) == 500
    assert connections_max(10) == 0
    # a limit past what is counted (or none) counts as that much
    assert connections_max(resource.RLIM_INFINITY) == connections_max(10**9) == connections_max(20_000)


def test_the_request_is_written_while_it_holds_and_launched_as_a_cold_start_would_send_it(
    receiver: Listener, clock: ManualClock, sends: list[Any]
) -> None:
    # Given a signed webhook due in 3 seconds, prepared now
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=3), signing_keys=(KEY,))
    task = http_spec({"url": receiver.url, "body": {"n": 1}, "headers": {"X-Team": "a"}}, ctx)
    prepared = tasks.prepare(task, ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    # Then nothing of it was sent while it holds
    assert sends == []
    # When its instant comes and it is launched
    clock.advance(3)
    assert prepared.launch(ctx) is True
    assert prepared.fire(ctx)["status"] == 200
    # Then it went at the instant, and carries what a cold start sends then, signature included
    cold = context(clock=clock, scheduled_at=ctx.scheduled_at, signing_keys=(KEY,))
    assert tasks.run(task, cold)["status"] == 200
    launched, started_cold = (
        c.request for c in sorted(receiver.requests(), key=lambda c: c.requested_at or ctx.scheduled_at)
    )
    assert launched is not None and started_cold is not None
    assert launched[2] == started_cold[2] and launched[3] == started_cold[3]
    assert min(sends) >= ctx.scheduled_at


def test_a_request_written_for_one_start_is_not_sent_for_another(
    receiver: Listener, clock: ManualClock
) -> None:
    # Given a webhook prepared for one execution's start, fired for another's
    ctx = context(clock=clock)
    prepared = http_ahead.prepare_call(HttpParams(url=receiver.url), ctx)
    other = context(clock=clock, execution_id="job-42.19ad6b9e2a3.4")
    # Then it is not launched, and fired it goes cold with the other's identity
    assert prepared.launch(other) is False
    assert prepared.fire(other)["status"] == 200
    [request] = receiver.requests()
    assert request.request is not None and request.request[2]["X-Punctual-Execution-Id"] == other.execution_id


def test_a_launched_answer_taken_after_its_timeout_ended_is_not_waited_for_again(clock: ManualClock) -> None:
    # Given a server that takes a request and never answers
    with socket.create_server(("127.0.0.1", 0)) as server:
        held: list[socket.socket] = []
        threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
        ctx = context(clock=clock)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/"
        prepared = tasks.prepare(http_spec({"url": url}, ctx), ctx)
        assert prepared.awaited() is None  # (nothing launched: nothing to wait on)
        # When it is launched, and its answer taken only once its timeout has ended
        assert prepared.launch(ctx) is True
        awaited = prepared.awaited()
        assert awaited is not None and awaited.by == clock.now() + timedelta(seconds=ctx.timeout_seconds)
        clock.advance(ctx.timeout_seconds + 1)
        began = time.monotonic()
        # Then it has timed out, without a whole timeout more of waiting
        with pytest.raises(TaskFailed, match="timed out"):
            prepared.fire(ctx)
        assert time.monotonic() - began < 1
        for sock in held:
            sock.close()
