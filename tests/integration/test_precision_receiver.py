"""The precision benchmark's webhook receiver (bench.precision.receiver.Receiver), on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bench.precision.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver("127.0.0.1", 0)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    thread.join(5)
    served.server_close()


def call(receiver: Receiver, *parts: bytes) -> bytes:
    with socket.create_connection(receiver.server_address, timeout=5) as connection:
        for part in parts:
            connection.sendall(part)
            time.sleep(0.05)  # each part a read of its own
        connection.shutdown(socket.SHUT_WR)  # nothing more comes
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
    return answer


def test_a_request_read_in_parts_is_recorded_once_whole_and_answered_200(receiver: Receiver) -> None:
    body = b'{"report": "daily"}'
    head = (
        b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Punctual-Job-Id: job_1\r\n"
        b"x-punctual-execution-id: job_1.e.1\r\nX-Punctual-Scheduled-At: 2026-12-04T10:00:00.000Z\r\n"
        b"X-Punctual-Attempt: 2\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    # When a webhook's headers come in two parts and its body in a third
    sent = time.time()
    answer = call(receiver, head[:40], head[40:], body)
    # Then it is answered 200 once all of it is in, and recorded with the execution's identity
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    [delivery] = receiver.snapshot()
    assert (delivery.job_id, delivery.execution_id, delivery.attempt) == ("job_1", "job_1.e.1", 2)
    assert delivery.scheduled_at == 1796378400.0
    # And its arrival is when its first bytes came, not when the last did
    assert sent - 0.01 <= delivery.arrived <= delivery.handled <= sent + 0.05


def test_a_connection_closed_before_its_request_is_whole_records_nothing(receiver: Receiver) -> None:
    assert call(receiver, b"POST /hook HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc") == b""
    call(receiver)  # a connection that sends nothing at all
    assert receiver.count() == 0
