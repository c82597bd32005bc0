"""A webhook receiver on 127.0.0.1 that tells its connections apart: when each was accepted, the
request that came on it, if any, and those that ended without one. For the tests of webhooks
prepared ahead of their start; times are read from the test's clock."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Connection:
    port: int  # the caller's port: which connection it is
    accepted_at: datetime
    request: tuple[str, str, dict[str, str], bytes] | None = None  # method, path, headers, body
    requested_at: datetime | None = None
    ended_unused: bool = False  # it ended (the caller closed it, or the server) without a request


@dataclass
class Listener:
    url: str
    now: Callable[[], datetime]
    connections: dict[int, Connection] = field(default_factory=dict)
    # The next this many connections are closed as soon as they are accepted.
    drop: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    sockets: dict[int, socket.socket] = field(default_factory=dict)

    def requests(self) -> list[Connection]:
        with self.lock:
            return [c for c in self.connections.values() if c.request is not None]

    def wait_for(self, condition: Callable[[Listener], bool], seconds: float = 10.0) -> None:
        """Wait until `condition` holds (the server's threads catch up); fail if it never does."""
        deadline = time.monotonic() + seconds
        while not condition(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"the listener never saw that: {self.connections}")
            time.sleep(0.01)

    def close_idle(self) -> int:
        """Close, from the server's end, every connection no request came on yet (as a server whose
        header timeout ran out); how many."""
        with self.lock:
            idle = [
                self.sockets[p]
                for p, c in self.connections.items()
                if c.request is None and p in self.sockets
            ]
        for sock in idle:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(idle)


@contextmanager
def listener(now: Callable[[], datetime], tls: ssl.SSLContext | None = None) -> Iterator[Listener]:
    """`tls`: the server's context, for an https receiver (its handshake made as it accepts)."""
    state = Listener(url="", now=now)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def handle(self) -> None:
            super().handle()
            with state.lock:
                found = state.connections[self.client_address[1]]
                found.ended_unused = found.request is None

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with state.lock:
                found = state.connections[self.client_address[1]]
                found.request = (self.command, self.path, dict(self.headers), body)
                found.requested_at = state.now()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b'{"ok":true}')

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def verify_request(self, request: Any, client_address: Any) -> bool:
            with state.lock:
                state.connections[client_address[1]] = Connection(client_address[1], state.now())
                state.sockets[client_address[1]] = request
                if state.drop:
                    state.drop -= 1
                    state.connections[client_address[1]].ended_unused = True
                    return False  # (closed at once)
            return True

    server = Server(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"{'http' if tls is None else 'https'}://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def record_sends(monkeypatch: Any, note: Callable[[], Any]) -> list[Any]:
    """What `note` says (the test clock's time, the thread) each time a request's bytes are handed to
    a connection, from now until the test ends."""
    made: list[Any] = []
    real = http.client.HTTPConnection.send

    def send(self: http.client.HTTPConnection, data: Any) -> None:
        made.append(note())
        real(self, data)

    monkeypatch.setattr(http.client.HTTPConnection, "send", send)
    return made
