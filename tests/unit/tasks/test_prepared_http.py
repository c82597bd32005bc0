"""The `http` task prepared ahead of its start (tasks.prepare): its address checked and its connection
opened early, its request sent only when it fires, and a start as good as a cold one whatever
happened to the connection meanwhile. Name resolution is stubbed; nothing leaves the machine."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.platform import signing
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskContext, TaskFailed
from punctual.tasks import http as http_task
from punctual.tasks.http import PREPARED_AHEAD_SECONDS, PREPARED_IDLE_SECONDS
from punctual_testing.loopback_tls import loopback_certificate
from tests.stubs import StubResolver
from tests.unit.tasks.connections import Listener, listener
from tests.unit.tasks.webhook import CLOCK_START, Reply, Webhook, context


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(CLOCK_START)


@pytest.fixture
def receiver(clock: ManualClock) -> Iterator[Listener]:
    with listener(clock.now) as found:
        yield found


# The timeouts of the connects `connects` saw.
timeouts: list[float] = []


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The addresses the http task connects to, in order (their timeouts in `timeouts`)."""
    made: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address: tuple[str, int], timeout: float, *args: Any) -> socket.socket:
        made.append(address)
        timeouts.append(timeout)
        return real(address, timeout, *args)

    monkeypatch.setattr(http_task.socket, "create_connection", create_connection)
    timeouts.clear()
    return made


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> list[Any]:
    """When (by the test's clock) each request's bytes were handed to a connection."""
    made: list[Any] = []
    real = http.client.HTTPConnection.send

    def send(self: http.client.HTTPConnection, data: Any) -> None:
        made.append(clock.now())
        real(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", send)
    return made


def spec(params: dict[str, Any], ctx: TaskContext) -> TaskSpec:
    return tasks.validate(TaskSpec(type="http", params=params), ctx.policy)


def test_preparing_opens_the_connection_and_the_request_goes_on_it_only_when_fired(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]], sends: list[Any]
) -> None:
    # Given a webhook due in 3 seconds
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=3))
    task = spec({"url": receiver.url, "body": {"n": 1}}, ctx)
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


def test_a_connection_the_server_closed_while_it_waited_is_replaced_at_the_start(
    receiver: Listener, clock: ManualClock
) -> None:
    # Given a prepared webhook whose connection the server closed while it waited
    ctx = context(clock=clock)
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    assert receiver.close_idle() == 1
    receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    # When it fires / Then it connects afresh and succeeds
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.connections) == 2 and len(receiver.requests()) == 1


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

    monkeypatch.setattr(http_task.socket, "create_connection", flaky)
    ctx = context(clock=clock)
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    # When it fires / Then it connects then, and succeeds: preparing made no failure
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.requests()) == 1


def test_an_early_connect_that_fails_unexpectedly_gives_back_its_slot_and_its_socket(
    receiver: Listener, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process that may hold one connection open ahead, and an early connect that fails, once,
    # as no network does (a ValueError), its socket already open
    held = threading.BoundedSemaphore(1)
    monkeypatch.setattr(http_task, "_OPEN_AHEAD", held)
    real = http_task._PinnedHTTPConnection.connect
    failing = [True]

    def connect(self: http_task._PinnedHTTPConnection) -> None:
        real(self)
        if failing and failing.pop():
            raise ValueError("not as a network fails")

    monkeypatch.setattr(http_task._PinnedHTTPConnection, "connect", connect)
    ctx = context(clock=clock)
    # When it is prepared / Then its socket is closed and its slot given back
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(
        lambda r: len(r.connections) == 1 and all(c.ended_unused for c in r.connections.values())
    )
    assert held.acquire(blocking=False)
    held.release()
    # and the start runs cold, and succeeds
    assert prepared.fire(ctx)["status"] == 200 and len(receiver.requests()) == 1


def test_a_connection_idle_longer_than_the_bound_is_not_used(receiver: Listener, clock: ManualClock) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
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
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=PREPARED_AHEAD_SECONDS))
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    clock.advance(PREPARED_AHEAD_SECONDS + 1)
    # Then the request goes on it
    assert prepared.fire(ctx)["status"] == 200
    assert len(receiver.connections) == 1 and len(receiver.requests()) == 1


def test_no_connection_is_opened_for_a_start_further_off_than_a_connection_may_wait(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=PREPARED_AHEAD_SECONDS + 5))
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    assert connects == []
    clock.set(ctx.scheduled_at)
    assert prepared.fire(ctx)["status"] == 200 and len(connects) == 1


