"""Executions under API read load: do many clients listing jobs delay the runs?

    python -m bench.list_load [--jobs 2000] [--over 120] [--list-clients 200]

Starts `punctual local` and a webhook receiver (those of bench.precision), creates `--jobs` one-time
webhook jobs due evenly over `--over` seconds, then has `--list-clients` clients loop over
`GET /jobs?limit=50` and `GET /jobs/{id}` with 0.5-1.5 s pauses until the last run is due. It
prints JSON: the executions' lateness at the receiver (how many started more than 2 s late), and the
list clients' answers by status with their latencies. The list clients do not retry a 503: they go
on with their loop, as the clients of the report that asked for this benchmark did.
"""

from __future__ import annotations

import argparse
import http.client
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import emit, environment
from bench.precision.receiver import running_receiver
from bench.precision.report import percentile
from bench.precision.stack import LocalStack
from punctual.platform.timefmt import from_epoch_ms, to_rfc3339
from punctual_client.transport import PunctualClient

LATE_SECONDS = 2.0
CREATE_CLIENTS = 8
GRACE_SECONDS = 10.0
SETTLE_SECONDS = 60.0


def log(message: str) -> None:
    print(f"[list_load] {message}", file=sys.stderr, flush=True)


def create_jobs(client: PunctualClient, dues: list[float], target: str) -> list[str]:
    def one(index_due: tuple[int, float]) -> str:
        index, due = index_due
        body = {
            "name": f"list-load-{index:05d}",
            "task": {"type": "http", "params": {"url": f"{target}/hook/{index}", "method": "POST"}},
            "schedule": {"type": "at", "at": to_rfc3339(from_epoch_ms(round(due * 1000)))},
        }
        return str(client.create_job(body, idempotency_key=f"list-load-{index}")["id"])

    with ThreadPoolExecutor(max_workers=CREATE_CLIENTS) as pool:
        return list(pool.map(one, enumerate(dues)))


class Lister:
    """Clients that list and read jobs in a loop until stopped; each answer's status and latency."""

    def __init__(self, url: str, job_ids: list[str], clients: int, seed: int) -> None:
        self.host, _, port = url.removeprefix("http://").partition(":")
        self.port = int(port)
        self.job_ids = job_ids
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers: list[tuple[int, float]] = []  # (status, seconds); status 0: no answer
        self.threads = [
            threading.Thread(target=self._loop, args=(random.Random(seed + n),), daemon=True)
            for n in range(clients)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)

    def _loop(self, rng: random.Random) -> None:
        headers = {"Authorization": "Bearer local"}
        connection: http.client.HTTPConnection | None = None
        while not self.stop.is_set():
            for target in ("/jobs?limit=50", f"/jobs/{rng.choice(self.job_ids)}"):
                if connection is None:
                    connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
                started = time.perf_counter()
                try:
                    connection.request("GET", target, headers=headers)
                    answer = connection.getresponse()
                    answer.read()
                    status = answer.status
                    if answer.will_close:
                        connection.close()
                        connection = None
                except (OSError, http.client.HTTPException):
                    status = 0
                    connection.close()
                    connection = None
                with self.lock:
                    self.answers.append((status, time.perf_counter() - started))
            self.stop.wait(rng.uniform(0.5, 1.5))
        if connection is not None:
            connection.close()

    def report(self) -> dict[str, Any]:
        with self.lock:
            answers = list(self.answers)
        by_status = Counter(status for status, _ in answers)
        report: dict[str, Any] = {"answers": len(answers), "by_status": dict(sorted(by_status.items()))}
        for status in sorted(by_status):
            seconds = sorted(s for code, s in answers if code == status)
            report[f"latency_ms_{status}"] = {
                "p50": round((percentile(seconds, 50) or 0) * 1000),
                "p95": round((percentile(seconds, 95) or 0) * 1000),
                "max": round(seconds[-1] * 1000),
            }
        return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="punctual-list-load-"))
    stack = LocalStack(workdir, ["--reset"], args.stack_log)
    with running_receiver("127.0.0.1", 0) as receiver:
        target = f"http://127.0.0.1:{receiver.server_address[1]}"
        stack.start()
        try:
            client = PunctualClient.from_endpoint(stack.url, timeout=60)
            first_due = time.time() + args.lead
            dues = [first_due + (i + 0.5) * args.over / args.jobs for i in range(args.jobs)]
            log(f"creating {args.jobs} jobs due over {args.over:g} s from {args.lead:g} s ahead")
            job_ids = create_jobs(client, dues, target)
            if time.time() > first_due:
                log("warning: the creations ended after the first run was due (raise --lead)")
            lister = Lister(stack.url, job_ids, args.list_clients, args.seed)
            log(f"{args.list_clients} list clients until the last run is due")
            lister.start()
            time.sleep(max(0.0, dues[-1] + GRACE_SECONDS - time.time()))
            lister.finish()
            deadline = time.time() + SETTLE_SECONDS
            while receiver.count() < args.jobs and time.time() < deadline:
                time.sleep(1)
            deliveries = receiver.snapshot()
        finally:
            stack.stop()
    timed = [d for d in deliveries if d.scheduled_at is not None]
    lateness = sorted(d.arrived - d.scheduled_at for d in timed)
    # When the late runs were due: seconds after the first due time, by tens.
    late_when = Counter(
        int((d.scheduled_at - first_due) // 10 * 10)
        for d in timed
        if d.arrived - d.scheduled_at > LATE_SECONDS
    )
    runs = Counter(d.job_id for d in deliveries)
    return {
        "environment": environment(),
        "shape": {"jobs": args.jobs, "over_s": args.over, "list_clients": args.list_clients},
        "executions": {
            "received": len(deliveries),
            "jobs_run": len(runs),
            "jobs_run_more_than_once": sum(1 for count in runs.values() if count > 1),
            f"late_over_{LATE_SECONDS:g}_s": sum(1 for late in lateness if late > LATE_SECONDS),
            "late_by_due_s": dict(sorted(late_when.items())),
            "lateness_ms": {
                p: round((percentile(lateness, q) or 0) * 1000)
                for p, q in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))
            },
        },
        "api": lister.report(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.list_load", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="one-time webhook jobs (default 2000)")
    parser.add_argument("--over", type=float, default=120.0, help="seconds their runs are spread over")
    parser.add_argument("--lead", type=float, default=45.0, help="seconds ahead the first run is due")
    parser.add_argument("--list-clients", type=int, default=200, help="clients listing jobs (default 200)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stack-log", type=Path, default=None, help="keep the local stack's output here")
    args = parser.parse_args(argv)
    emit(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
