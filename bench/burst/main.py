"""The command: the scenarios run, their inputs labelled, the result printed as JSON."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from bench import webhook_cpu
from bench.burst.documented import DYNAMODB_CALL_CPU_MS, INPUTS, PACK_WEBHOOK_CPU_MS
from bench.burst.model import GOAL_SECONDS, simulate
from bench.burst.scenarios import (
    lead_arithmetic,
    one_instant_million,
    packed_prescaled,
    scenarios,
    steady_10k_per_s,
)
from punctual_cli import capacity

# The first line of the package's docstring.
DESCRIPTION = "Benchmark 4: the deployed pipeline under a burst, a discrete-event model. Prints JSON."


def measure_scanner_rate() -> float:
    """The real scanner's executions a second on stand-in clients (bench.scanner_throughput)."""
    from bench import scanner_throughput

    args = scanner_throughput.parser().parse_args(["--markers", "5000", "--group-markers", "0"])
    with scanner_throughput.logs_to(sys.stderr):
        result = scanner_throughput.scan(5000, list(range(args.shard_count)), args)
    cpu_ms = result["client_cpu_ms_per_1000_executions"]
    ceiling = scanner_throughput.cpu_ceiling(cpu_ms, args.memory_mb)
    return float(min(result["enqueued_per_second"], ceiling))


def run(args: argparse.Namespace) -> dict[str, Any]:
    rate = measure_scanner_rate() if args.measure_scanner else capacity.SCANNER_RATE_FULL_CORE
    if args.measure_worker:
        args.worker_cpu_ms = webhook_cpu.measure(1000, 50)["at_once"]["cpu_ms_per_webhook"]
    inputs = {k: dict(v) for k, v in INPUTS.items()}
    inputs["worker_cpu_ms_per_webhook"]["value"] = args.worker_cpu_ms
    inputs["scanner_rate_per_invocation"]["value"] = round(rate, 1)
    inputs["worker_batch_seconds"]["value"] = args.batch_seconds
    inputs["lead_seconds"]["value"] = lead_arithmetic(args.burst, packed_prescaled(rate, args, args.burst))
    inputs["pack_webhook_cpu_ms"]["value"] = args.pack_webhook_cpu_ms
    inputs["dynamodb_call_cpu_ms"]["value"] = args.dynamodb_call_cpu_ms
    results = {
        name: asdict(simulate(load, deployment, batch_seconds=args.batch_seconds, seed=args.seed))
        | {"deployment": asdict(deployment), "load": asdict(load)}
        for name, (load, deployment) in scenarios(rate, args).items()
        if not args.only or name in args.only
    }
    met = {name: r["max_seconds"] <= GOAL_SECONDS for name, r in results.items()}
    blocks = {
        name: block(rate, args)
        for name, block in (
            ("one_instant_million", one_instant_million),
            ("steady_10k_per_s", steady_10k_per_s),
        )
        if not args.only or name in args.only
    }
    return {
        "benchmark": "burst",
        "command": "python -m bench.burst " + " ".join(sys.argv[1:]),
        "goal": f"every execution of the minute started within {GOAL_SECONDS:g} s",
        **blocks,
        "inputs": inputs,
        "results": results,
        "goal_met": met,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.burst", description=DESCRIPTION)
    p.add_argument("--burst", type=int, default=1_000_000, help="executions in the burst minute")
    p.add_argument("--steady-seconds", type=int, default=120, help="how long the steady 10,000/s runs")
    p.add_argument(
        "--batch-seconds",
        type=float,
        default=capacity.Assumptions().task_seconds + capacity.Assumptions().worker_overhead_seconds,
        help="a worker batch's time (task + the worker's own calls)",
    )
    p.add_argument(
        "--raised-write-units",
        type=int,
        default=60_000,
        help="the table's write units a second in the quotas-raised spread scenario",
    )
    p.add_argument("--measure-scanner", action="store_true", help="measure the scanner's rate first")
    p.add_argument(
        "--measure-worker", action="store_true", help="measure the worker's CPU a webhook first (~5 s)"
    )
    p.add_argument(
        "--worker-cpu-ms",
        type=float,
        default=capacity.WORKER_CPU_MS_PER_WEBHOOK,
        help="the worker's CPU a webhook, in ms (measured: bench.webhook_cpu)",
    )
    p.add_argument(
        "--lead-seconds",
        type=float,
        default=None,
        help="packs visible this long before every instant (default: the code's lead for each instant)",
    )
    p.add_argument(
        "--pack-webhook-cpu-ms", type=float, default=PACK_WEBHOOK_CPU_MS, help="measured: bench.pack_fire"
    )
    p.add_argument(
        "--dynamodb-call-cpu-ms", type=float, default=DYNAMODB_CALL_CPU_MS, help="measured: bench.pack_fire"
    )
    p.add_argument("--only", nargs="*", help="run only these scenarios")
    p.add_argument("--seed", type=int, default=1)
    return p


def main(argv: list[str] | None = None) -> int:
    from bench.common import emit

    emit(run(parser().parse_args(argv)))
    return 0
