"""Benchmark 1: precision, end to end, under the load shapes real schedules make. Prints JSON;
progress goes to stderr.

Real schedules pile up on round instants (`0 * * * *`, a batch of reminders for 10:00 sharp). So the
benchmark runs, through the HTTP API, against a webhook receiver in a process of its own:

- a burst: `--burst` one-time jobs due at one instant B, a minute boundary. Part of them
  (`--burst-scanned-share`) is created before the API's hand-off window, so a scanner tick
  enqueues them; the rest is created `--burst-handoff-lead` seconds before B, as fast as the
  clients go, and the API hands them off itself;
- cron jobs: `--cron` recurring jobs `* * * * *`, all firing at every :00 (B among them);
- steady load around them: `--rate` one-time jobs due each second from B - `--around` to
  B + `--around`, each created a lead ahead (`--handoff-window`, or `--scanned-window` for the
  `--scanned-share` the scanner enqueues), on a timetable, by `--threads` clients;
- a creation flood: `--flood-seconds` around B, `--threads` more clients create jobs (due an hour
  later, never run here) as fast as the API answers: the creation rate while all of it happens.

Lateness is measured where a user would see it: at the receiver, arrival time minus the
execution's scheduled time (`X-Punctual-Scheduled-At`), on the same clock as the stack's. The JSON
gives lateness per class (steady, burst, cron; by path), per second of scheduled time around B,
creation rates and latencies, early / missed / duplicate deliveries, a cross-check of a sample
through the API, and the local stack's targets (docs/benchmarks.md): a burst of 1,000 within 2 s of
its instant (100: within 500 ms), steady p99 <= 500 ms and max <= 2 s, creation >= 50 jobs/s, none
early, missed or doubled.
Beside them, `calibration`: how fast moto answered on this machine just before the run
(bench/calibration.py) and the load average, since a shared machine's figures vary with its load.

Local stack (started here as a subprocess on a free port, with a fresh data directory; stopped with
Ctrl-C's SIGINT at the end, on errors and on Ctrl-C too):

    make bench-precision                                   # the defaults, writes docs/lateness.png
    .venv/bin/python -m bench.precision --burst 1000 --tick-seconds 10
    .venv/bin/python -m bench.precision --burst 10 --cron 2 --rate 2 --around 3 --tick-seconds 5
    # a young stack: started 30 s before the burst's creations, spread over leads of 5 to 170 s
    .venv/bin/python -m bench.precision --stack-age 30 --burst-scanned-share 0 --burst-handoff-leads 5:170

A run lasts from the first creation (the scanned burst part, the hand-off window plus 30 s before
B) to B + `--around` + `--grace`: about 5 minutes at the defaults (tick one minute), 2 minutes with
`--tick-seconds 10`. The grace runs from the last due time or the last creation answered, whichever
is later; what has not arrived by then is waited for up to `--settle` seconds more (its lateness
counted as it comes) before it is counted missed.

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
between the receiver's clock and AWS's. The cron jobs are cancelled at the end; the others stay in
the deployment's history until their retention ends (the flood's jobs run an hour later: noop).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from types import FrameType
from typing import Any

from bench.calibration import calibrate, load_average
from bench.common import emit, environment
from punctual.platform.config import Settings
from punctual.platform.timefmt import from_epoch_ms, parse_rfc3339, to_rfc3339
from punctual_client.endpoints import is_loopback
from punctual_client.errors import ConnectionFailed, PunctualError
from punctual_client.transport import PunctualClient

ROOT = Path(__file__).resolve().parents[1]
HANDOFF, SCANNER = "handoff", "scanner"
STEADY, BURST, CRON = "steady", "burst", "cron"
CLASSES = (STEADY, BURST, CRON)
# The local stack's targets (docs/benchmarks.md).
TARGET_P99_MS = 500  # steady load
TARGET_MAX_MS = 2000  # steady load, and a burst of 1,000 or more
TARGET_SMALL_BURST_MS = 500  # a burst of fewer than 1,000
LARGE_BURST = 1000
TARGET_CREATES_PER_S = 50
CREATE_ATTEMPTS = 3
REQUEST_TIMEOUT_SECONDS = 60.0
STACK_START_SECONDS = 60.0
# What a stack started for --stack-age is given to be ready, when planned: it is ready in a few seconds.
YOUNG_START_SECONDS = 5.0
RECEIVER_START_SECONDS = 30.0
STACK_STOP_SECONDS = 15.0  # it stops within 8 s (punctual_local.STOP_LIMIT_SECONDS), whatever runs
# Seconds of scheduled time around the burst reported one by one.
SECONDS_AROUND_REPORTED = 10


def log(message: str) -> None:
    print(f"[precision] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- receiver
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


# ------------------------------------------------------------------------------------- local stack
class LocalStack:
    """`punctual local` as a subprocess in its own session, so that Ctrl-C reaches only us."""

    def __init__(self, workdir: Path, extra_args: Sequence[str], log_path: Path | None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = workdir / "data"
        self.log_path = log_path or workdir / "stack.log"
        self.command = [sys.executable, "-m", "punctual_cli", "local", "--port", str(self.port)]
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


# ---------------------------------------------------------------------------------- stall watch
STALL_INTERVAL_SECONDS = 0.05
STALL_THRESHOLD_SECONDS = 0.25
STALLS_LISTED = 10


class StallWatch:
    """This process's own pauses: a thread wakes every `interval` seconds and notes each wake-up later
    than `threshold`.

    The clients that create jobs run in this process. A second in which it was not scheduled (the
    process or the machine paused) is a second without creations that says nothing of the API, so
    the report says when this process stalled, beside the results; nothing is subtracted from them.
    """

    def __init__(
        self,
        interval: float = STALL_INTERVAL_SECONDS,
        threshold: float = STALL_THRESHOLD_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval = interval
        self.threshold = threshold
        self._monotonic = monotonic
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        self.stalls: list[tuple[float, float]] = []  # (epoch seconds it began, seconds it lasted)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            before = self._monotonic()
            if self._stop.wait(self.interval):
                return
            self.note(self._monotonic() - before)

    def note(self, slept: float) -> None:
        """One wake-up, `slept` seconds after the last."""
        late = slept - self.interval
        if late >= self.threshold:
            self.stalls.append((self._clock() - late, late))  # from when it should have woken

    def report(self, burst_at: float) -> dict[str, Any]:
        longest = sorted(self.stalls, key=lambda stall: stall[1], reverse=True)[:STALLS_LISTED]
        return {
            "threshold_ms": round(self.threshold * 1000),
            "count": len(self.stalls),
            "seconds": round(sum(late for _, late in self.stalls), 2),
            # the longest, each as (seconds from the burst's instant when it began, its length in ms)
            "longest": [[round(began - burst_at, 1), round(late * 1000)] for began, late in longest],
        }


# ------------------------------------------------------------------------------------- CPU meter
class CpuMeter:
    """Cores kept busy between marks: by the local stack, by this process, by the whole machine (Linux).

    On a shared machine the difference says whether a run measured Punctual or a busy neighbour.
    """

    def __init__(self, stack_pid: int | None, receiver_pid: int | None = None) -> None:
        self.stack_pid = stack_pid
        self.receiver_pid = receiver_pid  # counted as the benchmark's
        self.marks: dict[str, dict[str, float | None]] = {}

    def mark(self, name: str) -> None:
        own = os.times()
        receiver = _process_cpu_seconds(self.receiver_pid) if self.receiver_pid else None
        self.marks[name] = {
            "wall": time.monotonic(),
            "stack": _process_cpu_seconds(self.stack_pid) if self.stack_pid else None,
            "self": own.user + own.system + (receiver or 0.0),
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
    kind: str  # STEADY, BURST or CRON
    create_at: float  # epoch seconds: when the request is sent (at the earliest)
    due: float  # epoch seconds, whole milliseconds (a cron job: its first :00)


@dataclass(frozen=True)
class Created:
    planned: Planned
    job_id: str | None
    sent: float
    latency: float
    error: str | None = None

    @property
    def path(self) -> str:
        """Who enqueued it: the API (due within the hand-off window when created) or a scanner tick."""
        return HANDOFF if self.planned.due - self.sent < _HANDOFF_LIMIT[0] else SCANNER


_HANDOFF_LIMIT = [180.0]  # the run's hand-off window, set by run()


@dataclass(frozen=True)
class Shape:
    burst_at: float  # epoch seconds, a minute boundary
    plans: dict[str, list[Planned]]  # by stream: "scanned burst", "steady", "handoff burst", "cron"
    flood: tuple[float, float]  # epoch seconds


def _lead(rng: random.Random, leads: tuple[float, float]) -> float:
    # One lead draws nothing, so the default shape's other draws stay what a seed always gave.
    return leads[0] if leads[0] == leads[1] else rng.uniform(*leads)


def handoff_leads_of(args: argparse.Namespace) -> tuple[float, float]:
    """The hand-off part's leads: a spread (--burst-handoff-leads), or one lead."""
    return args.burst_handoff_leads or (args.burst_handoff_lead, args.burst_handoff_lead)