def test_the_address_guard_refuses_at_preparing_and_nothing_is_connected(
    clock: ManualClock, connects: list[tuple[str, int]]
) -> None:
    # Given a host that resolves to a private address, and a deployment that allows none
    resolver = StubResolver({"hooks.example": ["10.0.0.5"]})
    ctx = context(clock=clock, resolver=resolver, allowed_networks=())
    task = spec({"url": "http://hooks.example/hook"}, ctx)
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
    prepared = tasks.prepare(spec({"url": f"http://hooks.example:{port}/hook"}, ctx), ctx)
    assert prepared.fire(ctx)["status"] == 200
    assert connects == [("127.0.0.1", port)] and resolver.asked == [("hooks.example", port)]
    [request] = receiver.requests()
    assert request.request is not None and request.request[2]["Host"] == f"hooks.example:{port}"


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
    task = spec(_templated(receiver.url), ctx)
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
    prepared = tasks.prepare(spec(_templated(receiver.url), ctx), ctx)
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
    task = spec({"url": webhook.url("/busy")}, ctx)
    # When it is started prepared, and cold / Then it fails the same way, with the same result
    with pytest.raises(TaskFailed) as fired:
        tasks.prepare(task, ctx).fire(ctx)
    with pytest.raises(TaskFailed) as cold:
        tasks.run(task, ctx)
    assert fired.value.retryable and fired.value.result == {"status": 503, "body": {"retry": "later"}}
    assert (str(fired.value), fired.value.result) == (str(cold.value), cold.value.result)


def test_a_prepared_start_to_where_nothing_listens_fails_as_a_cold_one(clock: ManualClock) -> None:
    ctx = context(clock=clock)
    task = spec({"url": "http://127.0.0.1:9/nothing-listens"}, ctx)
    with pytest.raises(TaskFailed) as fired:
        tasks.prepare(task, ctx).fire(ctx)
    with pytest.raises(TaskFailed) as cold:
        tasks.run(task, ctx)
    assert (str(fired.value), fired.value.retryable) == (str(cold.value), cold.value.retryable)
    assert fired.value.retryable


def test_closing_a_prepared_start_closes_its_connection(receiver: Listener, clock: ManualClock) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    receiver.wait_for(lambda r: len(r.connections) == 1)
    prepared.close()
    prepared.close()  # (again: nothing more)
    receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    assert receiver.requests() == []


def test_a_task_type_that_does_not_prepare_starts_cold() -> None:
    ctx = context()
    task = tasks.validate(TaskSpec(type="noop", params={}), ctx.policy)
    assert tasks.prepare(task, ctx).fire(ctx) == tasks.run(task, ctx)


def test_a_prepared_start_is_signed_when_it_fires(receiver: Listener, clock: ManualClock) -> None:
    # Given a signed webhook prepared 5 seconds before its start
    ctx = context(clock=clock, signing_keys=(b"k" * 32,), scheduled_at=clock.now() + timedelta(seconds=5))
    prepared = tasks.prepare(spec({"url": receiver.url, "body": {"n": 1}}, ctx), ctx)
    # When it fires at its instant / Then its signature's timestamp is the start's
    clock.advance(5)
    prepared.fire(ctx)
    [request] = receiver.requests()
    assert request.request is not None
    assert request.request[2][signing.TIMESTAMP_HEADER] == str(int(clock.now().timestamp()))


@pytest.mark.parametrize(("ahead", "connect_timeout"), [(3, 3), (0, http_task.EARLY_CONNECT_MIN_SECONDS)])
def test_an_early_connect_gets_no_longer_than_the_time_left_and_the_request_its_whole_timeout(
    receiver: Listener,
    clock: ManualClock,
    connects: list[tuple[str, int]],
    monkeypatch: pytest.MonkeyPatch,
    ahead: int,
    connect_timeout: float,
) -> None:
    # Given a task with a 5 s timeout, prepared `ahead` seconds before its start
    ctx = context(clock=clock, timeout_seconds=5, scheduled_at=clock.now() + timedelta(seconds=ahead))
    prepared = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    # Then its connect waited at most the time left (a second at least)
    assert timeouts == [connect_timeout]
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


# --- over TLS -------------------------------------------------------------------------------------


