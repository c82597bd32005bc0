"""Benchmark 1: precision, end to end. Prints JSON; progress goes to stderr.

Creates N one-time `http` jobs through the HTTP API at a steady rate, each calling a webhook receiver
that this process runs, and measures lateness where a user would: at the receiver, as arrival time
minus the execution's scheduled time (`X-Punctual-Scheduled-At`), on the same clock as the stack's.

Due times exercise both ways an execution reaches the work queue: a share is due soon enough that
the API hands it to SQS itself (default 5-120 s ahead), the rest later than that hand-off window
(default 190-240 s ahead, with the default one-minute tick), so a scanner tick enqueues it. At the
defaults (20 jobs/s for 120 s, half and half) the due times span about six minute boundaries.

After the last due time and a grace period it reports creation rate and latency, executions per
second, lateness p50/p95/p99/max (all and per path), early, missed and duplicate deliveries, a
cross-check of a sample of executions through the API (status, `lateness_ms`), and whether the
targets of issue 5 are met (p99 <= 500 ms, max <= 2 s, none early, none missed).

Local stack (started here as a subprocess on a free port, with a fresh data directory; stopped with
Ctrl-C's SIGINT at the end, on errors and on Ctrl-C too):

    make bench-precision                                   # the defaults, writes docs/lateness.png
    .venv/bin/python -m bench.precision --png docs/lateness.png
    .venv/bin/python -m bench.precision --rate 2 --duration 5 --scanned-share 0 --handoff-window 3:8
    .venv/bin/python -m bench.precision --concurrency 4    # the local stack's options pass through

A run lasts the creation, the farthest due time (240 s) and the grace: about 6 minutes at the
defaults, longer when the stack cannot create jobs as fast as asked (the JSON says at what rate it did,
and how many cores the stack kept busy).

Deployed stack (`--endpoint`, not testable here): requests to a non-loopback endpoint are signed
with SigV4 from the standard AWS credential chain (AWS_PROFILE, AWS_REGION or the region in the
execute-api URL), so the caller needs `execute-api:Invoke`. The workers must reach the receiver
from AWS: run the benchmark on a host with a public address (an EC2 instance, say), bind the
receiver on all interfaces and give the URL the jobs should call:

    .venv/bin/python -m bench.precision \\
        --endpoint https://abc123.execute-api.eu-west-1.amazonaws.com/v1 \\
        --receiver-host 0.0.0.0 --receiver-port 8080 --receiver-url http://203.0.113.7:8080

The deployed defaults (tick one minute, lookahead 90 s) give the same 180 s hand-off window as the
local stack's. Lateness then includes the network path from Lambda to the receiver and any skew
between the receiver's clock and AWS's (NTP keeps both within a few milliseconds); keep the receiver
in the stack's region. The jobs stay in the deployment's history until their retention ends.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from bench.common import emit, environment
from punctual.client import ConnectionFailed, PunctualClient, PunctualError, is_loopback
from punctual.config import Settings
from punctual.timefmt import from_epoch_ms, parse_rfc3339, to_rfc3339

ROOT = Path(__file__).resolve().parents[1]
HANDOFF, SCANNER = "handoff", "scanner"
# Issue 5's targets for the local stack at 20 jobs/s for 2 minutes.
TARGET_P99_MS = 500
TARGET_MAX_MS = 2000
CREATE_ATTEMPTS = 3
REQUEST_TIMEOUT_SECONDS = 60.0
STACK_START_SECONDS = 60.0
STACK_STOP_SECONDS = 15.0  # it stops within 8 s (punctual.local.STOP_LIMIT_SECONDS), whatever runs


def log(message: str) -> None:
    print(f"[precision] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- receiver
@dataclass(frozen=True)
class Delivery:
    arrived: float  # time.time() when the request reached the handler
    job_id: str
    execution_id: str
    scheduled_at: float | None  # X-Punctual-Scheduled-At, epoch seconds
    attempt: int


class Receiver(ThreadingHTTPServer):
    """Answers every request 200 and records who called when."""

    daemon_threads = True
    # A minute boundary brings many calls at once; socketserver's default backlog of 5 would drop
    # connection attempts, and each dropped SYN costs the caller a one-second retransmission.
    request_queue_size = 1024

    def __init__(self, host: str, port: int) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        super().__init__((host, port), _ReceiverHandler)

    def record(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)

    def snapshot(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)


class _ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        arrived = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        scheduled = self.headers.get("X-Punctual-Scheduled-At")
        try:
            attempt = int(self.headers.get("X-Punctual-Attempt") or 0)
        except ValueError:
            attempt = 0
        receiver: Receiver = self.server  # type: ignore[assignment]
        receiver.record(
            Delivery(
                arrived=arrived,
                job_id=self.headers.get("X-Punctual-Job-Id") or "",
                execution_id=self.headers.get("X-Punctual-Execution-Id") or "",
                scheduled_at=parse_rfc3339(scheduled).timestamp() if scheduled else None,
                attempt=attempt,
            )
        )
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running_receiver(host: str, port: int) -> Iterator[Receiver]:
    receiver = Receiver(host, port)
    thread = threading.Thread(target=receiver.serve_forever, args=(0.1,), name="receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.shutdown()
        receiver.server_close()


# ------------------------------------------------------------------------------------- local stack
class LocalStack:
    """`punctual local` as a subprocess in its own session, so that Ctrl-C reaches only us."""

    def __init__(self, workdir: Path, extra_args: Sequence[str], log_path: Path | None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = workdir / "data"
        self.log_path = log_path or workdir / "stack.log"
        self.command = [sys.executable, "-m", "punctual.cli", "local", "--port", str(self.port)]
        self.command += ["--data-dir", str(self.data_dir), *extra_args]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for name in ("PUNCTUAL_LOCAL_TOKENS", "POWERTOOLS_LOG_LEVEL"):  # token `local`, the usual logs
            env.pop(name, None)
        with open(self.log_path, "ab") as output:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        probe = PunctualClient.from_endpoint(self.url, timeout=2)
        deadline = time.monotonic() + STACK_START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the local stack exited with {self.process.returncode}\n{self.tail()}")
            try:
                if probe.health():
                    return
            except ConnectionFailed:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the local stack did not answer /health in {STACK_START_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(STACK_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log("the local stack did not stop after SIGINT; killing it")
            self.process.kill()
            self.process.wait(10)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ------------------------------------------------------------------------------------- CPU meter
class CpuMeter:
    """Cores kept busy between marks: by the local stack, by this process, by the whole machine (Linux).

    On a shared machine the difference says whether a run measured Punctual or a busy neighbour.
    """

    def __init__(self, stack_pid: int | None) -> None:
        self.stack_pid = stack_pid
        self.marks: dict[str, dict[str, float | None]] = {}

    def mark(self, name: str) -> None:
        own = os.times()
        self.marks[name] = {
            "wall": time.monotonic(),
            "stack": _process_cpu_seconds(self.stack_pid) if self.stack_pid else None,
            "self": own.user + own.system,
            "machine": _machine_busy_seconds(),
        }

    def between(self, start: str, end: str) -> dict[str, float | None]:
        first, last = self.marks[start], self.marks[end]
        wall = (last["wall"] or 0) - (first["wall"] or 0)

        def cores(key: str) -> float | None:
            before, after = first[key], last[key]
            if before is None or after is None or wall <= 0:
                return None
            return round((after - before) / wall, 2)

        busy = {key: cores(key) for key in ("stack", "self", "machine")}
        known = (busy["stack"] or 0) + (busy["self"] or 0)
        others = None if busy["machine"] is None else round(max(0.0, busy["machine"] - known), 2)
        return {
            "seconds": round(wall, 1),
            "local_stack_cores": busy["stack"],
            "benchmark_cores": busy["self"],
            "other_processes_cores": others,
        }


def _process_cpu_seconds(pid: int) -> float | None:
    """The process's CPU time and its children's (the local stack runs moto in a child process)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return own + sum(_process_cpu_seconds(int(child)) or 0.0 for child in children)


