"""The deployments and loads the benchmark runs: the default deployment pre-scaled, the quota
raises it needs, what a burst costs, and the scenarios of a million executions in a minute.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, replace
from typing import Any

from bench.burst.documented import (
    BATCH_READ_CPU_MS,
    COLD_START,
    DDB_QUOTA_PAGE,
    JOB_READ_UNITS,
    LAMBDA_QUOTA_PAGE,
    MAX_POLLERS,
    PACK_DECODE_MS_PER_ENTRY,
    PRESCALE_CONTEXT,
    PRESCALE_MINUTES,
    SQS_IN_FLIGHT,
    SQS_QUOTA_PAGE,
    TABLE_READ_UNITS,
)
from bench.burst.model import GOAL_SECONDS, Deployment, Load, Result, mapping_claim
from bench.burst.packed import Costs, PackedDeployment, PackedResult, pack_sizes, simulate_packs
from infra.settings import DeploySettings
from punctual.execution.hooks import PERSIST_SECONDS
from punctual.platform import aws_limits as sizing
from punctual.scheduling.prescaling import (
    LeadPolicy,
    PollerPolicy,
    desired_min_pollers,
    take_seconds,
)
from punctual_cli import capacity

# The default deployment with the pre-scaling on (PRESCALE_CONTEXT), and its functions' settings.
PRESCALED = DeploySettings(worker_min_pollers=2, burst_forecast_minutes=5, worker_prescale=True)


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


def packed_costs(args: argparse.Namespace) -> Costs:
    return Costs(
        webhook_ms=args.pack_webhook_cpu_ms,
        dynamodb_call_ms=args.dynamodb_call_cpu_ms,
        batch_read_ms=BATCH_READ_CPU_MS,
        decode_ms_per_entry=PACK_DECODE_MS_PER_ENTRY,
        task_seconds=capacity.Assumptions().task_seconds,
    )


def prescaled_pollers(executions_in_minute: int) -> int:
    """The MinimumPollers the default deployment's pre-scaling sets ahead of such a minute
    (punctual.scheduling.prescaling.desired_min_pollers, as the scanner's tick runs it)."""
    functions = PRESCALED.function_settings()
    policy = PollerPolicy(
        floor=functions.burst_pollers_floor,
        ceiling=functions.burst_pollers_ceiling,
        pack_size=functions.pack_size,
        shards=functions.shard_count,
    )
    return desired_min_pollers([executions_in_minute], functions.burst_pollers_floor, policy)


def packed_prescaled(rate: float, args: argparse.Namespace, executions_in_minute: int) -> PackedDeployment:
    """The default deployment (infra/settings.py) with the pre-scaling on, on the packed path: pollers
    raised ahead by the code's pre-scaling for the minute, within worker_max_pollers; each instant's
    lead the code's (LeadPolicy.from_settings on the deployed settings), unless --lead-seconds fixes
    one; the account's quotas at their defaults, the worker at its memory, packs of Settings.pack_size."""
    s = PRESCALED
    functions = s.function_settings()
    return PackedDeployment(
        lead=LeadPolicy.from_settings(functions),
        lead_seconds=args.lead_seconds,
        memory_mb=capacity.Assumptions().worker_memory_mb,
        pack_size=functions.pack_size,
        min_pollers=prescaled_pollers(executions_in_minute),
        max_pollers=s.worker_max_pollers,
        lambda_quota=s.lambda_concurrency_quota,
        table_write_units=sizing.TABLE_QUOTA_UNITS,
        shards=s.shard_count,
        scanner_fanout=s.scanner_fanout,
        scanner_rate=rate,
    )


def lead_arithmetic(executions: int, d: PackedDeployment) -> dict[str, Any]:
    """The lead the code chooses for an instant of `executions` on `d`, with its terms."""
    packs = sum(len(shard) for shard in pack_sizes(executions, d.shards, d.pack_size))
    return {
        "lead_s": d.ahead(executions),
        "packs": packs,
        "take_s": round(take_seconds(packs, d.lead), 2),
        "start_s": d.lead.start_seconds,
        "bound_s": d.lead.bound_seconds,
        "rule": "0 for at most a pack a shard; else ceil(take + start), at most the bound "
        "(punctual.scheduling.prescaling.lead_seconds)",
    }


def _figures(found: PackedResult) -> dict[str, Any]:
    return {"p50_s": found.p50_seconds, "p99_s": found.p99_seconds, "max_s": found.max_seconds}


def packed_quota_raises(
    d: PackedDeployment, instants: list[tuple[float, int]], c: Costs, seed: int
) -> list[dict[str, Any]]:
    """The quotas `d` must have raised to run as fast as its own settings let it: Lambda's concurrency
    to the peak with none binding (and the scanner's invocations); the table's write units to the
    least of a ladder that starts the executions as early as with no limit and stores the last end
    within the worker's persist budget (past it, a throttled end gives its message back and the run
    is made again); the table's read units to the job reads of the scanner's drain and of the packs
    taken in the lead."""
    free = replace(d, lambda_quota=10**6, table_write_units=10**9)
    unbounded = simulate_packs(instants, free, c, seed=seed)
    found: list[dict[str, Any]] = []
    lambda_need = _round_up(unbounded.peak_concurrency + d.scanner_fanout, 100)
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
    for units in (40_000, 80_000, 120_000, 160_000, 240_000, 320_000, 480_000, 640_000):
        trial = simulate_packs(instants, replace(free, table_write_units=units), c, seed=seed)
        if (
            trial.max_seconds <= unbounded.max_seconds + 0.05
            and trial.last_end_written_seconds <= PERSIST_SECONDS
        ):
            break
    if units > d.table_write_units:
        found.append(
            {
                "quota": "DynamoDB table write throughput (on-demand, per table)",
                "default": d.table_write_units,
                "raise_to": units,
                "page": DDB_QUOTA_PAGE[0],
                "note": "and warm throughput set to it: a new table serves 4,000 writes a second at first; "
                "the leases taken ahead of the instant and the ends stored after it (within the worker's "
                f"{PERSIST_SECONDS:g} s persist budget, execution.hooks.PERSIST_SECONDS) need it",
            }
        )
    executions = sum(count for _, count in instants)
    take = take_seconds(sum(len(s) for s in pack_sizes(executions, d.shards, d.pack_size)), d.lead)
    scanner_drain = executions / (d.scanner_fanout * d.scanner_rate)
    reads = executions * JOB_READ_UNITS / min(max(take, 1.0), scanner_drain)
    read_need = _round_up(reads, 10_000)
    if read_need > TABLE_READ_UNITS:
        found.append(
            {
                "quota": "DynamoDB table read throughput (on-demand, per table)",
                "default": TABLE_READ_UNITS,
                "raise_to": read_need,
                "page": DDB_QUOTA_PAGE[0],
                "note": f"each job read once by the scanner ({scanner_drain:.1f} s drain) and once by its "
                f"pack ({take:.1f} s of takes), eventually consistent ({JOB_READ_UNITS} unit); and warm "
                "throughput set to it: a new table serves 12,000 reads a second at first. Below it the "
                "scanner's drain stretches (throttled reads retried), within the minute it reads ahead",
            }
        )
    return found


def _raised(d: PackedDeployment, raises: list[dict[str, Any]]) -> PackedDeployment:
    for r in raises:
        if r["quota"].startswith("Lambda"):
            d = replace(d, lambda_quota=r["raise_to"])
        elif r["quota"].startswith("DynamoDB table write"):
            d = replace(d, table_write_units=r["raise_to"])
    return d


def one_instant_million(rate: float, args: argparse.Namespace) -> dict[str, Any]:
    """A million executions due at one instant onto the default deployment with the pre-scaling on,
    on the packed path (bench.burst.packed), its quotas raised; then what else moves the figure."""
    instants = [(0.0, args.burst)]
    c = packed_costs(args)
    base = packed_prescaled(rate, args, args.burst)
    raises = packed_quota_raises(base, instants, c, args.seed)
    raised = _raised(base, raises)
    found = simulate_packs(instants, raised, c, seed=args.seed)
    at_defaults = simulate_packs(instants, base, c, seed=args.seed)
    cost = burst_cost_packed(raised, found)
    lead = lead_arithmetic(args.burst, raised)
    levers = {
        "messages visible at the instant (lead 0, as before the lead)": replace(raised, lead_seconds=0),
        "MinimumPollers left at the floor (pre-scaling off)": replace(raised, min_pollers=2),
        f"the worker at {sizing.LAMBDA_MB_PER_VCPU} MB (one vCPU)": replace(
            raised, memory_mb=sizing.LAMBDA_MB_PER_VCPU
        ),
    }
    return {
        "p50_s": found.p50_seconds,
        "p99_s": found.p99_seconds,
        "max_s": found.max_seconds,
        "environments": found.environments,
        "burst_cost_usd": round(sum(cost.values()), 2),
        "quota_raises": raises,
        "goal_max_s": GOAL_SECONDS,
        "met": found.max_seconds <= GOAL_SECONDS,
        "packs": found.packs,
        "lead": lead,
        "bound_by": found.bound_by,
        "last_pack_received_s": found.last_received_seconds,
        "peak_write_units_per_second": found.peak_write_units_per_second,
        "last_end_written_s": found.last_end_written_seconds,
        "burst_cost_parts_usd": cost,
        "depends_on": [
            f"messages made visible {lead['lead_s']:g} s before the instant: the code's lead for "
            f"{args.burst:,} executions at one instant (scheduling.prescaling.lead_seconds)",
            "the worker mapping's BatchSize 1 (a pack an invoke)",
            f"MinimumPollers raised to {raised.min_pollers} by the pre-scaling before the packs become "
            f"visible (minutes ahead; assumed to take effect in time), MaximumPollers {raised.max_pollers}",
            f"the worker's CPU at {raised.memory_mb} MB: {raised.share:.3f} of a vCPU, the measured "
            "per-member CPU (pack_webhook_cpu_ms, dynamodb_call_cpu_ms) spent one at a time",
            f"{raised.fire_threads} threads a pack of {raised.pack_size}, one lease a pack taken ahead, "
            "each member's end written once every start is made",
            f"the ends are written at the table's {raised.table_write_units:,} units a second after the "
            f"starts: they delay no start, and the last is stored {found.last_end_written_seconds:g} s "
            "after the instant",
        ],
        "levers": {
            name: _figures(simulate_packs(instants, d, c, seed=args.seed)) for name, d in levers.items()
        },
        "at_default_quotas": {
            **_figures(at_defaults),
            "bound_by": at_defaults.bound_by,
            "last_end_written_s": at_defaults.last_end_written_seconds,
            # (past the budget a throttled end gives its message back: that run is made again)
            "ends_within_persist_budget": at_defaults.last_end_written_seconds <= PERSIST_SECONDS,
        },
        "deployment": {
            "context": f"defaults (infra/settings.py) {PRESCALE_CONTEXT}",
            **asdict(raised),
        },
    }


def burst_cost_packed(d: PackedDeployment, result: PackedResult) -> dict[str, float]:
    """USD for the burst: its executions at the measured cost of one (creation included, as deployed),
    the pollers raised ahead, and the packs' invocations (their hold billed) beyond one execution's."""
    assumptions = capacity.Assumptions(execution_events=DeploySettings.execution_events)
    each = sum(capacity.cost_per_execution(capacity.ONE_TIME, assumptions).values())
    floor = sizing.MIN_POLLERS_RANGE[0]
    gb = d.memory_mb / 1024
    parts = {
        "executions": result.executions * each,
        "pollers_raised_ahead": max(0, d.min_pollers - floor)
        * PRESCALE_MINUTES
        / 60
        * capacity.PRICES.sqs_poller_epu_hour,
        "pack_invocations_billed": result.packs
        * result.invocation_seconds
        * gb
        * capacity.PRICES.lambda_arm64_gb_second,
        "cold_start_initialisation": result.cold_starts
        * sum(COLD_START)
        / 2
        * gb
        * capacity.PRICES.lambda_arm64_gb_second,
    }
    return {k: round(v, 2) for k, v in parts.items()}


def steady_10k_per_s(rate: float, args: argparse.Namespace) -> dict[str, Any]:
    """10,000 executions a second, steady, onto the same deployment (quotas raised as for the burst),
    its environments warm: each second's executions due at that second (as the API's times and cron's
    are), so they pack by instant and shard, and each instant gets the code's lead (none: quiet)."""
    steady_rate = 10_000
    instants = [(float(second), steady_rate) for second in range(args.steady_seconds)]
    c = packed_costs(args)
    base = replace(packed_prescaled(rate, args, steady_rate * 60), warm_environments=2000)
    raises = packed_quota_raises(base, instants[:5], c, args.seed)
    found = simulate_packs(instants, _raised(base, raises), c, seed=args.seed)
    return {
        "p50_s": found.p50_seconds,
        "p99_s": found.p99_seconds,
        "max_s": found.max_seconds,
        "bound_by": found.bound_by,
        "peak_concurrency": found.peak_concurrency,
        "peak_write_units_per_second": found.peak_write_units_per_second,
        "depends_on": [
            "executions due at whole seconds (a pack per shard a second, ~156 executions)",
            f"messages visible {base.ahead(steady_rate):g} s before their instant (the code's lead: an "
            f"instant of at most a pack a shard is quiet); MinimumPollers {base.min_pollers} by the "
            "pre-scaling; environments warm",
        ],
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
