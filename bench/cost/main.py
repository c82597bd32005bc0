"""The command: the workloads run, their usage priced, the result printed as JSON."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from bench.common import emit, environment, int_within, logs_to
from bench.cost.levers import ALL_SAVINGS, ALL_SAVINGS_RESERVED, levers
from bench.cost.per_million import TARGET_PER_MILLION, deployed_assumptions, per_million_usd
from bench.cost.workloads import HANDED_OFF_LEAD_SECONDS, SCANNED_LEAD_SECONDS, one_time, recurring
from infra.settings import DeploySettings
from punctual_cli import capacity
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage

# The first line of the package's docstring.
DESCRIPTION = "Benchmark 3: AWS calls and cost per execution, counted from a real run on moto. Prints JSON."
SCENARIOS = ("one_time", "handed_off", "batched", "recurring")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with logs_to(sys.stderr), warnings.catch_warnings():
        # Handlers flush their (sometimes empty) EMF metrics each invocation, as on Lambda.
        warnings.filterwarnings("ignore", "No application metrics to publish")
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    assumptions = deployed_assumptions(args.task_seconds)
    workloads: dict[str, Callable[[], dict[str, Any]]] = {
        "one_time": lambda: one_time(args.one_time, args.minutes, lead_seconds=SCANNED_LEAD_SECONDS),
        "handed_off": lambda: one_time(args.one_time, args.minutes, lead_seconds=HANDED_OFF_LEAD_SECONDS),
        "batched": lambda: one_time(
            args.batch_jobs, args.minutes, lead_seconds=args.batch_lead_seconds, batch_size=args.batch_size
        ),
        "recurring": lambda: recurring(args.cron, args.minutes),
    }
    scenarios = {name: workloads[name]() for name in args.scenarios}
    usages = {name: ExecutionUsage(**s["usage_per_execution"]) for name, s in scenarios.items()}
    # The jobs a batch request carried, as measured (fewer than --batch-size with fewer --batch-jobs)
    batch_size = (
        round(scenarios["batched"]["jobs_per_request"]) if "batched" in scenarios else args.batch_size
    )
    # A batch request runs longer than a single create (assumed: capacity.batch_api_seconds).
    per_scenario = {
        name: replace(assumptions, api_seconds=capacity.batch_api_seconds(batch_size))
        if name == "batched"
        else assumptions
        for name in usages
    }
    costs = {
        name: {
            "rest_api": capacity.per_million(
                capacity.cost_per_execution(u, replace(per_scenario[name], http_api=False))
            ),
            "http_api": capacity.per_million(
                capacity.cost_per_execution(u, replace(per_scenario[name], http_api=True))
            ),
        }
        for name, u in usages.items()
    }
    one_time_usage = usages.get("one_time") or usages.get("handed_off")
    result: dict[str, Any] = {
        "benchmark": "cost",
        "command": "python -m bench.cost " + " ".join(sys.argv[1:]),
        "environment": environment(),
        "workload": {
            "one_time_jobs": args.one_time,
            "batched_jobs": args.batch_jobs,
            "batch_size": args.batch_size,
            "batched_lead_seconds": args.batch_lead_seconds,
            "cron_jobs": args.cron,
            "minutes_measured": args.minutes,
            "task": "http webhook (POST, a header, a JSON body) to a receiver on loopback",
        },
        **per_million_usd(usages, assumptions, batch_size),
        "measured": scenarios,
        "prices": {**asdict(capacity.PRICES), "as_of": "AWS us-east-1 list prices published in 2025"},
        "assumptions": asdict(assumptions),
        "assumed_api_seconds_per_batch_request": capacity.batch_api_seconds(batch_size),
        "cost_per_million_executions": costs,
        "fixed_monthly": {
            k: round(v, 2)
            for k, v in capacity.fixed_monthly(
                fanout=DeploySettings.scanner_fanout, shard_count=DeploySettings.shard_count
            ).items()
        },
        "eventbridge_scheduler_per_million": capacity.eventbridge_scheduler_per_million(assumptions),
    }
    found = []
    if one_time_usage is not None:
        found = levers(one_time_usage, assumptions, usages.get("batched"), batch_size)
        result["levers_one_time_per_million"] = found
    if one_time_usage is not None or "batched" in usages:
        result["target"] = _target(costs, {row["id"]: row["per_million"] for row in found if "id" in row})
    return result


def _target(costs: dict[str, dict[str, dict[str, float]]], levers: dict[str, float]) -> dict[str, Any]:
    """The one-time cost against the target: `met` as deployed (on-demand), one job a request and, if
    measured, a batch a request; then with all the savings (`levers`), provisioned and reserved."""
    single = costs.get("one_time") or costs.get("handed_off")
    rows = {
        # as deployed (an HTTP API), then with the REST API (-c api_type=rest)
        "one_time_per_million": None if single is None else single["http_api"]["total"],
        "one_time_per_million_rest_api": None if single is None else single["rest_api"]["total"],
        "batched_per_million": costs["batched"]["http_api"]["total"] if "batched" in costs else None,
        "batched_per_million_rest_api": costs["batched"]["rest_api"]["total"] if "batched" in costs else None,
    }
    best = min(v for v in rows.values() if v is not None)
    found: dict[str, Any] = {
        "one_time_per_million_at_most": TARGET_PER_MILLION,
        **rows,
        "met": best <= TARGET_PER_MILLION,
        "missed_by": round(max(0.0, best - TARGET_PER_MILLION), 4),
    }
    for key in (ALL_SAVINGS, ALL_SAVINGS_RESERVED):
        if key in levers:
            found[f"{key}_per_million"] = levers[key]
            found[f"met_with_{key}"] = levers[key] <= TARGET_PER_MILLION
    return found


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.cost", description=DESCRIPTION)
    p.add_argument("--one-time", type=int, default=50, help="one-time jobs in each one-time workload")
    p.add_argument("--batch-jobs", type=int, default=100, help="one-time jobs in the batched workload")
    p.add_argument(
        "--batch-size",
        type=lambda text: int_within(text, 2, 100, "--batch-size"),
        default=capacity.BATCH_JOBS,
        help="jobs a POST /jobs/batch request (2-100)",
    )
    p.add_argument(
        "--batch-lead-seconds",
        type=int,
        default=SCANNED_LEAD_SECONDS,
        help=f"batched jobs are due this far ahead (default {SCANNED_LEAD_SECONDS}: through the scanner)",
    )
    p.add_argument("--cron", type=int, default=10, help="every-minute cron jobs")
    p.add_argument("--minutes", type=int, default=5, help="length of each measured stretch")
    p.add_argument(
        "--scenarios",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=list(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default: all)",
    )
    p.add_argument(
        "--task-seconds", type=float, default=Assumptions().task_seconds, help="assumed task duration"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    emit(run(parser().parse_args(argv)))
    return 0