def young_burst_at(args: argparse.Namespace, now: float) -> float:
    """For --stack-age: the first boundary far enough ahead for a stack started now to be ready
    (`YOUNG_START_SECONDS`), to age the given seconds, and to take the burst's longest lead."""
    earliest = now + YOUNG_START_SECONDS + args.stack_age + handoff_leads_of(args)[1]
    return math.ceil(earliest / args.align) * args.align


def plan_shape(args: argparse.Namespace, limit: int, now: float, burst_at: float | None = None) -> Shape:
    """When each job is created and due, around a burst at the first minute boundary far enough
    ahead for every creation to get its lead. Given `burst_at` (a young stack's, --stack-age), the
    burst is there, and the steady jobs that would be created before `now` are left out: a stack
    started just before has seen none of them."""
    rng = random.Random(args.seed)
    handoff = args.handoff_window or (2.0, float(min(75, limit - 10)))
    scanned = args.scanned_window or (float(limit + 10), float(limit + 40))
    scanned_lead = args.burst_scanned_lead or limit + 30.0
    if scanned_lead <= limit:
        log(
            f"warning: --burst-scanned-lead is within the hand-off window ({limit} s): the API hands those off"
        )
    # A spread of leads (--burst-handoff-leads): clients creating a burst over minutes, each job as
    # someone asks for it, rather than all at one moment.
    handoff_leads = handoff_leads_of(args)
    first_creation = max(
        scanned_lead if args.burst and args.burst_scanned_share > 0 else 0.0,
        handoff_leads[1] + 5.0,
        args.around + (scanned[1] if args.scanned_share > 0 else handoff[1]) + 2.0,
        args.flood_seconds / 2 + 1.0,
    )
    if burst_at is None:
        burst_at = math.ceil((now + first_creation + 5.0) / args.align) * args.align
    scanned_count = round(args.burst * args.burst_scanned_share) if args.burst else 0
    index = iter(range(10**9))
    plans: dict[str, list[Planned]] = {
        "scanned burst": [
            Planned(next(index), BURST, burst_at - scanned_lead, burst_at) for _ in range(scanned_count)
        ],
        "handoff burst": sorted(
            (
                Planned(next(index), BURST, burst_at - _lead(rng, handoff_leads), burst_at)
                for _ in range(args.burst - scanned_count)
            ),
            key=lambda p: p.create_at,
        ),
        "cron": [Planned(next(index), CRON, now, math.ceil(now / 60.0) * 60.0) for _ in range(args.cron)],
    }
    steady = []
    count = round(args.rate * 2 * args.around)
    for i in range(count):
        # Due times evenly spread over B +- around; the scanner's share evenly among them.
        due = round((burst_at - args.around + (i + 0.5) * 2 * args.around / count) * 1000) / 1000
        to_scanner = math.floor((i + 1) * args.scanned_share) > math.floor(i * args.scanned_share)
        low, high = scanned if to_scanner else handoff
        steady.append(Planned(next(index), STEADY, due - rng.uniform(low, high), due))
    plans["steady"] = sorted((p for p in steady if p.create_at >= now), key=lambda p: p.create_at)
    return Shape(burst_at, plans, (burst_at - args.flood_seconds / 2, burst_at + args.flood_seconds / 2))


