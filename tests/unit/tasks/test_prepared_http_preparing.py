"""The `http` task prepared ahead of its start (tasks.prepare): its address checked and its connection
opened while it holds, and nothing of its request sent until it fires; at most a bounded number of
connections held open ahead, each given back however preparing ends. Name resolution is stubbed;
nothing leaves the machine."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from datetime import timedelta
from typing import Any

import pytest

from punctual import tasks
from punctual.platform.clock import ManualClock
from punctual.tasks import PREPARE_AHEAD_SECONDS, TaskFailed, http_ahead, http_wire
from tests.stubs import StubResolver
from tests.unit.tasks.connections import Listener
from tests.unit.tasks.webhook import context, http_spec


def test_preparing_opens_the_connection_and_the_request_goes_on_it_only_when_fired(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]], sends: list[Any]
) -> None:
    # Given a webhook due in 3 seconds
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=3))
    task = http_spec({"url": receiver.url, "body": {"n": 1}}, ctx)
    # When it is prepared
    prepared = tasks.prepare(task, ctx)
    # Then its connection is open, and nothing of the request was sent
    receiver.wait_for(lambda r: len(r.connections) == 1)
    assert len(connects) == 1 and sends == []
    # When its instant comes and it fires
    clock.advance(3)
    result = prepared.fire(ctx)
    # Then the request went on the connection opened ahead, sent at the instant, not before
    assert result == {"status": 200, "body": {"ok": True}}
    [only] = receiver.requests()
    assert len(receiver.connections) == 1 and len(connects) == 1
    assert only.accepted_at < ctx.scheduled_at <= only.requested_at  # type: ignore[operator]
    assert sends and min(sends) >= ctx.scheduled_at


def test_no_connection_is_opened_for_a_start_further_off_than_a_connection_may_wait(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=PREPARE_AHEAD_SECONDS + 5))
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    assert connects == []
    clock.set(ctx.scheduled_at)
    assert prepared.fire(ctx)["status"] == 200 and len(connects) == 1


@pytest.mark.parametrize(("ahead", "connect_timeout"), [(3, 3), (0, http_ahead.EARLY_CONNECT_MIN_SECONDS)])
def test_an_early_connect_gets_no_longer_than_the_time_left_and_the_request_its_whole_timeout(
    receiver: Listener,
    clock: ManualClock,
    connects: list[tuple[str, int]],
    connect_timeouts: list[float],
    monkeypatch: pytest.MonkeyPatch,
    ahead: int,
    connect_timeout: float,
) -> None:
    # Given a task with a 5 s timeout, prepared `ahead` seconds before its start
    ctx = context(clock=clock, timeout_seconds=5, scheduled_at=clock.now() + timedelta(seconds=ahead))
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    # Then its connect waited at most the time left (a second at least)
    assert connect_timeouts == [connect_timeout]
    # and when it fires, its request and answer get the task's whole timeout
    seen: list[float | None] = []
    real = http.client.HTTPConnection.getresponse

    def getresponse(self: http.client.HTTPConnection) -> Any:
        assert self.sock is not None
        seen.append(self.sock.gettimeout())
        return real(self)

    monkeypatch.setattr(http.client.HTTPConnection, "getresponse", getresponse)
    clock.advance(ahead)
    prepared.fire(ctx)
    assert seen == [5] and len(connects) == 1


def test_the_address_guard_refuses_at_preparing_and_nothing_is_connected(
    clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    # Given a host that resolves to a private address, and a deployment that allows none
    resolver = StubResolver({"hooks.example": ["10.0.0.5"]})
    ctx = context(clock=clock, resolver=resolver, allowed_networks=())
    task = http_spec({"url": "http://hooks.example/hook"}, ctx)
    # When it is prepared / Then nothing is connected
    prepared = tasks.prepare(task, ctx)
    assert resolver.asked == [("hooks.example", 80)] and connects == []
    # and when it fires it is refused as a cold start is, never connected
    with pytest.raises(TaskFailed) as fired:
        prepared.fire(ctx)
    with pytest.raises(TaskFailed) as cold:
        tasks.run(task, ctx)
    assert str(fired.value) == str(cold.value) and "10.0.0.5" in str(fired.value)
    assert not fired.value.retryable and connects == []


def test_the_address_connected_to_is_the_address_checked_and_not_looked_up_again(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    resolver = StubResolver({"hooks.example": ["127.0.0.1"]})
    ctx = context(clock=clock, resolver=resolver)
    prepared = tasks.prepare(http_spec({"url": f"http://hooks.example:{port}/hook"}, ctx), ctx)
    assert prepared.fire(ctx)["status"] == 200
    assert connects == [("127.0.0.1", port)] and resolver.asked == [("hooks.example", port)]
    [request] = receiver.requests()
    assert request.request is not None and request.request[2]["Host"] == f"hooks.example:{port}"


def test_past_the_most_connections_held_ahead_a_start_connects_cold(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process that may hold one connection open ahead
    held = threading.BoundedSemaphore(1)
    monkeypatch.setattr(http_ahead, "_OPEN_AHEAD", held)
    ctx = context(clock=clock)
    # When two webhooks are prepared / Then only the first connected ahead
    first, second = (tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx) for _ in range(2))
    assert len(connects) == 1
    # and both start, the second on a connection of its own; what was held is given back
    assert first.fire(ctx)["status"] == second.fire(ctx)["status"] == 200
    assert len(connects) == 2 and held.acquire(blocking=False)
    held.release()
    third = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    third.close()
    assert held.acquire(blocking=False)


def test_an_early_connect_that_fails_unexpectedly_gives_back_its_slot_and_its_socket(
    receiver: Listener, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process that may hold one connection open ahead, and an early connect that fails, once,
    # as no network does (a ValueError), its socket already open
    held = threading.BoundedSemaphore(1)
    monkeypatch.setattr(http_ahead, "_OPEN_AHEAD", held)
    real = http_wire.PinnedHTTPConnection.connect
    failing = [True]

    def connect(self: http_wire.PinnedHTTPConnection) -> None:
        real(self)
        if failing and failing.pop():
            raise ValueError("not as a network fails")

    monkeypatch.setattr(http_wire.PinnedHTTPConnection, "connect", connect)
    ctx = context(clock=clock)
    # When it is prepared / Then its socket is closed and its slot given back
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(
        lambda r: len(r.connections) == 1 and all(c.ended_unused for c in r.connections.values())
    )
    assert held.acquire(blocking=False)
    held.release()
    # and the start runs cold, and succeeds
    assert prepared.fire(ctx)["status"] == 200 and len(receiver.requests()) == 1


def test_closing_a_prepared_start_closes_its_connection(receiver: Listener, clock: ManualClock) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(http_spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    prepared.close()
    prepared.close()  # (again: nothing more)
    receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    assert receiver.requests() == []


def test_a_tls_connection_is_opened_ahead_and_the_request_goes_on_it(
    tls_receiver: Listener, clock: ManualClock, sends: list[Any]
) -> None:
    # Given an https webhook prepared 3 seconds ahead (handshake made; TLS 1.3 servers send session
    # tickets after it, unasked)
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=3))
    prepared = tasks.prepare(http_spec({"url": tls_receiver.url}, ctx), ctx)
    tls_receiver.wait_for(lambda r: len(r.connections) == 1)
    assert sends == []
    # When it fires at its instant / Then the request went on the connection opened ahead
    clock.advance(3)
    assert prepared.fire(ctx) == {"status": 200, "body": {"ok": True}}
    assert len(tls_receiver.connections) == 1 and len(tls_receiver.requests()) == 1


# (These two meet no TLS server: a socket left open would hold the test server's handshake, and its
# shutting down, for good.)


def test_a_tls_connect_that_fails_to_wrap_its_socket_closes_it_and_gives_back_its_slot(
    receiver: Listener, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process that may hold one connection open ahead, and a TLS layer that refuses the socket
    class Refusing(ssl.SSLContext):
        def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
            raise ValueError("not as a network fails")

    held = threading.BoundedSemaphore(1)
    monkeypatch.setattr(http_ahead, "_OPEN_AHEAD", held)
    monkeypatch.setattr(http_wire, "_TLS", Refusing(ssl.PROTOCOL_TLS_CLIENT))
    opened: list[socket.socket] = []
    real = socket.create_connection

    def create_connection(*args: Any) -> socket.socket:
        opened.append(real(*args))
        return opened[-1]

    monkeypatch.setattr(http_wire.socket, "create_connection", create_connection)
    ctx = context(clock=clock)
    # When it is prepared / Then the socket it opened is closed, and its slot given back
    tasks.prepare(http_spec({"url": receiver.url.replace("http:", "https:")}, ctx), ctx)
    [raw] = opened
    assert raw.fileno() == -1 and held.acquire(blocking=False)


def test_a_host_name_tls_cannot_carry_fails_before_a_socket_is_opened(
    receiver: Listener, connects: list[tuple[str, int]]
) -> None:
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    connection = http_wire.PinnedHTTPSConnection("a" * 64 + ".example", "127.0.0.1", port, 1)
    with pytest.raises(UnicodeError):
        connection.connect()
    assert connects == []
