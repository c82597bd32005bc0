"""Benchmark: the worker's CPU to start webhooks from one process, on loopback. Prints JSON.

The worker's `http` task (its address guard, its headers, a connection a call) calls a receiver on
127.0.0.1 `--webhooks` times: one after another, then `--concurrency` at once on threads. The receiver
runs in a child process, so the CPU measured (this process's, all its threads) is the caller's alone.
From it: how many webhooks a second one execution environment's CPU share starts at the worker's
memory, and how many environments' CPU starting a million at one instant within 2 s would take.
Nothing leaves the machine.

    .venv/bin/python -m bench.webhook_cpu                 # 1,000 webhooks, 50 at once
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

from bench import offline  # noqa: F401  (first: it sets up the environment)
from bench.common import WEBHOOK, emit, environment
from punctual.platform import aws_limits as sizing
from punctual.platform.clock import SystemClock
from punctual.tasks import TaskContext, TaskPolicy
from punctual.tasks.http import HttpParams, HttpTask
from punctual_cli import capacity

LOOPBACK = ("127.0.0.0/8",)
GOAL_SECONDS = 2.0
BURST = 1_000_000


class _Receiver(BaseHTTPRequestHandler):
    """Reads a webhook and answers 200 with a small JSON body, as a receiver does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 resets connections made at once
    daemon_threads = True


def _serve(answer: Connection, stop: Event) -> None:
    server = _Server(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answer.send(f"http://127.0.0.1:{server.server_address[1]}")
    stop.wait()
    server.shutdown()


def _caller(url: str) -> Callable[[int], Any]:
    task = HttpTask()
    params = HttpParams(**{**WEBHOOK["params"], "url": f"{url}/punctual/reminders"})
    policy = TaskPolicy(allowed_networks=LOOPBACK)
    clock = SystemClock()
    due = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def call(i: int) -> Any:
        context = TaskContext(
            job_id=f"job-{i}",
            execution_id=f"exe-{i}",
            scheduled_at=due,
            attempt=1,
            timeout_seconds=10.0,
            clock=clock,
            policy=policy,
        )
        return task.run(params, context)

    return call


def _measure(calls: int, run: Callable[[], None]) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "webhooks": calls,
        "cpu_ms_per_webhook": round(cpu * 1000 / calls, 3),
        "wall_seconds": round(wall, 3),
        "webhooks_per_second": round(calls / wall, 1),
    }


def measure(webhooks: int, concurrency: int) -> dict[str, dict[str, float]]:
    """CPU a webhook, started one after another and `concurrency` at once, from this process."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    stop = context.Event()
    server = context.Process(target=_serve, args=(send, stop), daemon=True)
    server.start()
    try:
        call = _caller(receive.recv())
        for i in range(20):  # warm: imports, the first connections
            call(i)

        def one_by_one() -> None:
            for i in range(webhooks):
                call(i)

        def at_once() -> None:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                list(pool.map(call, range(webhooks)))

        return {"one_by_one": _measure(webhooks, one_by_one), "at_once": _measure(webhooks, at_once)}
    finally:
        stop.set()
        server.join(timeout=5)


def project(cpu_ms: float, memory_mb: int) -> dict[str, float]:
    """What `cpu_ms` a webhook means on Lambda at `memory_mb` (CPU in proportion to memory)."""
    share = min(1.0, memory_mb / sizing.LAMBDA_MB_PER_VCPU)
    per_environment = share * 1000 / cpu_ms
    return {
        "vcpu_share": round(share, 3),
        "webhooks_per_second_an_environment": round(per_environment, 1),
        "environments_to_start_a_million_within_2_s": round(BURST / GOAL_SECONDS / per_environment),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    measured = measure(args.webhooks, args.concurrency)
    memory = capacity.Assumptions().worker_memory_mb
    return {
        "benchmark": "webhook_cpu",
        "command": "python -m bench.webhook_cpu " + " ".join(sys.argv[1:]),
        "environment": environment(),
        "measured": measured,
        "projected_at_worker_memory": {
            "label": "derived from the measured CPU (at once); Lambda's CPU share of its memory documented",
            "memory_mb": memory,
            **project(measured["at_once"]["cpu_ms_per_webhook"], memory),
        },
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.webhook_cpu", description=__doc__.split("\n")[0])
    p.add_argument("--webhooks", type=int, default=1000, help="webhooks to start in each run")
    p.add_argument("--concurrency", type=int, default=50, help="webhooks at once in the second run")
    return p


def main(argv: list[str] | None = None) -> int:
    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