def job_body(plan: Planned, target_url: str, run_id: str) -> dict[str, Any]:
    task = {"type": "http", "params": {"url": f"{target_url}/hook/{plan.index}", "method": "POST"}}
    name = f"precision-{run_id}-{plan.kind}-{plan.index:05d}"
    if plan.kind == CRON:
        return {"name": name, "task": task, "schedule": {"type": "cron", "expression": "* * * * *"}}
    at = to_rfc3339(from_epoch_ms(round(plan.due * 1000)))
    return {"name": name, "task": task, "schedule": {"type": "at", "at": at}}


def create(client: PunctualClient, plan: Planned, body: dict[str, Any], key: str) -> Created:
    sent = time.time()
    started = time.perf_counter()
    error = ""
    for attempt in range(CREATE_ATTEMPTS):
        try:
            # The same key on a retry: a request that timed out but went through is not doubled.
            answer = client.create_job(body, idempotency_key=key)
            return Created(plan, str(answer["id"]), sent, time.perf_counter() - started)
        except ConnectionFailed as exc:
            error = f"{type(exc).__name__}: {exc}"
        except PunctualError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        log(f"create request {plan.index} failed (attempt {attempt + 1}): {error}")
    return Created(plan, None, sent, time.perf_counter() - started, error)


def create_stream(
    client: PunctualClient, plans: list[Planned], threads: int, target_url: str, run_id: str
) -> list[Created]:
    """Send each plan's create request at its time (or as soon as one of `threads` clients is free)."""
    futures: list[Future[Created]] = []
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create") as pool:
        try:
            for plan in plans:
                delay = plan.create_at - time.time()
                if delay > 0:
                    time.sleep(delay)
                key = f"precision-{run_id}-{plan.index}"
                futures.append(pool.submit(create, client, plan, job_body(plan, target_url, run_id), key))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [future.result() for future in futures]


@dataclass(frozen=True)
class Flooded:
    answered: list[float]  # epoch seconds each create was answered
    sent: list[float]  # epoch seconds each create was sent
    latencies_ms: list[float]
    failed: int
    window: tuple[float, float]  # when the clients began and stopped sending (epoch seconds)


