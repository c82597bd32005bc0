"""Benchmark: a pack's fire stage from one process, on loopback. Prints JSON.

What a worker does with a pack at its instant (punctual.execution.packs.PackRunner): its members on a
thread pool of min(members, FIRE_THREADS), each holding until the instant, then running the `http`
task (its address guard, its headers, a connection a call) against a receiver in a child process on
127.0.0.1. For each pack size (`--sizes`, 1,000 and 500 by default), from the instant: when the last
call began, when the receiver had the last request, when the last answer came back; the caller's CPU
seconds (this process, all its threads); the peak threads and open file descriptors.

Then the same packs prepared (`prepared_packs`): each member's task prepared first, side by side on
the pool, as the PackRunner does while it holds (tasks.prepare: its address checked, its connection
opened; at most PREPARED_CONNECTIONS_MAX held open, the rest start cold), then held until the
instant, 1 s after they are all ready, and fired. `cold_vs_prepared` sets the two side by side, each
figure the median of `--rounds` rounds (cold and prepared in turn): from the instant to the last
request received, and the CPU a start costs from the hold on (a prepared one's preparing apart).

Then what else a member costs the same process's CPU: the pack's body made and read
(domain/work.py `Pack.to_body`, `read_body`, at `pack_size` entries), and a DynamoDB call through
boto3 (an UpdateItem, as a claim or an outcome is) to a stand-in on loopback answering at once, called
from as many threads as the pack's, so that the burst model (bench.burst) can charge a member's start
and its writes to the worker's share of a vCPU. Plain HTTP: a TLS handshake would add to the
webhook's figure; `--tls` measures the webhooks over https instead (a certificate made for the run,
trusted beside the system's authorities, as the task loads them for each connection). Nothing
leaves the machine.

    .venv/bin/python -m bench.pack_fire                     # packs of 1,000 and 500, cold and prepared
    .venv/bin/python -m bench.pack_fire --tls --dynamodb-calls 0
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from bench import offline  # noqa: F401  (first: it sets up the environment)
from bench.common import WEBHOOK, emit, environment
from bench.webhook_cpu import LOOPBACK, _caller
from punctual.domain.executions import execution_id_for
from punctual.domain.work import PACK_MAX_BYTES, Pack, WorkItem, read_body
from punctual.platform.clock import SystemClock
from punctual.platform.config import FIRE_THREADS, Settings
from punctual.tasks import Prepared, TaskContext, TaskPolicy
from punctual.tasks.http import HttpParams, HttpTask
from punctual_testing.loopback_tls import loopback_certificate

# Members hold until this long after the pool is started: every thread is up and waiting by then.
HOLD_SECONDS = 1.0
SAMPLE_SECONDS = 0.005
UPDATE_ANSWER = json.dumps({"Attributes": {"status": {"S": "RUNNING"}}}).encode()


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that notes when each request arrived (the wall clock both processes share)."""

    arrivals: list[float] = []
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        _Receiver.arrivals.append(time.time())
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = b'{"ok": true}' if self.path.startswith("/punctual") else UPDATE_ANSWER
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    request_queue_size = 2048  # a pack's connections all come at once
    daemon_threads = True

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.do_handshake()  # (on the connection's thread, not the one that accepts)
        super().finish_request(request, client_address)


def _serve(answer: Connection, stop: Event, collect: Event, tls: tuple[str, str] | None = None) -> None:
    """`tls`: the certificate and key files to answer https with."""
    server = _Server(("127.0.0.1", 0), _Receiver)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        scheme = "https"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answer.send(f"{scheme}://127.0.0.1:{server.server_address[1]}")
    while not stop.is_set():
        if collect.wait(0.05):
            collect.clear()
            answer.send(list(_Receiver.arrivals))
            _Receiver.arrivals.clear()
    server.shutdown()


class _Peaks:
    """The process's threads and open descriptors, sampled while a pack fires."""

    def __init__(self) -> None:
        self.threads = 0
        self.descriptors = 0
        self.cpu = 0.0  # the sampler's own CPU seconds, not the pack's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.threads = max(self.threads, threading.active_count())
            self.descriptors = max(self.descriptors, _descriptors())
            time.sleep(SAMPLE_SECONDS)
        self.cpu = time.thread_time()

    def __enter__(self) -> _Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def spent(self) -> float:
        """The sampler's CPU seconds so far (while it runs)."""
        assert self._thread.ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))


def _descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def fire(
    size: int,
    call: Callable[[int], Any],
    arrivals: Callable[[], list[float]],
    most_threads: int = FIRE_THREADS,
) -> dict[str, Any]:
    """`size` calls on the PackRunner's pool, each held until one instant, then made side by side."""
    threads = min(size, most_threads)
    began = [0.0] * size
    answered = [0.0] * size
    baseline = _descriptors()
    cpu = time.process_time()
    instant = time.time() + HOLD_SECONDS

    def member(i: int) -> None:
        time.sleep(max(0.0, instant - time.time()))
        began[i] = time.time()
        call(i)
        answered[i] = time.time()

    with _Peaks() as peaks, ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(member, range(size)))
    cpu = time.process_time() - cpu - peaks.cpu
    return _fired(size, threads, instant, began, answered, arrivals(), cpu) | {
        "peak_threads": peaks.threads,
        "peak_open_descriptors": peaks.descriptors,
        "descriptors_before": baseline,
    }


