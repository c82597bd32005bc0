"""The deployments and loads the benchmark runs: the default deployment pre-scaled, the quota
raises it needs, what a burst costs, and the scenarios of a million executions in a minute.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, replace
from typing import Any

from bench import webhook_cpu
from bench.burst.documented import (
    COLD_START,
    DDB_QUOTA_PAGE,
    LAMBDA_QUOTA_PAGE,
    MAX_POLLERS,
    PRESCALE_CONTEXT,
    PRESCALE_MINUTES,
    SQS_IN_FLIGHT,
    SQS_QUOTA_PAGE,
)
from bench.burst.model import GOAL_SECONDS, Deployment, Load, Result, mapping_claim, simulate
from infra.settings import DeploySettings
from punctual.platform import aws_limits as sizing
from punctual_cli import capacity


def default_prescaled(rate: float) -> Deployment:
    """The default deployment (infra/settings.py) with the pre-scaling on: the mapping in provisioned
    mode, its MinimumPollers raised to worker_prescale_max_pollers ahead of the minute, within
    worker_max_pollers; the account's quotas at their defaults."""
    s = DeploySettings
    return Deployment(
        "provisioned",
        min_pollers=s.worker_prescale_max_pollers,
        max_pollers=s.worker_max_pollers,
        lambda_quota=s.lambda_concurrency_quota,
        table_write_units=sizing.TABLE_QUOTA_UNITS,
        scanner_fanout=s.scanner_fanout,
        scanner_rate=rate,
    )


def _round_up(value: float, unit: int) -> int:
    return int(math.ceil(value / unit) * unit)


def quota_raises(d: Deployment, unbounded: Result) -> list[dict[str, Any]]:
    """The quotas `d` must have raised to run as fast as its own settings let it, found from a run
    (`unbounded`) with no quota binding: each with its default, the value and its page."""
    found: list[dict[str, Any]] = []
    # Its mapping's whole claim, and the scanner's invocations, which a tick runs every minute.
    lambda_need = _round_up(max(mapping_claim(d), unbounded.peak_concurrency) + d.scanner_fanout, 100)
    if lambda_need > d.lambda_quota:
        found.append(
            {
                "quota": "Lambda concurrent executions (account, region)",
                "default": d.lambda_quota,
                "raise_to": lambda_need,
                "page": LAMBDA_QUOTA_PAGE[0],
                "note": "a new account starts lower than the default; AWS raises it with use",
            }
        )
    write_need = _round_up(unbounded.peak_write_units_per_second, 1000)
    if write_need > d.table_write_units:
        found.append(
            {
                "quota": "DynamoDB table write throughput (on-demand, per table)",
                "default": d.table_write_units,
                "raise_to": write_need,
                "page": DDB_QUOTA_PAGE[0],
                "note": "and warm throughput set to it: a new table serves 4,000 writes a second at first",
            }
        )
    if unbounded.peak_in_flight_messages > SQS_IN_FLIGHT:
        found.append(
            {
                "quota": "SQS messages in flight (standard queue)",
                "default": SQS_IN_FLIGHT,
                "raise_to": _round_up(unbounded.peak_in_flight_messages, 10_000),
                "page": SQS_QUOTA_PAGE[0],
                "note": "by a support request",
            }
        )
    return found


def burst_cost(d: Deployment, result: Result, memory_mb: int) -> dict[str, float]:
    """USD for the burst: its executions at the measured cost of one (creation included, as
    deployed), the pollers raised ahead, and the cold starts' initialisation (billed)."""
    assumptions = capacity.Assumptions(execution_events=DeploySettings.execution_events)
    each = sum(capacity.cost_per_execution(capacity.ONE_TIME, assumptions).values())
    floor = sizing.MIN_POLLERS_RANGE[0]
    parts = {
        "executions": result.executions * each,
        "pollers_raised_ahead": max(0, d.min_pollers - floor)
        * PRESCALE_MINUTES
        / 60
        * capacity.PRICES.sqs_poller_epu_hour,
        "cold_start_initialisation": result.cold_starts
        * sum(COLD_START)
        / 2
        * memory_mb
        / 1024
        * capacity.PRICES.lambda_arm64_gb_second,
    }
    return {k: round(v, 2) for k, v in parts.items()}


