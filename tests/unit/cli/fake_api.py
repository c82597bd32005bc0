"""An in-process HTTP test double of the API on 127.0.0.1 for the CLI's tests, what it records, and
the jobs and executions it answers with."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from punctual_cli import main as cli

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
DROP = object()  # an answer that closes the connection without a response


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw_body: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None


class FakeApi:
    """Canned answers per (method, path), consumed in order; the last one repeats."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.routes: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self.url = ""

    def answer(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.routes.setdefault((method, path), []).append((status, body))

    def next_answer(self, method: str, path: str) -> tuple[int, Any]:
        answers = self.routes.get((method, path))
        if not answers:
            return 404, {"message": f"no route {method} {path}"}
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def sent(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]


def _handler_for(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.requests.append(
                Recorded(
                    self.command, parts.path, urllib.parse.parse_qs(parts.query), dict(self.headers), raw
                )
            )
            status, body = api.next_answer(self.command, parts.path)
            if body is DROP:
                self.close_connection = True
                return
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def run(api: FakeApi, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--endpoint", api.url, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def job(job_id: str = "job-1", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": job_id,
        "name": "nightly-report",
        "status": "ACTIVE",
        "task": {"type": "http", "params": {"url": "https://example.com/hook", "method": "POST"}},
        "schedule": {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"},
        "retry": {"max_attempts": 3, "backoff_seconds": 2, "max_backoff_seconds": 300},
        "timeout_seconds": 60,
        "next_run_at": "2026-06-02T08:00:00.000Z",
        "created_at": "2026-06-01T11:00:00.000Z",
        "updated_at": "2026-06-01T11:00:00.000Z",
        "last_execution": None,
    }
    return base | overrides


def execution(execution_id: str, status: str, attempts: int = 1, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": execution_id,
        "job_id": "job-1",
        "scheduled_at": "2026-06-01T12:00:00.000Z",
        "status": status,
        "attempts": attempts,
        "started_at": None,
        "finished_at": None,
        "lateness_ms": 12,
        "error": None,
        "result": None,
    }
    return base | overrides
