"""The local stack's durable store at scale. Prints JSON; progress goes to stderr.

    make bench-local-store
    .venv/bin/python -m bench.local_store --jobs 100000

1. Templates: a small local stack runs a few jobs for real: one-time jobs run 4 times each (their
   history), and jobs due in 30 days (their due markers). Its data is read back from disk.
2. A data directory with --jobs jobs is written from those templates, each copy under new job ids:
   several hundred thousand items at the default.
3. The stack is started on it: the time until /health answers, and the memory (RSS) of the stack's
   process and of moto's.
4. The journal's cost: --requests job creations by 8 clients, their latency, and what the journal
   wrote for them (records and bytes per request, records per fsync, time per fsync).
5. Compaction: one is asked for while a precision probe runs (one-time jobs due 3 s after they are
   created, at 10 a second); the compaction's time, and the lateness of the probe's executions
   against the precision targets (p99 <= 500 ms, max <= 2 s, none early).
6. Ctrl-C: how long the stack takes to stop, and to start again on the compacted data.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.precision import stack as precision_stack
from bench.precision.report import percentile
from bench.precision.stack import LocalStack
from punctual_client.transport import PunctualClient
from punctual_local.moto.compactor import compact
from punctual_local.moto.data_files import SNAPSHOT_NAME, SnapshotWriter, read_snapshot, segments

TEMPLATE_JOBS = 20
RUNS_PER_HISTORY_JOB = 4
PROBE_RATE = 10.0
PROBE_LEAD_SECONDS = 3.0
_JOB_ID = re.compile(rb"job_[0-9a-f]{20}")
# Reading back several hundred thousand items takes longer than the precision benchmark's stack.
precision_stack.STACK_START_SECONDS = 600.0


def log(message: str) -> None:
    print(f"[local-store] {message}", file=sys.stderr, flush=True)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def moto_pid(stack_pid: int) -> int | None:
    try:
        children = Path(f"/proc/{stack_pid}/task/{stack_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def moto_status(stack: LocalStack) -> dict[str, Any]:
    url = None
    for line in stack.log_path.read_text(errors="replace").splitlines():
        if line.startswith("  AWS "):
            url = line.split()[1]
    assert url is not None, "no AWS line in the banner"
    with urllib.request.urlopen(f"{url}/_punctual/status", timeout=10) as answer:
        return dict(json.loads(answer.read()))


def moto_compact(stack: LocalStack) -> None:
    url = next(
        line.split()[1]
        for line in stack.log_path.read_text(errors="replace").splitlines()
        if line.startswith("  AWS ")
    )
    request = urllib.request.Request(f"{url}/_punctual/compact", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass


def make_templates(workdir: Path) -> list[tuple[bytes, bytes]]:
    """(key, item) of every item a few real jobs left in a small stack's data directory."""
    stack = LocalStack(workdir / "templates", ["--tick-seconds", "2"], None)
    stack.data_dir = workdir / "templates" / "data"
    stack.command[stack.command.index("--data-dir") + 1] = str(stack.data_dir)
    stack.data_dir.parent.mkdir(parents=True)
    stack.start()
    try:
        client = PunctualClient.from_endpoint(stack.url, timeout=10)
        later = iso(datetime.now(UTC) + timedelta(days=30))
        history = []
        for n in range(TEMPLATE_JOBS):
            if n % 2:
                job = {
                    "name": f"later-{n}",
                    "task": {"type": "noop"},
                    "schedule": {"type": "at", "at": later},
                }
                client.create_job(job)
                continue
            job = {"name": f"history-{n}", "task": {"type": "noop"}, "schedule": {"type": "now"}}
            history.append(client.create_job(job)["id"])
        for _ in range(RUNS_PER_HISTORY_JOB - 1):
            for job_id in history:
                client.run_job(job_id)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            finished = [
                e
                for job_id in history
                for e in client.list_executions(job_id, limit=10)["items"]
                if e["status"] == "SUCCEEDED"
            ]
            if len(finished) >= len(history) * RUNS_PER_HISTORY_JOB:
                break
            time.sleep(0.5)
    finally:
        stack.stop()
    last = max(number for number, _ in segments(stack.data_dir))
    compact(stack.data_dir, last)
    return list(read_snapshot(stack.data_dir / SNAPSHOT_NAME))