def _machine_busy_seconds() -> float | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------- creation
@dataclass(frozen=True)
class Planned:
    index: int
    path: str  # HANDOFF or SCANNER
    ahead: float  # seconds between the create request and the due time


@dataclass(frozen=True)
class Created:
    planned: Planned
    job_id: str | None
    due: float  # epoch seconds, whole milliseconds
    sent: float
    latency: float
    error: str | None = None


def plan_jobs(
    count: int, scanned_share: float, handoff: tuple[float, float], scanned: tuple[float, float], seed: int
) -> list[Planned]:
    """Exactly round(count x share) jobs for the scanner, spread evenly; due offsets drawn uniformly."""
    rng = random.Random(seed)
    plans = []
    for index in range(count):
        # Job i goes to the scanner when floor((i + 1) x share) steps up: an even, exact split.
        path = (
            SCANNER
            if math.floor((index + 1) * scanned_share) > math.floor(index * scanned_share)
            else HANDOFF
        )
        low, high = scanned if path == SCANNER else handoff
        plans.append(Planned(index, path, rng.uniform(low, high)))
    return plans


def create_jobs(
    client: PunctualClient, plans: list[Planned], rate: float, threads: int, target_url: str, run_id: str
) -> list[Created]:
    """Send create requests at `rate` a second (on a fixed timetable), `threads` of them at most at once."""

    def create(plan: Planned) -> Created:
        sent = time.time()
        due_ms = round((sent + plan.ahead) * 1000)
        due = due_ms / 1000
        job = {
            "name": f"precision-{run_id}-{plan.index:05d}",
            "task": {"type": "http", "params": {"url": f"{target_url}/hook/{plan.index}", "method": "POST"}},
            "schedule": {"type": "at", "at": to_rfc3339(from_epoch_ms(due_ms))},
        }
        started = time.perf_counter()
        error = ""
        for attempt in range(CREATE_ATTEMPTS):
            try:
                # The same key on a retry: a request that timed out but went through is not doubled.
                answer = client.create_job(job, idempotency_key=f"precision-{run_id}-{plan.index}")
                return Created(plan, str(answer["id"]), due, sent, time.perf_counter() - started)
            except ConnectionFailed as exc:
                error = f"{type(exc).__name__}: {exc}"
            except PunctualError as exc:
                error = f"{type(exc).__name__}: {exc}"
                break
            log(f"create request {plan.index} failed (attempt {attempt + 1}): {error}")
        return Created(plan, None, due, sent, time.perf_counter() - started, error)

    futures: list[Future[Created]] = []
    start = time.monotonic()
    next_report = start + 10

    def report() -> None:
        nonlocal next_report
        if time.monotonic() >= next_report:
            done = sum(f.done() for f in futures)
            log(f"created {done}/{len(plans)} jobs in {time.monotonic() - start:.0f} s")
            next_report += 10

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create") as pool:
        try:
            for plan in plans:
                delay = start + plan.index / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(create, plan))
                report()
            # When the API cannot keep up, requests queue here: the rate achieved says so.
            while wait(futures, timeout=1).not_done:
                report()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [future.result() for future in futures]


