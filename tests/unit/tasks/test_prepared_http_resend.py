"""The `http` task prepared ahead of its start, fired on a connection the server lets go of as the
request goes out: the request is sent again only when the server cannot have read any of it, and
then only within what is left of its timeout. Nothing leaves the machine."""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from punctual import tasks
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskFailed, http_ahead
from tests.unit.tasks.webhook import context, http_spec

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
        prepared = tasks.prepare(http_spec({"url": server.url, "body": {"n": 1}}, ctx), ctx)
        monkeypatch.setattr(http_ahead, "_still_open", lambda sock: True)
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
        task = http_spec({"url": server.url, "body": {"n": 1}}, ctx)
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
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    connects: list[tuple[str, int]],
    connect_timeouts: list[float],
) -> None:
    # Given a webhook with a 5 s timeout whose connection opened ahead is reset at the start, and a
    # send on it that takes 2 s
    with scripted("reset when told") as server:
        ctx = context(clock=clock, timeout_seconds=5)
        prepared = tasks.prepare(http_spec({"url": server.url}, ctx), ctx)
        monkeypatch.setattr(http_ahead, "_still_open", lambda sock: True)
        server.let_go.set()
        assert server.gone.wait(10)
        _taking(clock, 2, monkeypatch)
        # When it fires / Then the request sent again had the 3 s left
        assert prepared.fire(ctx)["status"] == 200
        assert connect_timeouts == [http_ahead.EARLY_CONNECT_MIN_SECONDS, 3]


def test_a_request_is_not_sent_again_once_its_timeout_is_spent(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a webhook with a 5 s timeout whose connection opened ahead is reset at the start, and a
    # send on it that takes all 5 s
    with scripted("reset when told") as server:
        ctx = context(clock=clock, timeout_seconds=5)
        prepared = tasks.prepare(http_spec({"url": server.url}, ctx), ctx)
        monkeypatch.setattr(http_ahead, "_still_open", lambda sock: True)
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
        prepared = tasks.prepare(http_spec({"url": server.url, "body": {"n": 1}}, ctx), ctx)
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