def one_instant_million(rate: float, args: argparse.Namespace) -> dict[str, Any]:
    """A million executions due at one instant onto the default deployment with the pre-scaling on."""
    load = Load(args.burst, 0.0)
    base = default_prescaled(rate)
    at_defaults = simulate(load, base, batch_seconds=args.batch_seconds, seed=args.seed)
    unbounded = simulate(
        load,
        replace(base, lambda_quota=10**9, table_write_units=10**9),
        batch_seconds=args.batch_seconds,
        seed=args.seed,
    )
    raises = quota_raises(base, unbounded)
    raised = base
    for r in raises:
        if r["quota"].startswith("Lambda"):
            raised = replace(raised, lambda_quota=r["raise_to"])
        elif r["quota"].startswith("DynamoDB"):
            raised = replace(raised, table_write_units=r["raise_to"])
    found = simulate(load, raised, batch_seconds=args.batch_seconds, seed=args.seed)
    memory = capacity.Assumptions().worker_memory_mb
    cost = burst_cost(raised, found, memory)
    return {
        "p50_s": found.p50_seconds,
        "p99_s": found.p99_seconds,
        "max_s": found.max_seconds,
        "environments": found.environments,
        "burst_cost_usd": round(sum(cost.values()), 2),
        "quota_raises": raises,
        "goal_max_s": GOAL_SECONDS,
        "met": found.max_seconds <= GOAL_SECONDS,
        "bound_by": found.bound_by,
        "burst_cost_parts_usd": cost,
        # What the worker's CPU alone would allow, were executions started many an invocation (not
        # today's ten an invocation): the measured CPU a webhook at the worker's share of a vCPU.
        "worker_cpu_bound": {
            "cpu_ms_per_webhook": args.worker_cpu_ms,
            "memory_mb": memory,
            **webhook_cpu.project(args.worker_cpu_ms, memory),
        },
        "at_default_quotas": {
            "p50_s": at_defaults.p50_seconds,
            "p99_s": at_defaults.p99_seconds,
            "max_s": at_defaults.max_seconds,
            "bound_by": at_defaults.bound_by,
        },
        "deployment": {
            "context": f"defaults (infra/settings.py) {PRESCALE_CONTEXT}",
            **asdict(raised),
        },
    }


def steady_10k_per_s(rate: float, args: argparse.Namespace) -> dict[str, Any]:
    """10,000 executions a second, steady, onto the same deployment at the default quotas: the mapping
    scaled to its load and its environments warm."""
    steady_rate = 10_000
    load = Load(steady_rate * args.steady_seconds, float(args.steady_seconds))
    concurrency = math.ceil(steady_rate / sizing.SQS_BATCH * args.batch_seconds * 1.5)
    # scaled to the pollers its receives need: 1,000 batches a second, 10 a poller, x 1.5
    deployment = replace(default_prescaled(rate), warm_environments=concurrency, scaled_to=1500)
    found = simulate(load, deployment, batch_seconds=args.batch_seconds, seed=args.seed)
    return {
        "p50_s": found.p50_seconds,
        "p99_s": found.p99_seconds,
        "max_s": found.max_seconds,
        "bound_by": found.bound_by,
        "peak_write_units_per_second": found.peak_write_units_per_second,
    }


def scenarios(rate: float, args: argparse.Namespace) -> dict[str, tuple[Load, Deployment]]:
    burst = args.burst
    instant, spread = Load(burst, 0.0), Load(burst, 60.0)
    standard = Deployment("standard", scanner_rate=rate)  # MaximumConcurrency not set
    floor = Deployment("provisioned", min_pollers=2, max_pollers=MAX_POLLERS, scanner_rate=rate)
    warmed = replace(floor, min_pollers=sizing.MIN_POLLERS_RANGE[1])
    # Quotas raised to what the spread minute needs (16,667 executions/s: ~420 concurrent batches,
    # 50,000 write units/s), and the table warmed to them.
    raised = replace(warmed, lambda_quota=3000, table_write_units=args.raised_write_units)
    raised_all = replace(raised, lambda_quota=20_000, table_write_units=1_600_000)
    steady_rate = 10_000
    steady_concurrency = math.ceil(steady_rate / sizing.SQS_BATCH * args.batch_seconds * 1.5)
    steady = Load(steady_rate * args.steady_seconds, float(args.steady_seconds))
    return {
        "burst_instant_idle_standard": (instant, standard),
        "burst_instant_idle_provisioned_floor": (instant, floor),
        "burst_instant_warmed": (instant, warmed),
        "burst_instant_warmed_quotas_raised": (instant, raised_all),
        "burst_spread_idle_standard": (spread, standard),
        "burst_spread_idle_provisioned_floor": (spread, floor),
        "burst_spread_warmed": (spread, warmed),
        "burst_spread_warmed_quotas_raised": (spread, raised),
        "steady_10000_per_second_standard": (
            steady,
            replace(standard, warm_environments=steady_concurrency, scaled_to=steady_concurrency),
        ),
        "steady_10000_per_second_provisioned": (
            steady,
            # scaled to the pollers its receives need: 1,000 batches a second, 10 a poller, x 1.5
            replace(floor, warm_environments=steady_concurrency, scaled_to=1500),
        ),
    }