def flood(client: PunctualClient, window: tuple[float, float], threads: int, run_id: str) -> Flooded:
    """Create jobs as fast as `threads` clients can from window[0] to window[1] (due an hour after,
    a noop each: they never run during the benchmark)."""
    lock = threading.Lock()
    answered: list[float] = []
    sent: list[float] = []
    latencies: list[float] = []
    failed = [0]
    counter = iter(range(10**9))

    def client_loop() -> None:
        while (now := time.time()) < window[1]:
            if now < window[0]:
                time.sleep(window[0] - now)
                continue
            n = next(counter)
            at = to_rfc3339(from_epoch_ms(round((window[1] + 3600) * 1000)))
            body = {
                "name": f"flood-{run_id}-{n}",
                "task": {"type": "noop"},
                "schedule": {"type": "at", "at": at},
            }
            started = time.perf_counter()
            with lock:
                sent.append(now)
            try:
                client.create_job(body, idempotency_key=f"flood-{run_id}-{n}")
            except (ConnectionFailed, PunctualError):
                with lock:
                    failed[0] += 1
                continue
            with lock:
                answered.append(time.time())
                latencies.append((time.perf_counter() - started) * 1000)

    workers = [threading.Thread(target=client_loop, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return Flooded(answered, sent, latencies, failed[0], window)


def run_streams(
    client: PunctualClient, shape: Shape, args: argparse.Namespace, target_url: str, run_id: str
) -> tuple[list[Created], Flooded | None]:
    """All the streams at once, each with its clients; progress every 10 s."""
    results: dict[str, list[Created]] = {}
    flooded: list[Flooded] = []
    jobs: list[tuple[str, Callable[[], None]]] = [
        (
            name,
            lambda name=name, plans=plans: results.__setitem__(
                name, create_stream(client, plans, args.threads, target_url, run_id)
            ),
        )
        for name, plans in shape.plans.items()
        if plans
    ]
    if args.flood_seconds > 0:
        jobs.append(("flood", lambda: flooded.append(flood(client, shape.flood, args.threads, run_id))))
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(job,), name=name, daemon=True) for name, job in jobs]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        next(t for t in threads if t.is_alive()).join(10.0)
        alive = [t.name for t in threads if t.is_alive()]
        log(
            f"creating: {', '.join(alive) or 'done'}; the burst is due in {shape.burst_at - time.time():.0f} s"
        )
    if errors:
        raise errors[0]
    created = [c for name in shape.plans for c in results.get(name, [])]
    return created, (flooded[0] if flooded else None)


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
    lateness_by_class: dict[str, dict[str, list[float]]]  # class -> path -> lateness (ms)