@pytest.fixture
def tls_receiver(clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    """An https receiver on 127.0.0.1 with a certificate made for the test, which the task trusts."""
    cert_file, key_file = loopback_certificate(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    monkeypatch.setattr(http_task, "_TLS", ssl.create_default_context(cafile=str(cert_file)))
    with listener(clock.now, tls=server) as found:
        yield found


def test_a_tls_connection_is_opened_ahead_and_the_request_goes_on_it(
    tls_receiver: Listener, clock: ManualClock, sends: list[Any]
) -> None:
    # Given an https webhook prepared 3 seconds ahead (handshake made; TLS 1.3 servers send session
    # tickets after it, unasked)
    ctx = context(clock=clock, scheduled_at=clock.now() + timedelta(seconds=3))
    prepared = tasks.prepare(spec({"url": tls_receiver.url}, ctx), ctx)
    tls_receiver.wait_for(lambda r: len(r.connections) == 1)
    assert sends == []
    # When it fires at its instant / Then the request went on the connection opened ahead
    clock.advance(3)
    assert prepared.fire(ctx) == {"status": 200, "body": {"ok": True}}
    assert len(tls_receiver.connections) == 1 and len(tls_receiver.requests()) == 1


def test_a_tls_connection_the_server_closed_is_replaced_at_the_start(
    tls_receiver: Listener, clock: ManualClock
) -> None:
    ctx = context(clock=clock)
    prepared = tasks.prepare(spec({"url": tls_receiver.url}, ctx), ctx)
    tls_receiver.wait_for(lambda r: len(r.connections) == 1)
    assert tls_receiver.close_idle() == 1
    tls_receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))
    assert prepared.fire(ctx)["status"] == 200
    assert len(tls_receiver.connections) == 2 and len(tls_receiver.requests()) == 1


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
    monkeypatch.setattr(http_task, "_OPEN_AHEAD", held)
    monkeypatch.setattr(http_task, "_TLS", Refusing(ssl.PROTOCOL_TLS_CLIENT))
    opened: list[socket.socket] = []
    real = socket.create_connection

    def create_connection(*args: Any) -> socket.socket:
        opened.append(real(*args))
        return opened[-1]

    monkeypatch.setattr(http_task.socket, "create_connection", create_connection)
    ctx = context(clock=clock)
    # When it is prepared / Then the socket it opened is closed, and its slot given back
    tasks.prepare(spec({"url": receiver.url.replace("http:", "https:")}, ctx), ctx)
    [raw] = opened
    assert raw.fileno() == -1 and held.acquire(blocking=False)


def test_a_host_name_tls_cannot_carry_fails_before_a_socket_is_opened(
    receiver: Listener, connects: list[tuple[str, int]]
) -> None:
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    connection = http_task._PinnedHTTPSConnection("a" * 64 + ".example", "127.0.0.1", port, 1)
    with pytest.raises(UnicodeError):
        connection.connect()
    assert connects == []


