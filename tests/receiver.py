"""A webhook receiver on 127.0.0.1 that records what it was sent and answers as told."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Delivery:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body as sent (what a signature covers)


@dataclass
class Receiver:
    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    # Status codes to answer, in order; once used up, 200.
    script: list[int] = field(default_factory=list)

    def by_execution(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for d in self.deliveries:
            key = d.headers.get("X-Punctual-Execution-Id", "")
            counts[key] = counts.get(key, 0) + 1
        return counts


@contextmanager
def receiver(script: list[int] | None = None) -> Iterator[Receiver]:
    state = Receiver(url="", script=list(script or []))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with lock:
                state.deliveries.append(
                    Delivery(
                        self.command, self.path, dict(self.headers), json.loads(raw) if raw else None, raw
                    )
                )
                status = state.script.pop(0) if state.script else 200
            payload = json.dumps({"ok": status < 300}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
