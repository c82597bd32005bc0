"""A webhook receiver on 127.0.0.1 for the http task's tests, and the task context they run in.
Name resolution is stubbed; nothing leaves the machine."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy
from tests.stubs import no_lookups

LOOPBACK = ("127.0.0.0/8",)
SCHEDULED_AT = datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC)
CLOCK_START = datetime(2026, 12, 1, 9, 0, 1, tzinfo=UTC)


# --- a webhook receiver on 127.0.0.1 --------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: Message
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # wait (until the test ends) before answering


class Webhook:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.replies: dict[str, Reply] = {}
        self.release = threading.Event()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                webhook.received.append(Received(self.command, self.path, self.headers, body))
                reply = webhook.replies.get(self.path.split("?")[0], Reply())
                if reply.hang:
                    webhook.release.wait(10)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (timeout test)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def context(**changes: Any) -> TaskContext:
    values: dict[str, Any] = {
        "job_id": "job-42",
        "execution_id": "job-42.19ad6b9e2a3.3",
        "scheduled_at": SCHEDULED_AT,
        "attempt": 2,
        "timeout_seconds": 5,
        "clock": ManualClock(CLOCK_START),
        "resolver": no_lookups,
    }
    networks = changes.pop("allowed_networks", LOOPBACK)
    return TaskContext(**(values | changes), policy=TaskPolicy(allowed_networks=networks))


def http_spec(params: dict[str, Any], ctx: TaskContext) -> TaskSpec:
    return tasks.validate(TaskSpec(type="http", params=params), ctx.policy)


def run_http(params: dict[str, Any], ctx: TaskContext | None = None) -> Any:
    ctx = ctx or context()
    return tasks.run(http_spec(params, ctx), ctx)


def http_failure(params: dict[str, Any], ctx: TaskContext | None = None) -> TaskFailed:
    with pytest.raises(TaskFailed) as caught:
        run_http(params, ctx)
    return caught.value