def expected_cron_runs(created: Created, last: float) -> list[float]:
    """The :00 instants a `* * * * *` job created then runs at, up to `last` (epoch seconds)."""
    first = math.floor(created.sent / 60.0) * 60.0 + 60.0
    return [first + 60.0 * i for i in range(int((last - first) // 60.0) + 1)] if first <= last else []


def analyse(created: list[Created], deliveries: list[Delivery], burst_at: float, last_due: float) -> Analysis:
    jobs = {c.job_id: c for c in created if c.job_id}
    per_execution = Counter(d.execution_id for d in deliveries)
    first: dict[tuple[str, float], Delivery] = {}  # per execution (job, scheduled time): its first delivery
    for delivery in sorted(deliveries, key=lambda d: d.arrived):
        if delivery.job_id in jobs:
            scheduled = (
                delivery.scheduled_at
                if delivery.scheduled_at is not None
                else jobs[delivery.job_id].planned.due
            )
            first.setdefault((delivery.job_id, round(scheduled, 3)), delivery)

    def lateness_ms(delivery: Delivery) -> float:
        scheduled = delivery.scheduled_at
        if scheduled is None:
            scheduled = jobs[delivery.job_id].planned.due if delivery.job_id in jobs else delivery.arrived
        return (delivery.arrived - scheduled) * 1000

    by_class: dict[str, dict[str, list[float]]] = {k: {HANDOFF: [], SCANNER: []} for k in CLASSES}
    per_second: dict[int, list[float]] = defaultdict(list)
    burst_answered_in_time: list[float] = []  # created (the API's answer) before its instant
    for (job_id, scheduled), delivery in first.items():
        job = jobs[job_id]
        late = lateness_ms(delivery)
        if job.planned.kind == BURST and job.sent + job.latency <= scheduled:
            burst_answered_in_time.append(late)
        path = (
            job.path
            if job.planned.kind != CRON
            else (HANDOFF if scheduled - job.sent < _HANDOFF_LIMIT[0] else SCANNER)
        )
        by_class[job.planned.kind][path].append(late)
        offset = math.floor(scheduled - burst_at)
        if abs(offset) <= SECONDS_AROUND_REPORTED:
            per_second[offset].append(late)
    delivered_one_time = {job_id for job_id, _ in first}
    missed_one_time = [
        c for c in jobs.values() if c.planned.kind != CRON and c.job_id not in delivered_one_time
    ]
    cron_expected = {
        (c.job_id, t)
        for c in jobs.values()
        if c.planned.kind == CRON
        for t in expected_cron_runs(c, last_due)
    }
    missed_cron = len({(j, round(t, 3)) for j, t in cron_expected} - set(first))
    arrivals = sorted(d.arrived for d in first.values())
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    report = {
        "executions_received": len(deliveries),
        "executions_delivered": len(first),
        "executed_per_second": {
            "mean": round(len(arrivals) / span, 2) if span else None,
            "peak_1s": max(Counter(int(t) for t in arrivals).values(), default=0),
            "over_seconds": round(span, 1),
        },
        "lateness_ms": summary_ms([v for paths in by_class.values() for vs in paths.values() for v in vs]),
        # How long after its arrival the receiver's handler got to each request (Receiver says why
        # arrival is the kernel's time): what lateness measured at the handler would have added.
        "receiver_delay_ms": summary_ms([(d.handled - d.arrived) * 1000 for d in first.values()]),
        "lateness_ms_by_class": {
            kind: {
                "all": summary_ms(paths[HANDOFF] + paths[SCANNER]),
                **{path: summary_ms(values) for path, values in paths.items() if values},
            }
            for kind, paths in by_class.items()
        },
        # The burst's executions whose creation was answered before their instant: with a short lead
        # on a busy machine some are answered after it, late before the scheduler has them.
        "burst_answered_before_instant": summary_ms(burst_answered_in_time),
        # Every execution scheduled in each second around the burst (B + offset), whatever its class.
        "lateness_ms_by_second_around_burst": {
            f"{offset:+d}": {
                "count": len(values),
                "p50": round(percentile(values, 50) or 0, 1),
                "p99": round(percentile(values, 99) or 0, 1),
                "max": round(max(values), 1),
            }
            for offset, values in sorted(per_second.items())
        },
        "early": sum(1 for d in deliveries if d.job_id in jobs and lateness_ms(d) < 0),
        "missed": len(missed_one_time) + missed_cron,
        "missed_by_class": {
            **Counter(c.planned.kind for c in missed_one_time),
            **({CRON: missed_cron} if missed_cron else {}),
        },
        # (the first few, to look up: `punctual jobs get`, or the table)
        "missed_job_ids": [c.job_id for c in missed_one_time][:20],
        "duplicates": sum(n - 1 for n in per_execution.values() if n > 1),
        "retried_attempts": sum(1 for d in deliveries if d.attempt > 1),
        # A one-time job has one execution: more distinct execution ids for it would be a bug.
        "extra_executions": len({(d.job_id, d.execution_id) for d in deliveries if d.job_id in jobs})
        - len(first),
        "unexpected": sum(1 for d in deliveries if d.job_id not in jobs),
        "burst_at": _iso(burst_at),
    }
    return Analysis(report, by_class)


def cross_check(
    client: PunctualClient, created: list[Created], deliveries: list[Delivery], size: int
) -> dict[str, Any]:
    """Ask the API about a sample of one-time jobs: their execution's status and the worker's
    lateness_ms; the missed ones, if any, separately (still QUEUED, or no execution at all?)."""
    made = [c for c in created if c.job_id and c.planned.kind != CRON]
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


def creation_report(created: list[Created], flooded: Flooded | None, burst_at: float) -> dict[str, Any]:
    made = [c for c in created if c.job_id]
    latencies = [c.latency * 1000 for c in made]
    near = [c.latency * 1000 for c in made if abs(c.sent - burst_at) <= SECONDS_AROUND_REPORTED]
    report: dict[str, Any] = {
        "jobs_created": len(made),
        "failed": sum(1 for c in created if c.error),
        "by_class_and_path": dict(Counter(f"{c.planned.kind}/{c.path}" for c in made)),
        "latency_ms": summary_ms(latencies),
        "latency_ms_within_10s_of_burst": summary_ms(near),
    }
    if flooded is not None:
        per_second = Counter(math.floor(t) for t in flooded.answered)
        sent_per_second = Counter(math.floor(t) for t in flooded.sent)
        # Every whole second of the flood's window, those without an answer included (a stall at its
        # start is a second of none, not a flood that began later).
        whole = range(math.ceil(flooded.window[0]), math.floor(flooded.window[1]))
        inner = [per_second[s] for s in whole]
        seconds = sorted(set(per_second) | set(whole))
        report["flood"] = {
            "jobs_created": len(flooded.answered),
            "failed": flooded.failed,
            "rate_per_s": round(sum(inner) / len(inner), 1) if inner else None,
            "slowest_second": min(inner) if inner else None,
            # answered in each second from the burst's instant (0: the burst's own second)
            "answered_by_second_around_burst": {
                f"{s - math.floor(burst_at):+d}": per_second[s] for s in seconds
            },
            # sent in each such second: a second with few sent is the clients', not the API's
            "sent_by_second_around_burst": {
                f"{s - math.floor(burst_at):+d}": sent_per_second[s] for s in seconds
            },
            "latency_ms": summary_ms(flooded.latencies_ms),
        }
    return report


def _iso(epoch: float) -> str:
    return to_rfc3339(datetime.fromtimestamp(epoch, UTC))


# --------------------------------------------------------------------------------------------- PNG
def draw_histograms(path: Path, by_class: dict[str, dict[str, list[float]]], title: str) -> None:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit("--png needs matplotlib: .venv/bin/pip install -e '.[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in CLASSES if by_class[k][HANDOFF] or by_class[k][SCANNER]]
    if not kinds:
        log("nothing was delivered: no histogram")
        return
    names = {STEADY: "steady load", BURST: "burst at one instant", CRON: "cron jobs at :00"}
    labels = {HANDOFF: "handed off by the API", SCANNER: "enqueued by a scanner tick"}
    figure, axes_list = plt.subplots(
        len(kinds), 1, figsize=(9, 2.6 * len(kinds) + 0.8), dpi=110, squeeze=False
    )
    for axes, kind in zip([a[0] for a in axes_list], kinds, strict=True):
        values = by_class[kind][HANDOFF] + by_class[kind][SCANNER]
        # Outliers far beyond p99 would squeeze the rest into one bar: they are counted, not drawn.
        p99 = percentile(values, 99) or 0.0
        high = max(values) if max(values) <= 3 * max(p99, 100.0) else 3 * max(p99, 100.0)
        low = min(min(values), 0.0)
        width = max(5.0, math.ceil((high - low) / 60 / 5) * 5)  # about 60 bars, in steps of 5 ms
        bins = [low + width * i for i in range(int((high - low) / width) + 2)]
        beyond = [v for v in values if v > bins[-1]]
        drawn = [p for p in (HANDOFF, SCANNER) if by_class[kind][p]]
        axes.hist(
            [by_class[kind][p] for p in drawn],
            bins=bins,
            stacked=True,
            label=[f"{labels[p]} ({len(by_class[kind][p])})" for p in drawn],
            color=["#4c72b0" if p == HANDOFF else "#dd8452" for p in drawn],
        )
        for p, style in ((50, ":"), (99, "--")):
            mark = percentile(values, p)
            assert mark is not None
            axes.axvline(mark, color="black", linestyle=style, linewidth=1, label=f"p{p} {mark:.0f} ms")
        axes.plot([], [], " ", label=f"max {max(values):.0f} ms")
        if beyond:
            axes.plot([], [], " ", label=f"{len(beyond)} later than {bins[-1]:.0f} ms not drawn")
        axes.set_title(f"{names[kind]}: {len(values)} executions", fontsize=10)
        axes.set_ylabel("executions")
        axes.legend(frameon=False, fontsize=8)
        axes.spines[["top", "right"]].set_visible(False)
    axes_list[-1][0].set_xlabel("lateness at the receiver: arrival - scheduled time (ms)")
    figure.suptitle(title, fontsize=10)
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
        description="Precision end to end under bursts, cron at :00 and steady load: lateness of webhook "
        "jobs created through the API, measured at a receiver. Prints JSON.",
    )
    load = parser.add_argument_group("load")
    load.add_argument("--burst", type=int, default=100, help="one-time jobs due at one instant (default 100)")
    load.add_argument(
        "--burst-scanned-share",
        type=float,
        default=0.5,
        help="share of the burst created before the hand-off window, for the scanner (default 0.5)",
    )
    load.add_argument(
        "--burst-scanned-lead",
        type=float,
        default=None,
        help="seconds before the burst its scanned part is created (default: the hand-off window + 30)",
    )
    load.add_argument(
        "--burst-handoff-lead",
        type=float,
        default=30.0,
        help="seconds before the burst the rest of it is created, as fast as the clients go (default 30)",
    )
    load.add_argument(
        "--burst-handoff-leads",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="spread the hand-off part's creations over these leads, in seconds, instead of one lead",
    )
    load.add_argument(
        "--align",
        type=int,
        default=60,
        help="the burst is due on a multiple of this many seconds (default 60: a minute boundary)",
    )
    load.add_argument("--cron", type=int, default=20, help="recurring jobs * * * * * (default 20)")
    load.add_argument("--rate", type=float, default=20.0, help="steady jobs due a second (default 20)")
    load.add_argument(
        "--around",
        type=float,
        default=30.0,
        help="steady jobs due from B - this to B + this seconds (default 30)",
    )
    load.add_argument(
        "--scanned-share",
        type=float,
        default=0.2,
        help="share of the steady jobs created before the hand-off window, for the scanner (default 0.2)",
    )
    load.add_argument(
        "--handoff-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead steady jobs the API hands off are created (default 2:75)",
    )
    load.add_argument(
        "--scanned-window",
        type=window,
        default=None,
        metavar="LOW:HIGH",
        help="seconds ahead steady jobs left to the scanner are created (default: hand-off window +10 to +40)",
    )
    load.add_argument(
        "--flood-seconds",
        type=float,
        default=20.0,
        help="seconds around the burst more clients create jobs as fast as they can (default 20; 0: none)",
    )
    load.add_argument("--threads", type=int, default=8, help="clients per stream of creations (default 8)")
    load.add_argument("--grace", type=float, default=10.0, help="seconds to wait after the last due time")
    load.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="seconds more to wait for executions not received after the grace, before counting them missed",
    )
    load.add_argument(
        "--sample", type=int, default=100, help="jobs cross-checked through the API (default 100)"
    )
    load.add_argument("--seed", type=int, default=1, help="seed of the lead draws")
    load.add_argument("--no-calibration", action="store_true", help="skip measuring moto first")
    output = parser.add_argument_group("output")
    output.add_argument("--png", type=Path, default=None, help="write the lateness histograms here")
    output.add_argument("--stack-log", type=Path, default=None, help="keep the local stack's output here")
    stack = parser.add_argument_group("the local stack (ignored with --endpoint)")
    stack.add_argument("--tick-seconds", type=int, default=None, help="punctual local --tick-seconds")
    stack.add_argument("--concurrency", type=int, default=None, help="punctual local --concurrency")
    stack.add_argument(
        "--stack-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a young stack: start it this long before the burst's first hand-off creation (it waits "
        "for the boundary that allows it); steady jobs planned before it is ready are left out; "
        "no calibration",
    )
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


def targets_for(analysis: Analysis, creation: dict[str, Any], burst: int) -> dict[str, Any]:
    report = analysis.report
    classes = report["lateness_ms_by_class"]
    steady, bursting = classes[STEADY]["all"], classes[BURST]["all"]
    burst_limit = TARGET_MAX_MS if burst >= LARGE_BURST else TARGET_SMALL_BURST_MS
    flood = creation.get("flood") or {}
    flood_rate, slowest = flood.get("rate_per_s"), flood.get("slowest_second")
    checks = {
        "burst_max_ms_at_most": burst_limit,
        "burst_met": not burst or (bursting["max"] is not None and bursting["max"] <= burst_limit),
        "steady_p99_ms_at_most": TARGET_P99_MS,
        "steady_p99_met": steady["p99"] is not None and steady["p99"] <= TARGET_P99_MS,
        "steady_max_ms_at_most": TARGET_MAX_MS,
        "steady_max_met": steady["max"] is not None and steady["max"] <= TARGET_MAX_MS,
        "creates_per_s_at_least": TARGET_CREATES_PER_S,
        "creation_met": flood_rate is None or flood_rate >= TARGET_CREATES_PER_S,
        # "during all of it": every whole second of the flood, not only its average
        "creation_each_second_met": slowest is None or slowest >= TARGET_CREATES_PER_S,
        "none_early": report["early"] == 0,
        "none_missed": report["missed"] == 0 and not creation["failed"],
        "none_doubled": report["duplicates"] == 0 and report["extra_executions"] == 0,
    }
    checks["met"] = all(v for k, v in checks.items() if k.endswith("_met") or k.startswith("none_"))
    return checks


def run(args: argparse.Namespace, cleanup: ExitStack) -> dict[str, Any]:
    tick = args.tick_seconds or 60
    limit = handoff_seconds(tick)
    _HANDOFF_LIMIT[0] = float(limit)
    young = args.stack_age is not None and not args.endpoint
    calibration = None if args.no_calibration or args.endpoint or young else calibrate()
    if calibration:
        log(f"calibration: {calibration}")
    receiver = cleanup.enter_context(running_receiver(args.receiver_host, args.receiver_port))
    receiver_url = args.receiver_url or f"http://{args.receiver_host}:{receiver.server_address[1]}"
    stack_args: list[str] = []
    stack: LocalStack | None = None
    young_at = stack_ready = 0.0
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
        if young:
            # Started so that the burst's first creation comes --stack-age seconds after it is ready.
            young_at = young_burst_at(args, time.time())
            start_at = young_at - handoff_leads_of(args)[1] - args.stack_age - YOUNG_START_SECONDS
            log(f"starting the local stack in {start_at - time.time():.0f} s (burst at {_iso(young_at)})")
            time.sleep(max(0.0, start_at - time.time()))
        log(f"starting the local stack: {' '.join(stack.command[2:])}")
        stack.start()
        stack_ready = time.time()
        endpoint = stack.url
    meter = CpuMeter(stack.process.pid if stack and stack.process else None, receiver.process.pid)
    client = PunctualClient.from_endpoint(endpoint, token=args.token, timeout=REQUEST_TIMEOUT_SECONDS)
    run_id = f"{int(time.time())}"
    shape = plan_shape(args, limit, time.time(), burst_at=young_at if young else None)
    log(
        f"burst of {args.burst} at {_iso(shape.burst_at)} (in {shape.burst_at - time.time():.0f} s), "
        f"{args.cron} cron jobs, {args.rate:g} steady jobs/s; receiver {receiver_url}"
    )
    meter.mark("start")
    watch = StallWatch()
    watch.start()
    cleanup.callback(watch.stop)
    load_before = load_average()
    created, flooded = run_streams(client, shape, args, receiver_url, run_id)
    made = [c for c in created if c.job_id]
    for failure in [c for c in created if c.error][:5]:
        log(f"create failed: {failure.error}")
    last_due = max([c.planned.due for c in made if c.planned.kind != CRON] + [shape.burst_at])
    # A create answered after its due time (the API that slow) has its execution still to come.
    deadline = max([last_due] + [c.sent + c.latency for c in made]) + args.grace
    while (remaining := deadline - time.time()) > 0:
        log(f"received {receiver.count()}; last due time + grace in {remaining:.0f} s")
        time.sleep(min(10.0, remaining))
    # Missed means never run, not late: what has not come yet gets up to --settle more seconds (its
    # lateness counted as it is), so that a loss and a long delay are told apart.
    expected = {c.job_id for c in made if c.planned.kind != CRON}
    settle_until = time.time() + args.settle
    while (waiting := len(expected - {d.job_id for d in receiver.snapshot()})) and time.time() < settle_until:
        log(f"{waiting} executions not received yet; waiting up to {settle_until - time.time():.0f} s more")
        time.sleep(2.0)
    meter.mark("end")
    deliveries = receiver.snapshot()
    analysis = analyse(created, deliveries, shape.burst_at, last_due)
    log(f"checking {min(args.sample, len(made))} executions through the API")
    checked = cross_check(client, created, deliveries, args.sample)
    for job in made:
        if job.planned.kind == CRON and job.job_id:
            try:
                client.cancel_job(job.job_id)
            except PunctualError as exc:
                log(f"could not cancel cron job {job.job_id}: {exc}")
    creation = creation_report(created, flooded, shape.burst_at)
    if young:
        burst_created = [c.sent for c in made if c.planned.kind == BURST]
        creation["stack_age_s"] = {
            "at_first_burst_creation": round(min(burst_created, default=math.nan) - stack_ready, 1),
            "at_burst": round(shape.burst_at - stack_ready, 1),
        }
    result: dict[str, Any] = {
        "benchmark": "precision",
        "stack": "deployed (--endpoint)" if args.endpoint and not is_loopback(endpoint) else "local",
        "config": {
            "endpoint": endpoint if args.endpoint else "local stack started by the benchmark",
            "local_stack_args": None if args.endpoint else stack_args,
            "burst": args.burst,
            "burst_scanned_share": args.burst_scanned_share,
            "burst_handoff_lead_s": args.burst_handoff_lead,
            "burst_handoff_leads_s": list(args.burst_handoff_leads) if args.burst_handoff_leads else None,
            "cron_jobs": args.cron,
            "steady_rate_per_s": args.rate,
            "steady_around_s": args.around,
            "steady_scanned_share": args.scanned_share,
            "handoff_limit_s": limit,
            "flood_seconds": args.flood_seconds,
            "clients_per_stream": args.threads,
            "grace_s": args.grace,
            "settle_s": args.settle,
            "seed": args.seed,
            "stack_age_s": args.stack_age,
        },
        "calibration": {
            **(calibration or {}),
            "load_average_at_start": load_before,
            "load_average_at_end": load_average(),
        },
        "machine": {
            **environment(),
            "cpu_whole_run": meter.between("start", "end"),
            "benchmark_process_stalls": watch.report(shape.burst_at),
        },
        "creation": creation,
        "delivery": {
            **analysis.report,
            "arrival_clock": "kernel receive time" if receiver.kernel_times else "receiver handler",
        },
        "api_cross_check": checked,
        "targets": targets_for(analysis, creation, args.burst),
    }
    if args.png:
        where = "Punctual on AWS" if args.endpoint and not is_loopback(endpoint) else "Punctual local stack"
        title = (
            f"{where}: a burst of {args.burst} at one instant, {args.cron} cron jobs at :00, "
            f"{args.rate:g} steady jobs/s"
        )
        if calibration:
            rates = calibration["moto_calls_per_s"]
            title += (
                f"\nmachine: moto {rates['conditional_update_item']:.0f} conditional updates/s, "
                f"{rates['put_item']:.0f} puts/s; load average {load_before[0] if load_before else '?'}"
            )
        draw_histograms(args.png, analysis.lateness_by_class, title)
        result["png"] = str(args.png)
        log(f"wrote {args.png}")
    return result


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM too: unwind, so that the local stack is stopped


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (
        args.rate < 0
        or args.around <= 0
        or args.burst < 0
        or args.cron < 0
        or not 0 <= args.scanned_share <= 1
        or not 0 <= args.burst_scanned_share <= 1
        or args.threads < 1
        or args.align < 1
    ):
        parser.error("counts and rates must not be negative, --around positive, shares within 0..1")
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