def write_data(directory: Path, templates: list[tuple[bytes, bytes]], jobs: int) -> dict[str, Any]:
    """A snapshot of `jobs` jobs: the templates' items again and again, under new job ids."""
    ids = sorted({m.group(0) for key, item in templates for m in _JOB_ID.finditer(key + item)})
    # Items that name no job (the scanner's leases, say) are kept once.
    shared = [(k, i) for k, i in templates if not _JOB_ID.search(k + i)]
    own = [(k, i) for k, i in templates if _JOB_ID.search(k + i)]
    directory.mkdir(parents=True)
    writer = SnapshotWriter(directory, 0)
    for key, item in shared:
        writer.add(key, item)
    copies = -(-jobs // len(ids))
    for copy in range(copies):
        mapping = {old: f"job_{copy:08x}{n:012x}".encode() for n, old in enumerate(ids)}

        def renamed(text: bytes, mapping: dict[bytes, bytes] = mapping) -> bytes:
            return _JOB_ID.sub(lambda m: mapping[m.group(0)], text)

        for key, item in own:
            writer.add(renamed(key), renamed(item))
    snapshot = writer.commit()
    return {
        "jobs": copies * len(ids),
        "items": snapshot.items,
        "snapshot_mb": round(snapshot.bytes / 2**20, 1),
    }


def start_stack(workdir: Path, name: str, data_dir: Path) -> tuple[LocalStack, float]:
    stack = LocalStack(workdir / name, ["--tick-seconds", "2"], workdir / f"{name}.log")
    stack.data_dir = data_dir
    stack.command[stack.command.index("--data-dir") + 1] = str(data_dir)
    started = time.monotonic()
    stack.start()
    return stack, time.monotonic() - started


def journal_cost(stack: LocalStack, requests: int) -> dict[str, Any]:
    before = moto_status(stack)["journal"]
    later = iso(datetime.now(UTC) + timedelta(days=30))

    def create(n: int) -> float:
        client = PunctualClient.from_endpoint(stack.url, timeout=30)
        job = {"name": f"cost-{n}", "task": {"type": "noop"}, "schedule": {"type": "at", "at": later}}
        started = time.monotonic()
        client.create_job(job)
        return (time.monotonic() - started) * 1000

    with ThreadPoolExecutor(8) as pool:
        latencies = sorted(pool.map(create, range(requests)))
    after = moto_status(stack)["journal"]
    records = after["records"] - before["records"]
    batches = max(1, after["batches"] - before["batches"])
    return {
        "requests": requests,
        "create_ms": {
            "p50": round(percentile(latencies, 50) or 0, 1),
            "p99": round(percentile(latencies, 99) or 0, 1),
        },
        "records_per_request": round(records / requests, 2),
        "bytes_per_request": round((after["bytes"] - before["bytes"]) / requests),
        "records_per_fsync": round(records / batches, 1),
        "fsync_ms": round(1000 * (after["fsync_seconds"] - before["fsync_seconds"]) / batches, 2),
        "largest_batch_records": after["largest_batch"],
    }


def compaction_under_load(stack: LocalStack) -> dict[str, Any]:
    """Compact while one-time jobs come due; the compaction's time and the jobs' lateness."""
    client = PunctualClient.from_endpoint(stack.url, timeout=30)
    before = moto_status(stack)["compactions"]
    created: list[str] = []
    stop = threading.Event()

    def probe() -> None:
        next_at = time.monotonic()
        while not stop.is_set():
            due = iso(datetime.now(UTC) + timedelta(seconds=PROBE_LEAD_SECONDS))
            job = {"task": {"type": "noop"}, "schedule": {"type": "at", "at": due}}
            created.append(client.create_job(job)["id"])
            next_at += 1 / PROBE_RATE
            time.sleep(max(0.0, next_at - time.monotonic()))

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(2)  # the probe's executions due while compaction runs
    moto_compact(stack)
    started = time.monotonic()
    while moto_status(stack)["compactions"] == before:
        time.sleep(0.2)
    compaction_s = time.monotonic() - started
    status = moto_status(stack)
    time.sleep(PROBE_LEAD_SECONDS)
    stop.set()
    thread.join()
    deadline = time.monotonic() + 60
    lateness: list[float] = []
    pending = list(created)
    while pending and time.monotonic() < deadline:
        still = []
        for job_id in pending:
            executions = client.list_executions(job_id, limit=5)["items"]
            done = [e for e in executions if e["status"] == "SUCCEEDED"]
            if done:
                lateness.append(float(done[-1]["lateness_ms"]))
            else:
                still.append(job_id)
        pending = still
        if pending:
            time.sleep(1)
    lateness.sort()
    p99, worst = percentile(lateness, 99), (lateness[-1] if lateness else None)
    return {
        "compaction_s": round(compaction_s, 2),
        "compactor": status["last_compaction"],
        "probe_jobs": len(created),
        "probe_missed": len(pending),
        "lateness_ms": {"p50": percentile(lateness, 50), "p99": p99, "max": worst},
        "precision_targets_met": bool(
            lateness
            and not pending
            and p99 is not None
            and p99 <= 500
            and worst is not None
            and worst <= 2000
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_store")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument(
        "--workdir", type=Path, default=None, help="kept afterwards (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="punctual-bench-store-") as temporary:
        workdir = args.workdir or Path(temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        log("running template jobs on a small stack")
        templates = make_templates(workdir)
        data_dir = workdir / "big"
        log(f"writing {args.jobs} jobs from {len(templates)} template items")
        started = time.monotonic()
        data = write_data(data_dir, templates, args.jobs)
        data["write_s"] = round(time.monotonic() - started, 1)
        log(f"starting the stack on {data['items']} items")
        stack, start_s = start_stack(workdir, "big", data_dir)
        result: dict[str, Any] = {"data": data}
        try:
            assert stack.process is not None
            moto = moto_pid(stack.process.pid)
            result["start"] = {
                "ready_s": round(start_s, 2),
                "stack_rss_mb": rss_mb(stack.process.pid),
                "moto_rss_mb": rss_mb(moto) if moto else None,
            }
            log("measuring the journal's cost per request")
            result["journal"] = journal_cost(stack, args.requests)
            log("compacting while a precision probe runs")
            result["compaction"] = compaction_under_load(stack)
            result["compaction"]["moto_rss_mb"] = rss_mb(moto) if moto else None
        finally:
            stopping = time.monotonic()
            stack.stop()
            result["stop_s"] = round(time.monotonic() - stopping, 2)
        log("starting again on the compacted data")
        stack, start_s = start_stack(workdir, "again", data_dir)
        stack.stop()
        result["restart_after_compaction_s"] = round(start_s, 2)
        result["cpus"] = os.cpu_count()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
