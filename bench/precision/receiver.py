"""The webhook receiver the benchmark's jobs call, in a process of its own, and what it notes of
each delivery: when its first bytes arrived, by the kernel's clock where Linux gives it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from punctual.platform.timefmt import parse_rfc3339

RECEIVER_START_SECONDS = 30.0


@dataclass(frozen=True)
class Delivery:
    arrived: float  # epoch seconds the request's first bytes reached the receiver (see Receiver)
    job_id: str
    execution_id: str
    scheduled_at: float | None  # X-Punctual-Scheduled-At, epoch seconds
    attempt: int
    handled: float  # time.time() when the receiver's handler began with it


# Linux's socket option for the kernel's receive time of each packet (not in the socket module).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class Receiver:
    """Answers every request 200 and records who called when, in one thread on non-blocking sockets.

    When: the kernel's receive time of the request's first bytes (SO_TIMESTAMPNS), not the moment the
    receiver gets to it. At a burst's instant it has hundreds of connections to accept and read, and
    its own queue would count as the scheduler's lateness. Where the kernel gives no such time (not
    Linux), the receiver's clock is used; `receiver_delay_ms` in the JSON says how far apart the two
    were. One thread and a plain read of each request, rather than http.server's thread and header
    parsing per request: it stands in for a user's service, which runs elsewhere, and at a burst's
    instant its CPU is the CPU the scheduler on this machine needs.
    """

    def __init__(self, host: str, port: int) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        # A minute boundary brings many calls at once; a short backlog would drop connection
        # attempts, and each dropped SYN costs the caller a one-second retransmission.
        self.listener = socket.create_server((host, port), backlog=1024)
        try:
            # On the listening socket, so that packets are stamped from before each accept on.
            self.listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.kernel_times = True
        except OSError:
            self.kernel_times = False
        self.listener.setblocking(False)
        self.server_address = self.listener.getsockname()[:2]
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ, None)

    def serve_forever(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.fileobj, key.data)  # type: ignore[arg-type]

    def shutdown(self) -> None:
        self._stop.set()

    def server_close(self) -> None:
        self._selector.close()
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            connection.setblocking(False)
            self._selector.register(connection, selectors.EVENT_READ, _Request())

    def _read(self, connection: socket.socket, request: _Request) -> None:
        if request.handled is None:
            request.handled = time.time()
            request.arrived = kernel_arrival(connection) if self.kernel_times else None
        try:
            data = connection.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        request.data += data
        headers = request.complete() if data else None
        if data and headers is None:
            return  # more to come
        self._selector.unregister(connection)
        if headers is not None:
            self.record(request.delivery(headers))
            with contextlib.suppress(OSError):
                connection.setblocking(True)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        connection.close()

    def record(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)

    def snapshot(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)


@dataclass
class _Request:
    """One connection's request as it is read (Punctual's webhooks send one per connection)."""

    data: bytes = b""
    handled: float | None = None  # time.time() when the receiver first read from it
    arrived: float | None = None  # the kernel's receive time of its first bytes, where known

    def complete(self) -> dict[str, str] | None:
        """Its headers (names lower case) once the whole request is in, body included; else None."""
        head, separator, body = self.data.partition(b"\r\n\r\n")
        if not separator:
            return None
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            length = 0
        return headers if len(body) >= length else None

    def delivery(self, headers: dict[str, str]) -> Delivery:
        assert self.handled is not None
        scheduled = headers.get("x-punctual-scheduled-at")
        try:
            attempt = int(headers.get("x-punctual-attempt") or 0)
        except ValueError:
            attempt = 0
        return Delivery(
            arrived=self.arrived or self.handled,
            job_id=headers.get("x-punctual-job-id") or "",
            execution_id=headers.get("x-punctual-execution-id") or "",
            scheduled_at=parse_rfc3339(scheduled).timestamp() if scheduled else None,
            attempt=attempt,
            handled=self.handled,
        )


def kernel_arrival(connection: socket.socket) -> float | None:
    """When the first bytes waiting on a connection arrived, by the kernel's stamp (they stay to read);
    None without one (asked once the connection is readable)."""
    try:
        _, ancillary, _, _ = connection.recvmsg(1, socket.CMSG_SPACE(16), socket.MSG_PEEK)
    except OSError:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return float(seconds + nanoseconds / 1e9)
    return None


def _serve_receiver(host: str, port: int, commands: Connection) -> None:
    """The receiver's own process: answers webhooks, and the benchmark's questions over `commands`
    until it says stop or goes away."""
    receiver = Receiver(host, port)
    threading.Thread(target=receiver.serve_forever, name="receiver", daemon=True).start()
    commands.send((receiver.server_address[1], receiver.kernel_times))
    try:
        while (command := commands.recv()) != "stop":
            commands.send(receiver.count() if command == "count" else receiver.snapshot())
    except (EOFError, OSError):
        pass  # the benchmark is gone
    finally:
        receiver.shutdown()
        receiver.server_close()


class ReceiverProcess:
    """The receiver in a process of its own. A webhook's receiver is not its scheduler's API
    client: in the benchmark's process, a burst's thousand calls, each a thread there, held the
    interpreter the creating clients need, and the creation rate measured around a burst was the
    benchmark's own."""

    def __init__(self, host: str, port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._commands, theirs = context.Pipe()
        self._lock = threading.Lock()
        self.process = context.Process(
            target=_serve_receiver, args=(host, port, theirs), name="receiver", daemon=True
        )
        self.process.start()
        theirs.close()
        if not self._commands.poll(RECEIVER_START_SECONDS):
            self.process.kill()
            raise SystemExit(f"the receiver did not start on {host}:{port}")
        try:
            bound, self.kernel_times = self._commands.recv()
        except EOFError:
            raise SystemExit(f"the receiver could not listen on {host}:{port}") from None
        self.server_address = (host, int(bound))

    def _ask(self, command: str) -> Any:
        with self._lock:
            self._commands.send(command)
            return self._commands.recv()

    def count(self) -> int:
        return int(self._ask("count"))

    def snapshot(self) -> list[Delivery]:
        return list(self._ask("snapshot"))

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._commands.send("stop")
        self.process.join(RECEIVER_START_SECONDS)
        if self.process.is_alive():
            self.process.kill()
        self._commands.close()


@contextmanager
def running_receiver(host: str, port: int) -> Iterator[ReceiverProcess]:
    receiver = ReceiverProcess(host, port)
    try:
        yield receiver
    finally:
        receiver.stop()
