"""The command: the receiver started, the packs fired cold and prepared, the other costs measured,
the result printed as JSON."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
from typing import Any

from bench.common import emit, environment
from bench.pack_fire.firing import HOLD_SECONDS, fire, fire_prepared, preparer, side_by_side
from bench.pack_fire.member_costs import codec, dynamodb_calls
from bench.pack_fire.receiver import certificate, serve
from bench.webhook_cpu import _caller
from punctual.platform.config import FIRE_THREADS, Settings

# The first line of the package's docstring.
DESCRIPTION = "Benchmark: a pack's fire stage from one process, on loopback. Prints JSON."


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
    files = certificate(tempfile.mkdtemp(prefix="pack-fire-")) if tls else None
    server = context.Process(target=serve, args=(send, stop, collect, files), daemon=True)
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
        prepare, start, launch = preparer(url)
        cold: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        prepared: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for _ in range(rounds):
            for size in sizes:
                cold[size].append(fire(size, call, arrivals, threads))
                prepared[size].append(fire_prepared(size, prepare, start, launch, arrivals, threads))
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
    p = argparse.ArgumentParser(prog="python -m bench.pack_fire", description=DESCRIPTION)
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
