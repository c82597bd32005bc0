"""One webhook receiver per test module, emptied before each test; and for the webhooks prepared ahead
of their start, a receiver that tells its connections apart, on the test's clock, and the connects
and their timeouts the http task makes."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from punctual.platform.clock import ManualClock
from punctual.tasks import http_wire
from punctual_testing.loopback_tls import loopback_certificate
from tests.unit.tasks.connections import Listener, listener, record_sends
from tests.unit.tasks.webhook import CLOCK_START, Webhook


@pytest.fixture(scope="module")
def webhook_server() -> Iterator[Webhook]:
    hook = Webhook()
    hook.thread.start()
    yield hook
    hook.release.set()
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def webhook(webhook_server: Webhook) -> Iterator[Webhook]:
    """One server for the module; each test starts with no requests and default replies."""
    webhook_server.received.clear()
    webhook_server.replies.clear()
    webhook_server.release.clear()
    yield webhook_server
    webhook_server.release.set()  # let a hanging handler finish


@pytest.fixture
def clock() -> ManualClock:
    """The test's clock, started where `webhook.context`'s is: a second after the execution's instant."""
    return ManualClock(CLOCK_START)


@pytest.fixture
def receiver(clock: ManualClock) -> Iterator[Listener]:
    with listener(clock.now) as found:
        yield found


@pytest.fixture
def tls_receiver(clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    """An https receiver on 127.0.0.1 with a certificate made for the test, which the task trusts."""
    cert_file, key_file = loopback_certificate(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    monkeypatch.setattr(http_wire, "_TLS", ssl.create_default_context(cafile=str(cert_file)))
    with listener(clock.now, tls=server) as found:
        yield found


@pytest.fixture
def connect_timeouts() -> list[float]:
    """The timeouts of the connects `connects` saw, in order."""
    return []


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch, connect_timeouts: list[float]) -> list[tuple[str, int]]:
    """The addresses the http task connects to, in order (their timeouts in `connect_timeouts`)."""
    made: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address: tuple[str, int], timeout: float, *args: Any) -> socket.socket:
        made.append(address)
        connect_timeouts.append(timeout)
        return real(address, timeout, *args)

    monkeypatch.setattr(http_wire.socket, "create_connection", create_connection)
    return made


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> list[Any]:
    """When (by the test's clock) each request's bytes were handed to a connection."""
    return record_sends(monkeypatch, clock.now)