def test_past_the_most_connections_held_ahead_a_start_connects_cold(
    receiver: Listener, clock: ManualClock, connects: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a process that may hold one connection open ahead
    held = threading.BoundedSemaphore(1)
    monkeypatch.setattr(http_task, "_OPEN_AHEAD", held)
    ctx = context(clock=clock)
    # When two webhooks are prepared / Then only the first connected ahead
    first, second = (tasks.prepare(spec({"url": receiver.url}, ctx), ctx) for _ in range(2))
    assert len(connects) == 1
    # and both start, the second on a connection of its own; what was held is given back
    assert first.fire(ctx)["status"] == second.fire(ctx)["status"] == 200
    assert len(connects) == 2 and held.acquire(blocking=False)
    held.release()
    third = tasks.prepare(spec({"url": receiver.url}, ctx), ctx)
    third.close()
    assert held.acquire(blocking=False)


# --- a server that lets go of a connection as the request goes out ---------------------------------


OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'


@dataclass
class Scripted:
    """A server on 127.0.0.1 that does with the connections it accepts, in order, what its script
    says ("answer" past its end): "answer"; "close after reading" (the whole request, then closes
    without an answer); "reset after reading" (the same, with a reset); "reset when told" (reads
    nothing, and resets the connection once `let_go` is set, then sets `gone`)."""

    url: str
    script: tuple[str, ...]
    accepted: int = 0
    requests: list[bytes] = field(default_factory=list)
    let_go: threading.Event = field(default_factory=threading.Event)
    gone: threading.Event = field(default_factory=threading.Event)

    def wait_accepted(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while self.accepted < count:
            assert time.monotonic() < deadline, f"the server accepted {self.accepted}, not {count}"
            time.sleep(0.01)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    while length and len(body) < int(length[1]):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


@contextmanager
def scripted(*script: str) -> Iterator[Scripted]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    state = Scripted(f"http://127.0.0.1:{server.getsockname()[1]}/hook", script)
    stop = threading.Event()

    def serve(conn: socket.socket, how: str) -> None:
        with conn:
            if how == "reset when told":
                state.let_go.wait(10)
                _reset(conn)
                state.gone.set()
                return
            state.requests.append(_read_request(conn))
            if how == "answer":
                conn.sendall(OK)
            elif how == "reset after reading":
                _reset(conn)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(10)
            how = script[state.accepted] if state.accepted < len(script) else "answer"
            state.accepted += 1
            threading.Thread(target=serve, args=(conn, how), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_request_whose_connection_was_reset_before_it_went_out_is_sent_once_more(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a prepared webhook whose server resets the idle connection just before the start (its
    # reset not yet seen when the connection was looked at)
    with scripted("reset when told") as server:
        ctx = context(clock=clock)
        prepared = tasks.prepare(spec({"url": server.url, "body": {"n": 1}}, ctx), ctx)
        monkeypatch.setattr(http_task, "_still_open", lambda sock: True)
        server.let_go.set()
        assert server.gone.wait(10)
        # When it fires / Then the request is sent again, once, on a connection of its own
        assert prepared.fire(ctx) == {"status": 200, "body": {"ok": True}}
        assert server.accepted == 2 and len(server.requests) == 1


@pytest.mark.parametrize("how", ["close after reading", "reset after reading"])
def test_a_request_the_server_read_and_did_not_answer_is_not_sent_again(clock: ManualClock, how: str) -> None:
    # Given a server that reads each request and lets go of its connection without an answer (it may
    # have acted on the request)
    with scripted(how, how) as server:
        ctx = context(clock=clock)
        task = spec({"url": server.url, "body": {"n": 1}}, ctx)
        prepared = tasks.prepare(task, ctx)
        # When the prepared webhook fires / Then its request went once, and the start fails retryable
        with pytest.raises(TaskFailed) as fired:
            prepared.fire(ctx)
        assert server.accepted == 1 and len(server.requests) == 1
        # as a cold start fails
        with pytest.raises(TaskFailed) as cold:
            tasks.run(task, ctx)
        assert (str(fired.value), fired.value.retryable) == (str(cold.value), cold.value.retryable)
        assert fired.value.retryable and server.accepted == 2


def _taking(clock: ManualClock, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each send of a request takes `seconds` by the test's clock."""
    real = http.client.HTTPConnection.send

    def send(self: http.client.HTTPConnection, data: Any) -> None:
        clock.advance(seconds)
        real(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", send)


def test_a_request_sent_again_gets_what_is_left_of_the_timeout(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch, connects: list[tuple[str, int]]
) -> None:
    # Given a webhook with a 5 s timeout whose connection opened ahead is reset at the start, and a
    # send on it that takes 2 s
    with scripted("reset when told") as server:
        ctx = context(clock=clock, timeout_seconds=5)
        prepared = tasks.prepare(spec({"url": server.url}, ctx), ctx)
        monkeypatch.setattr(http_task, "_still_open", lambda sock: True)
        server.let_go.set()
        assert server.gone.wait(10)
        _taking(clock, 2, monkeypatch)
        # When it fires / Then the request sent again had the 3 s left
        assert prepared.fire(ctx)["status"] == 200
        assert timeouts == [http_task.EARLY_CONNECT_MIN_SECONDS, 3]


def test_a_request_is_not_sent_again_once_its_timeout_is_spent(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a webhook with a 5 s timeout whose connection opened ahead is reset at the start, and a
    # send on it that takes all 5 s
    with scripted("reset when told") as server:
        ctx = context(clock=clock, timeout_seconds=5)
        prepared = tasks.prepare(spec({"url": server.url}, ctx), ctx)
        monkeypatch.setattr(http_task, "_still_open", lambda sock: True)
        server.let_go.set()
        assert server.gone.wait(10)
        _taking(clock, 5, monkeypatch)
        # When it fires / Then it times out, retryable, without another connection
        with pytest.raises(TaskFailed) as fired:
            prepared.fire(ctx)
        assert fired.value.retryable and "timed out" in str(fired.value)
        assert server.accepted == 1 and server.requests == []


def test_a_request_whose_head_went_out_is_not_sent_again_though_its_body_could_not_follow(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a prepared webhook whose connection breaks once the request's head went out (a server
    # may act on a head alone)
    with scripted("close after reading") as server:
        ctx = context(clock=clock)
        prepared = tasks.prepare(spec({"url": server.url, "body": {"n": 1}}, ctx), ctx)
        server.wait_accepted(1)
        real = http.client.HTTPConnection.send
        heads: list[http.client.HTTPConnection] = []  # the connections a request's head went out on

        def send(self: http.client.HTTPConnection, data: Any) -> None:
            if self in heads:
                raise BrokenPipeError("the server let go")
            heads.append(self)
            real(self, data)

        monkeypatch.setattr(http.client.HTTPConnection, "send", send)
        # When it fires / Then it fails retryable, and no other connection was made
        with pytest.raises(TaskFailed) as fired:
            prepared.fire(ctx)
        assert fired.value.retryable and server.accepted == 1