# ---------------------------------------------------------------------------------------- analysis
def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest rank: the smallest value that at least p % of the values do not exceed."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary_ms(values_ms: Sequence[float]) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {
        "count": len(values_ms),
        "min": rounded(min(values_ms, default=None)),
        "p50": rounded(percentile(values_ms, 50)),
        "p95": rounded(percentile(values_ms, 95)),
        "p99": rounded(percentile(values_ms, 99)),
        "max": rounded(max(values_ms, default=None)),
        "mean": rounded(sum(values_ms) / len(values_ms)) if values_ms else None,
    }


@dataclass
class Analysis:
    report: dict[str, Any]
    lateness_by_path: dict[str, list[float]]


def analyse(created: list[Created], deliveries: list[Delivery]) -> Analysis:
    jobs = {c.job_id: c for c in created if c.job_id}
    per_execution = Counter(d.execution_id for d in deliveries)
    first: dict[str, Delivery] = {}  # per job: its first delivery
    for delivery in sorted(deliveries, key=lambda d: d.arrived):
        first.setdefault(delivery.job_id, delivery)

    def lateness_ms(delivery: Delivery) -> float:
        scheduled = delivery.scheduled_at
        if scheduled is None:
            scheduled = jobs[delivery.job_id].due if delivery.job_id in jobs else delivery.arrived
        return (delivery.arrived - scheduled) * 1000

    lateness_by_path: dict[str, list[float]] = {HANDOFF: [], SCANNER: []}
    for job_id, delivery in first.items():
        if job_id in jobs:
            lateness_by_path[jobs[job_id].planned.path].append(lateness_ms(delivery))
    everything = lateness_by_path[HANDOFF] + lateness_by_path[SCANNER]
    arrivals = sorted(d.arrived for job_id, d in first.items() if job_id in jobs)
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    per_second = Counter(int(t) for t in arrivals)
    dues = [c.due for c in jobs.values()]
    mismatched = sum(
        1
        for job_id, d in first.items()
        if job_id in jobs and d.scheduled_at is not None and d.scheduled_at - jobs[job_id].due > 0.0005
    )
    report = {
        "executions_received": len(deliveries),
        "jobs_delivered": sum(1 for job_id in first if job_id in jobs),
        "executed_per_second": {
            "mean": round(len(arrivals) / span, 2) if span else None,
            "peak_1s": max(per_second.values(), default=0),
            "over_seconds": round(span, 1),
        },
        "lateness_ms": summary_ms(everything),
        "lateness_ms_by_path": {path: summary_ms(values) for path, values in lateness_by_path.items()},
        "early": sum(1 for d in deliveries if lateness_ms(d) < 0),
        "missed": len(set(jobs) - set(first)),
        "duplicates": sum(n - 1 for n in per_execution.values() if n > 1),
        "retried_attempts": sum(1 for d in deliveries if d.attempt > 1),
        # A one-time job has one execution: more distinct execution ids for a job would be a bug.
        "extra_executions": len({(d.job_id, d.execution_id) for d in deliveries}) - len(first),
        "unexpected": sum(1 for d in deliveries if d.job_id not in jobs),
        # A job whose create request was answered after its due time runs at once: the API schedules it
        # then, and lateness counts from that instant (X-Punctual-Scheduled-At).
        "scheduled_later_than_requested": mismatched,
        "due_span": {
            "first": _iso(min(dues)) if dues else None,
            "last": _iso(max(dues)) if dues else None,
            "minute_boundaries_crossed": int(max(dues) // 60 - min(dues) // 60) if dues else 0,
        },
    }
    return Analysis(report, lateness_by_path)


def cross_check(
    client: PunctualClient, created: list[Created], deliveries: list[Delivery], size: int
) -> dict[str, Any]:
    """Ask the API about a sample of jobs: their execution's status and the worker's lateness_ms.

    The sample is spread evenly over the jobs, and then over the missed ones, if any, separately:
    whether a missed job is still QUEUED (late) or never got an execution tells two problems apart.
    """
    made = [c for c in created if c.job_id]
    if not made or size <= 0:
        return {"sampled": 0}
    result = _check_jobs(client, _spread(made, size), deliveries)
    delivered = {d.job_id for d in deliveries}
    missed = [c for c in made if c.job_id not in delivered]
    if missed:
        result["missed_jobs"] = _check_jobs(client, _spread(missed, size), deliveries)
    return result


def _spread(items: list[Created], size: int) -> list[Created]:
    return items[:: max(1, len(items) // size)][:size]


def _check_jobs(client: PunctualClient, sample: list[Created], deliveries: list[Delivery]) -> dict[str, Any]:
    arrived = {d.execution_id: d for d in sorted(deliveries, key=lambda d: d.arrived, reverse=True)}
    statuses: Counter[str] = Counter()
    api_lateness: list[float] = []
    claim_to_arrival: list[float] = []
    errors = 0
    for job in sample:
        assert job.job_id is not None
        try:
            items = client.list_executions(job.job_id, limit=10)["items"]
        except PunctualError:
            errors += 1
            continue
        if not items:
            statuses["(none)"] += 1
        for execution in items:
            statuses[str(execution["status"])] += 1
            if execution.get("lateness_ms") is not None:
                api_lateness.append(float(execution["lateness_ms"]))
            delivery = arrived.get(str(execution["id"]))
            if delivery and execution.get("started_at"):
                started = parse_rfc3339(str(execution["started_at"])).timestamp()
                claim_to_arrival.append((delivery.arrived - started) * 1000)
    return {
        "sampled": len(sample),
        "api_errors": errors,
        "statuses": dict(sorted(statuses.items())),
        "lateness_ms": summary_ms(api_lateness),
        "started_to_arrival_ms": summary_ms(claim_to_arrival),
    }


def _iso(epoch: float) -> str:
    return to_rfc3339(datetime.fromtimestamp(epoch, UTC))


# --------------------------------------------------------------------------------------------- PNG
def draw_histogram(path: Path, lateness_by_path: dict[str, list[float]], title: str) -> None:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit("--png needs matplotlib: .venv/bin/pip install -e '.[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = lateness_by_path[HANDOFF] + lateness_by_path[SCANNER]
    if not values:
        log("nothing was delivered: no histogram")
        return
    # Outliers far beyond p99 would squeeze the rest into one bar: they are counted, not drawn.
    p99 = percentile(values, 99) or 0.0
    high = max(values) if max(values) <= 3 * max(p99, 100.0) else 3 * max(p99, 100.0)
    low = min(min(values), 0.0)
    width = max(5.0, math.ceil((high - low) / 60 / 5) * 5)  # about 60 bars, in steps of 5 ms
    bins = [low + width * i for i in range(int((high - low) / width) + 2)]
    beyond = [v for v in values if v > bins[-1]]
    figure, axes = plt.subplots(figsize=(9, 4.5), dpi=110)
    labels = {HANDOFF: "handed off by the API", SCANNER: "enqueued by a scanner tick"}
    axes.hist(
        [lateness_by_path[HANDOFF], lateness_by_path[SCANNER]],
        bins=bins,
        stacked=True,
        label=[f"{labels[p]} ({len(lateness_by_path[p])})" for p in (HANDOFF, SCANNER)],
        color=["#4c72b0", "#dd8452"],
    )
    for p, style in ((50, ":"), (99, "--")):
        mark = percentile(values, p)
        assert mark is not None
        axes.axvline(mark, color="black", linestyle=style, linewidth=1, label=f"p{p} {mark:.0f} ms")
    if beyond:
        axes.plot(
            [],
            [],
            " ",
            label=f"{len(beyond)} later than {bins[-1]:.0f} ms not drawn (max {max(beyond):.0f} ms)",
        )
    axes.set_xlabel("lateness at the receiver: arrival - scheduled time (ms)")
    axes.set_ylabel("executions")
    axes.set_title(title, fontsize=11)
    axes.legend(frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


# -------------------------------------------------------------------------------------------- main
def window(text: str) -> tuple[float, float]:
    """`LOW:HIGH` seconds ahead."""
    low, separator, high = text.partition(":")
    try:
        pair = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH seconds, got {text!r}") from None
    if not separator or not 0 < pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"expected 0 < LOW <= HIGH, got {text!r}")
    return pair


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.precision",
        description="Precision end to end: lateness of webhook jobs created through the API, measured "
        "at a receiver. Prints JSON.",
    )
    load = parser.add_argument_group("load")
    load.add_argument("--rate", type=float, default=20.0, help="jobs created a second (default 20)")
    load.add_argument("--duration", type=float, default=120.0, help="seconds of creation (default 120)")
    load.add_argument(
        "--scanned-share",
        type=float,
        default=0.5,
        help="share of jobs due beyond the API's hand-off window, so a scanner tick enqueues them (default 0.5)",
    )
    load.add_argument(
        "--handoff-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead for jobs the API hands off (default 5:120)",
    )
    load.add_argument(
        "--scanned-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead for jobs left to the scanner (default: hand-off window +10 to +60 s, 190:240)",
    )
    load.add_argument("--threads", type=int, default=8, help="create requests in flight at most (default 8)")
    load.add_argument("--grace", type=float, default=10.0, help="seconds to wait after the last due time")
    load.add_argument(
        "--sample", type=int, default=100, help="jobs cross-checked through the API (default 100)"
    )
    load.add_argument("--seed", type=int, default=1, help="seed of the due-time draws")
    output = parser.add_argument_group("output")
    output.add_argument("--png", type=Path, default=None, help="write the lateness histogram here")
    output.add_argument("--stack-log", type=Path, default=None, help="keep the local stack's output here")
    stack = parser.add_argument_group("the local stack (ignored with --endpoint)")
    stack.add_argument("--tick-seconds", type=int, default=None, help="punctual local --tick-seconds")
    stack.add_argument("--concurrency", type=int, default=None, help="punctual local --concurrency")
    remote = parser.add_argument_group("another stack")
    remote.add_argument(
        "--endpoint",
        default=None,
        help="use this API instead of starting a local stack (SigV4 if not loopback)",
    )
    remote.add_argument("--token", default="local", help="bearer token for a loopback endpoint")
    remote.add_argument("--receiver-host", default="127.0.0.1", help="address the receiver binds")
    remote.add_argument("--receiver-port", type=int, default=0, help="receiver port (default: a free one)")
    remote.add_argument(
        "--receiver-url", default=None, help="URL the jobs call, if not http://<receiver-host>:<port>"
    )
    return parser


def handoff_seconds(tick_seconds: int) -> int:
    """The API's hand-off window (Settings.handoff_seconds) with the local stack's lookahead rule."""
    lookahead = (
        Settings.model_fields["lookahead_seconds"].default if tick_seconds >= 60 else max(5, 2 * tick_seconds)
    )
    return Settings(tick_seconds=tick_seconds, lookahead_seconds=lookahead).handoff_seconds


def run(args: argparse.Namespace, cleanup: ExitStack) -> dict[str, Any]:
    tick = args.tick_seconds or 60
    limit = handoff_seconds(tick)
    handoff_window = args.handoff_window or (5.0, float(min(120, limit - 10)))
    scanned_window = args.scanned_window or (float(limit + 10), float(limit + 60))
    if args.scanned_share > 0 and scanned_window[0] <= limit + 2:
        log(
            f"warning: --scanned-window starts within the hand-off window ({limit} s): the API hands those off"
        )
    if args.scanned_share < 1 and handoff_window[1] >= limit - 2:
        log(f"warning: --handoff-window ends beyond the hand-off window ({limit} s): a tick enqueues those")
    count = max(1, round(args.rate * args.duration))
    plans = plan_jobs(count, args.scanned_share, handoff_window, scanned_window, args.seed)

    receiver = cleanup.enter_context(running_receiver(args.receiver_host, args.receiver_port))
    receiver_url = args.receiver_url or f"http://{args.receiver_host}:{receiver.server_address[1]}"
    stack_args: list[str] = []
    stack: LocalStack | None = None
    if args.endpoint:
        endpoint = args.endpoint
    else:
        if args.tick_seconds:
            stack_args += ["--tick-seconds", str(args.tick_seconds)]
        if args.concurrency:
            stack_args += ["--concurrency", str(args.concurrency)]
        workdir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="punctual-precision-")))
        stack = LocalStack(workdir, stack_args, args.stack_log)
        cleanup.callback(stack.stop)
        log(f"starting the local stack: {' '.join(stack.command[2:])}")
        stack.start()
        endpoint = stack.url
    meter = CpuMeter(stack.process.pid if stack and stack.process else None)
    client = PunctualClient.from_endpoint(endpoint, token=args.token, timeout=REQUEST_TIMEOUT_SECONDS)
    run_id = f"{int(time.time())}"
    log(f"creating {count} jobs at {args.rate:g}/s against {endpoint}; receiver {receiver_url}")
    meter.mark("start")
    created = create_jobs(client, plans, args.rate, args.threads, receiver_url, run_id)
    meter.mark("created")
    made = [c for c in created if c.job_id]
    failed = [c for c in created if c.error]
    for failure in failed[:5]:
        log(f"create failed: {failure.error}")

    deadline = max((c.due for c in made), default=time.time()) + args.grace
    while (remaining := deadline - time.time()) > 0:
        log(f"received {receiver.count()}/{len(made)}; last due time + grace in {remaining:.0f} s")
        time.sleep(min(10.0, remaining))
    meter.mark("end")
    deliveries = receiver.snapshot()
    analysis = analyse(created, deliveries)
    log(f"checking {min(args.sample, len(made))} executions through the API")
    checked = cross_check(client, created, deliveries, args.sample)

    sent = [c.sent for c in created]
    creation_span = max(c.sent + c.latency for c in created) - min(sent)
    achieved = round(len(created) / creation_span, 2) if creation_span > 0 else None
    latencies = [c.latency * 1000 for c in made]
    lateness = analysis.report["lateness_ms"]
    targets = {
        "p99_ms_at_most": TARGET_P99_MS,
        "max_ms_at_most": TARGET_MAX_MS,
        "p99_met": lateness["p99"] is not None and lateness["p99"] <= TARGET_P99_MS,
        "max_met": lateness["max"] is not None and lateness["max"] <= TARGET_MAX_MS,
        "none_early": analysis.report["early"] == 0,
        "none_missed": analysis.report["missed"] == 0 and not failed,
    }
    targets["met"] = all(v for k, v in targets.items() if k.endswith(("_met", "none_early", "none_missed")))
    result: dict[str, Any] = {
        "benchmark": "precision",
        "stack": "deployed (--endpoint)" if args.endpoint and not is_loopback(endpoint) else "local",
        "config": {
            "endpoint": endpoint if args.endpoint else "local stack started by the benchmark",
            "local_stack_args": None if args.endpoint else stack_args,
            "jobs": count,
            "rate_per_s": args.rate,
            "duration_s": args.duration,
            "scanned_share": args.scanned_share,
            "handoff_limit_s": limit,
            "handoff_window_s": list(handoff_window),
            "scanned_window_s": list(scanned_window),
            "create_threads": args.threads,
            "grace_s": args.grace,
            "seed": args.seed,
        },
        "machine": {
            **environment(),
            "cpu_while_creating": meter.between("start", "created"),
            "cpu_whole_run": meter.between("start", "end"),
        },
        "creation": {
            "jobs_created": len(made),
            "failed": len(failed),
            "by_path": dict(Counter(c.planned.path for c in made)),
            "rate_per_s": achieved,
            "latency_ms": {
                "p50": round(percentile(latencies, 50) or 0, 1),
                "p99": round(percentile(latencies, 99) or 0, 1),
                "max": round(max(latencies, default=0), 1),
            },
        },
        "delivery": analysis.report,
        "api_cross_check": checked,
        "targets": targets,
    }
    if args.png:
        where = "Punctual on AWS" if args.endpoint and not is_loopback(endpoint) else "Punctual local stack"
        title = f"{where}: {len(made)} webhook jobs, {args.rate:g}/s offered for {args.duration:g} s"
        if achieved is not None and achieved < 0.95 * args.rate:
            title += f" (created at {achieved:g}/s)"
        if lateness["count"]:
            title += (
                f"\nlateness at the receiver: p50 {lateness['p50']:.0f} ms, p99 {lateness['p99']:.0f} ms, "
                f"max {lateness['max']:.0f} ms"
            )
        if analysis.report["missed"]:
            title += f"; {analysis.report['missed']} not delivered"
        draw_histogram(args.png, analysis.lateness_by_path, title)
        result["png"] = str(args.png)
        log(f"wrote {args.png}")
    return result


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM too: unwind, so that the local stack is stopped


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.rate <= 0 or args.duration <= 0 or not 0 <= args.scanned_share <= 1 or args.threads < 1:
        build_parser().error("--rate and --duration must be positive, --scanned-share within 0..1")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as cleanup:
            result = run(args, cleanup)
    except KeyboardInterrupt:
        log("interrupted; the local stack was stopped")
        return 130
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
