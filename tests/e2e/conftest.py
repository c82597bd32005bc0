"""The local stack as a subprocess, driven over HTTP only; a webhook receiver the tests run.

One stack serves the end-to-end tests that ask for it (per xdist worker); tests that stop or
restart a stack start their own. Everything listens on 127.0.0.1, on free ports.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest

from punctual_client.errors import ApiError, ConnectionFailed
from punctual_client.transport import PunctualClient

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
TICK_SECONDS = 2
# Settings.handoff_seconds on the stack: its lookahead (2 x tick, at least 5 s) + the tick + 30 s.
HANDOFF_SECONDS = max(5, 2 * TICK_SECONDS) + TICK_SECONDS + 30
FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"}
ON_TIME = timedelta(seconds=2)
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Stack:
    """One `punctual local` process; its output goes to a file (a full pipe would block it)."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        *,
        tokens: dict[str, str] = TOKENS,
        own_group: bool = False,
        file_size_limit: int | None = None,
        launcher: list[str] | None = None,
        port: int | None = None,
    ) -> None:
        # How `punctual` is run: `python -m punctual_cli`, or a script that wraps it.
        self.launcher = launcher or [sys.executable, "-m", "punctual_cli"]
        self.own_group = own_group  # in a process group of its own, for kill_group
        # Writes past this size fail with EFBIG (RLIMIT_FSIZE; Python ignores SIGXFSZ): a full disk.
        self.file_size_limit = file_size_limit
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log_path = log_path
        self.tokens = tokens
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> Stack:
        env = {
            **os.environ,
            "PUNCTUAL_LOCAL_TOKENS": ",".join(f"{t}={o}" for t, o in self.tokens.items()),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("POWERTOOLS_LOG_LEVEL", None)  # the suite's WARNING would hide the execution lines
        command = [*self.launcher, "local", "--port", str(self.port)]
        command += ["--data-dir", str(self.data_dir), "--tick-seconds", str(TICK_SECONDS)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=self.own_group,
                preexec_fn=self._limit_file_size if self.file_size_limit else None,
            )
        eventually(
            self._healthy, timeout=timeout, interval=0.1, what="the stack to answer /health", stack=self
        )
        return self

    def _limit_file_size(self) -> None:
        import resource

        assert self.file_size_limit is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_size_limit, self.file_size_limit))

    def _healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the stack exited with {self.process.returncode}\n{self.log()}")
        try:
            return PunctualClient.from_endpoint(self.url, token="-", timeout=2).health()
        except ConnectionFailed:
            return False

    def client(self, token: str = "alice-token") -> PunctualClient:
        return PunctualClient.from_endpoint(self.url, token=token, timeout=10)

    def interrupt(self, timeout: float = 10) -> float:
        """Ctrl-C; returns how long the stack took to exit."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout)
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def kill_group(self) -> None:
        """SIGKILL the stack and its moto process at once, as a crash of the machine's session would."""
        assert self.process is not None and self.own_group
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def aws(self, service: str) -> Any:
        """A boto3 client of `service` on the stack's moto (any credentials)."""
        return boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        ).client(service, endpoint_url=self.moto_url())

    def moto_url(self) -> str:
        """moto's address, as the stack's banner gives it ("  AWS      http://127.0.0.1:N  (moto: ...").
        The API answers as soon as it serves; the stack prints its banner a moment after."""
        deadline = time.monotonic() + 10
        while True:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("  AWS "):
                    return line.split()[1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no AWS line in the stack's banner\n{self.log()}")
            time.sleep(0.05)

    def log(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "--- stack output (tail) ---\n" + "\n".join(text.splitlines()[-lines:])


def eventually(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.2,
    what: str = "the condition",
    stack: Stack | None = None,
) -> T:
    """Call probe until it returns something truthy; fail with the stack's output after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}\n{stack.log() if stack else ''}"
            )
        time.sleep(interval)


def assert_on_time(execution: dict[str, Any]) -> None:
    """Started at its time, not before and within 2 s after (what the issue asks of the stack)."""
    scheduled, started = parse_time(execution["scheduled_at"]), parse_time(execution["started_at"])
    assert scheduled <= started <= scheduled + ON_TIME, execution
    assert 0 <= execution["lateness_ms"] <= ON_TIME / timedelta(milliseconds=1), execution


def executions(client: PunctualClient, job_id: str) -> list[dict[str, Any]]:
    return list(client.list_executions(job_id, limit=100)["items"])


def wait_for_executions(
    stack: Stack, job_id: str, *, count: int = 1, timeout: float = 15, client: PunctualClient | None = None
) -> list[dict[str, Any]]:
    """The job's executions, once `count` of them have a final status (newest first)."""
    api = client or stack.client()

    def finished() -> list[dict[str, Any]] | None:
        found = executions(api, job_id)
        done = [e for e in found if e["status"] in FINAL]
        return found if len(done) >= count else None

    return eventually(
        finished, timeout=timeout, what=f"{count} finished execution(s) of {job_id}", stack=stack
    )


class Stacks:
    """Stacks a test starts one after another on one data directory; all killed at its end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[Stack] = []

    def start(
        self,
        *,
        own_group: bool = False,
        timeout: float = 30,
        launcher: list[str] | None = None,
        port: int | None = None,
    ) -> Stack:
        log = self.root / f"stack-{len(self.started)}.log"
        stack = Stack(self.root / "data", log, own_group=own_group, launcher=launcher, port=port)
        self.started.append(stack)
        return stack.start(timeout=timeout)


@pytest.fixture
def stacks(tmp_path: Path) -> Iterator[Stacks]:
    started = Stacks(tmp_path)
    yield started
    for stack in started.started:
        stack.kill()


# The shared stack starts with the first test that asks for it, not for the files that start stacks
# of their own (crash, restart, data directory, precision), and stops when its worker leaves
# tests/e2e, whose files are handed out first (tests/conftest.py): an idle stack polls on, and took
# CPU from every later file on two cores.
@pytest.fixture(scope="package")
def started_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Stack, dict[str, dict[str, Any]]]]:
    base = tmp_path_factory.mktemp("stack")
    local = Stack(base / "data", base / "stack.log")
    try:
        local.start()
        yield local, _early_jobs(local)
    finally:
        local.kill()


@pytest.fixture(scope="package")
def stack(started_stack: tuple[Stack, dict[str, dict[str, Any]]]) -> Stack:
    return started_stack[0]


@pytest.fixture(scope="package")
def early_jobs(started_stack: tuple[Stack, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return started_stack[1]


def _early_jobs(stack: Stack) -> dict[str, dict[str, Any]]:
    """Jobs that need time, created as the stack starts, before the first test that uses it, so that
    their time comes while the others run.

    - "cron": every minute, so it needs a minute boundary.
    - "scanned": due later than the API's hand-off window (HANDOFF_SECONDS), so only a scanner tick
      can enqueue it.
    """
    client = stack.client()
    cron = {"type": "cron", "expression": "* * * * *"}
    scanned = {"type": "at", "at": in_seconds(HANDOFF_SECONDS + 6)}
    return {
        "cron": client.create_job({"name": "every-minute", "task": {"type": "noop"}, "schedule": cron}),
        "scanned": client.create_job({"name": "scanned", "task": {"type": "noop"}, "schedule": scanned}),
    }


@pytest.fixture
def alice(stack: Stack) -> PunctualClient:
    return stack.client("alice-token")


@pytest.fixture
def bob(stack: Stack) -> PunctualClient:
    return stack.client("bob-token")


# ------------------------------------------------------------------ webhooks
@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body as sent (what a signature covers)


@dataclass
class Webhooks:
    """Answers each path with its script of statuses (the last one repeats); records every call."""

    url: str
    scripts: dict[str, list[int]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, path: str, *statuses: int) -> str:
        with self.lock:
            self.scripts[path] = list(statuses)
        return self.url + path

    def calls_to(self, path: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.path == path]

    def answer(self, path: str) -> int:
        with self.lock:
            script = self.scripts.get(path, [404])
            return script.pop(0) if len(script) > 1 else script[0]


@pytest.fixture(scope="session")
def webhooks() -> Iterator[Webhooks]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WebhookHandler)
    server.daemon_threads = True
    hooks = Webhooks(url=f"http://127.0.0.1:{server.server_address[1]}")
    server.hooks = hooks  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True)
    thread.start()
    try:
        yield hooks
    finally:
        server.shutdown()
        server.server_close()


class _WebhookHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        hooks: Webhooks = self.server.hooks  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        with hooks.lock:
            hooks.calls.append(
                Call(self.path, dict(self.headers.items()), json.loads(raw) if raw else None, raw)
            )
        status = hooks.answer(self.path)
        payload = json.dumps({"status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass


def api_error(call: Callable[[], Any]) -> ApiError:
    """The ApiError a call raises (failing the test if it does not)."""
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value


def wait_for_job_status(client: Any, job_id: str, status: str, stack: Stack, timeout: float = 10) -> None:
    """The job reaches `status` (a job's completion is written just after its execution's outcome)."""
    eventually(
        lambda: client.get_job(job_id)["status"] == status, timeout=timeout, what=f"job {status}", stack=stack
    )