def _fired(
    size: int,
    threads: int,
    instant: float,
    began: list[float],
    answered: list[float],
    received: list[float],
    cpu: float,
) -> dict[str, Any]:
    """A pack's starts against its instant (epoch seconds) and the CPU they took."""
    return {
        "executions": size,
        "threads": threads,
        "last_call_began_s": round(max(began) - instant, 3),
        "last_request_received_s": round(max(received) - instant, 3) if received else None,
        "requests_received": len(received),
        "last_answered_s": round(max(answered) - instant, 3),
        "p50_call_began_s": round(sorted(began)[size // 2] - instant, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_webhook": round(cpu * 1000 / size, 3),
    }


def _preparer(url: str) -> tuple[Callable[[int], Prepared], Callable[[int, Prepared], Any]]:
    """The `http` task of `_caller`, prepared (its connection opened) and then fired."""
    task = HttpTask()
    params = HttpParams(**{**WEBHOOK["params"], "url": f"{url}/punctual/reminders"})
    policy = TaskPolicy(allowed_networks=LOOPBACK)
    clock = SystemClock()

    def context(i: int) -> TaskContext:
        return TaskContext(
            job_id=f"job-{i}",
            execution_id=f"exe-{i}",
            scheduled_at=clock.now(),  # (due now: its connection is opened ahead)
            attempt=1,
            timeout_seconds=10.0,
            clock=clock,
            policy=policy,
        )

    def prepare(i: int) -> Prepared:
        return task.prepare(params, context(i))

    def start(i: int, ready: Prepared) -> Any:
        return ready.fire(context(i))

    return prepare, start


def fire_prepared(
    size: int,
    prepare: Callable[[int], Prepared],
    start: Callable[[int, Prepared], Any],
    arrivals: Callable[[], list[float]],
    most_threads: int = FIRE_THREADS,
) -> dict[str, Any]:
    """`fire`, each member prepared first on the same pool; the CPU of the preparing and of the
    starts (from the hold on) apart."""
    threads = min(size, most_threads)
    began = [0.0] * size
    answered = [0.0] * size
    baseline = _descriptors()
    with _Peaks() as peaks, ThreadPoolExecutor(max_workers=threads) as pool:
        cpu, sampler = time.process_time(), peaks.spent()
        readied = list(pool.map(prepare, range(size)))
        preparing_cpu = time.process_time() - cpu - (peaks.spent() - sampler)
        connected = _descriptors() - baseline
        instant = time.time() + HOLD_SECONDS
        cpu, sampler = time.process_time(), peaks.spent()

        def member(i: int) -> None:
            time.sleep(max(0.0, instant - time.time()))
            began[i] = time.time()
            start(i, readied[i])
            answered[i] = time.time()

        list(pool.map(member, range(size)))
        cpu = time.process_time() - cpu - (peaks.spent() - sampler)
    return _fired(size, threads, instant, began, answered, arrivals(), cpu) | {
        "connections_open_at_hold": connected,
        "preparing_cpu_ms_per_webhook": round(preparing_cpu * 1000 / size, 3),
        "peak_threads": peaks.threads,
        "peak_open_descriptors": peaks.descriptors,
        "descriptors_before": baseline,
    }


def side_by_side(cold: list[dict[str, Any]], prepared: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one pack size, cold and prepared: the median of each figure."""

    def median(rounds: list[dict[str, Any]], key: str) -> float:
        return round(statistics.median(r[key] for r in rounds if r[key] is not None), 3)

    return {
        "rounds": len(cold),
        "last_request_received_s": {
            "cold": median(cold, "last_request_received_s"),
            "prepared": median(prepared, "last_request_received_s"),
        },
        "last_answered_s": {
            "cold": median(cold, "last_answered_s"),
            "prepared": median(prepared, "last_answered_s"),
        },
        "cpu_ms_per_start": {
            "cold": median(cold, "cpu_ms_per_webhook"),
            "prepared": median(prepared, "cpu_ms_per_webhook"),
            "prepared_preparing": median(prepared, "preparing_cpu_ms_per_webhook"),
        },
    }


def codec(entries: int, rounds: int) -> dict[str, Any]:
    """The CPU to make and read a pack's body of `entries` scheduled executions."""
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    items = tuple(
        WorkItem(f"job_{i:020d}", execution_id_for(f"job_{i:020d}", at, 1), at, 1) for i in range(entries)
    )
    pack = Pack(at, items, shard=7)
    body = pack.to_body()
    start = time.process_time()
    for _ in range(rounds):
        pack.to_body()
    encode = (time.process_time() - start) / rounds
    start = time.process_time()
    for _ in range(rounds):
        read_body(body)
    decode = (time.process_time() - start) / rounds
    assert read_body(body).items == items
    return {
        "entries": entries,
        "body_bytes": len(body.encode()),
        "bytes_per_entry": round(len(body.encode()) / entries, 1),
        "max_bytes": PACK_MAX_BYTES,
        "encode_ms": round(encode * 1000, 2),
        "decode_ms": round(decode * 1000, 2),
        "decode_ms_per_entry": round(decode * 1000 / entries, 4),
    }


def dynamodb_calls(url: str, calls: int, threads: int) -> dict[str, Any]:
    """The caller's CPU for a boto3 UpdateItem (a claim's or an outcome's size) to a stand-in that
    answers at once, `threads` at a time."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        verify=os.environ.get("SSL_CERT_FILE") if url.startswith("https") else None,
        config=Config(max_pool_connections=threads, retries={"max_attempts": 1}),
    )

    def update(i: int) -> None:
        client.update_item(
            TableName="punctual",
            Key={"pk": {"S": f"JOB#job_{i:020d}"}, "sk": {"S": f"EXEC#2026-12-01T09:00:00.000Z#{i:032x}"}},
            UpdateExpression="SET #st = :st, started_at = :s, lease_until = :l, attempts = :a",
            ConditionExpression="attribute_not_exists(pk) OR #st IN (:q, :p)",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":st": {"S": "RUNNING"},
                ":s": {"N": "1796115600000"},
                ":l": {"N": "1796115690000"},
                ":a": {"N": "1"},
                ":q": {"S": "QUEUED"},
                ":p": {"S": "PENDING"},
            },
            ReturnValues="ALL_NEW",
        )

    for i in range(20):  # warm: the client's models, its first connections
        update(i)
    cpu, wall = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(update, range(calls)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "calls": calls,
        "threads": threads,
        "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
        "wall_s": round(wall, 3),
    }


def _certificate(directory: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, in `directory`; this process trusts it from now on,
    beside the system's authorities (SSL_CERT_FILE: each connection's context loads them all)."""
    cert_file, key_file = loopback_certificate(Path(directory))
    bundle = os.path.join(directory, "bundle.pem")
    system = ssl.get_default_verify_paths().cafile
    with open(bundle, "wb") as out:
        if system and os.path.exists(system):
            with open(system, "rb") as authorities:
                out.write(authorities.read())
        out.write(cert_file.read_bytes())
    os.environ["SSL_CERT_FILE"] = bundle
    return str(cert_file), str(key_file)


def measure(
    sizes: list[int],
    pack_size: int,
    dynamodb: int,
    threads: int = FIRE_THREADS,
    rounds: int = 1,
    tls: bool = False,
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    stop, collect = context.Event(), context.Event()
    files = _certificate(tempfile.mkdtemp(prefix="pack-fire-")) if tls else None
    server = context.Process(target=_serve, args=(send, stop, collect, files), daemon=True)
    server.start()

    def arrivals() -> list[float]:
        collect.set()
        found: list[float] = receive.recv()
        return found

    try:
        url = receive.recv()
        call = _caller(url)
        for i in range(20):  # warm: imports, the first connections
            call(i)
        arrivals()
        prepare, start = _preparer(url)
        cold: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        prepared: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for _ in range(rounds):
            for size in sizes:
                cold[size].append(fire(size, call, arrivals, threads))
                prepared[size].append(fire_prepared(size, prepare, start, arrivals, threads))
        found: dict[str, Any] = {
            "packs": {str(size): cold[size][0] for size in sizes},
            "prepared_packs": {str(size): prepared[size][0] for size in sizes},
            "cold_vs_prepared": {str(size): side_by_side(cold[size], prepared[size]) for size in sizes},
            "pack_body": codec(pack_size, 20),
        }
        if dynamodb:
            found["dynamodb_update_item"] = dynamodb_calls(url, dynamodb, min(dynamodb, FIRE_THREADS))
            arrivals()
        return found
    finally:
        stop.set()
        server.join(timeout=5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "benchmark": "pack_fire",
        "command": "python -m bench.pack_fire " + " ".join(sys.argv[1:]),
        "environment": environment(),
        "fire_threads": args.threads,
        "hold_s": HOLD_SECONDS,
        "tls": args.tls,
        "note": "seconds after the instant; one process on this machine's cores, loopback, "
        + ("https (TLS)" if args.tls else "plain HTTP"),
        **measure(args.sizes, args.pack_size, args.dynamodb_calls, args.threads, args.rounds, args.tls),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.pack_fire", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 500], help="executions in each pack fired")
    p.add_argument("--pack-size", type=int, default=Settings().pack_size, help="entries in the body measured")
    p.add_argument(
        "--threads", type=int, default=FIRE_THREADS, help="the pool's threads at most (the PackRunner's)"
    )
    p.add_argument("--tls", action="store_true", help="webhooks over https (the DynamoDB stand-in too)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each pack, cold and prepared in turn")
    p.add_argument("--dynamodb-calls", type=int, default=1000, help="boto3 UpdateItems measured (0: none)")
    return p


def main(argv: list[str] | None = None) -> int:
    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
