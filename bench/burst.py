"""Benchmark 4: the deployed pipeline under a burst, a discrete-event model. Prints JSON.

Not a measurement of AWS: a simulation of the scanner, SQS, the worker's event source mapping,
Lambda and the table by the scaling rules AWS documents, driven by the scanner's dispatch rate that
`make bench-scanner` measures. Every input is labelled measured, documented (with its page) or
assumed, and printed with the results. Lateness is an execution's start minus its scheduled instant.

Scenarios: a 1,000,000-execution minute onto an idle deployment, every execution due at the same
instant (docs/scaling.md's worst case) and spread evenly over the minute, each with the mapping in
standard mode, in provisioned mode left at its floor, and warmed ahead (punctual.burst: minimum
pollers raised before the minute), at the default quotas and with the quotas raised; and 10,000
executions a second, steady. The goal: every execution of the minute started within 2 s.

    .venv/bin/python -m bench.burst                       # make bench-burst
    .venv/bin/python -m bench.burst --measure-scanner     # measure the scanner's rate first (~1 min)
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Any

from punctual import capacity, sizing

DT = 0.01  # seconds a simulation step
GOAL_SECONDS = 2.0
SCALING_PAGE = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html"
ESM_PAGE = "https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html"
LAMBDA_SCALING_PAGE = "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html"
LAMBDA_QUOTA_PAGE = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
DDB_QUOTA_PAGE = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
DDB_PARTITION_PAGE = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)

# Documented by AWS.
STANDARD_START = 5  # concurrent batches when messages appear (SCALING_PAGE)
STANDARD_PER_MINUTE = 300  # concurrent invokes added a minute (SCALING_PAGE)
PROVISIONED_PER_MINUTE = 1000  # concurrent invokes added a minute in provisioned mode (SCALING_PAGE)
ENVIRONMENTS_PER_10_SECONDS = 1000  # new execution environments per function (LAMBDA_SCALING_PAGE)
PARTITION_READ_UNITS = sizing.PARTITION_READ_UNITS  # a second, per partition (DDB_PARTITION_PAGE)

# Assumed.
COLD_START = (0.25, 0.8)  # seconds, uniform: a Python function with boto3 and Powertools
RECEIVE_SECONDS = 0.02  # a poller's ReceiveMessage returning messages, and the invoke
PRE_START_SECONDS = 0.02  # the worker's reads and its claim of the execution before the task
WORKER_WRITE_UNITS = 3.0  # table write units an execution (docs/scaling.md section 4: bench-cost)
INVOCATION_START_SECONDS = 1.0  # the tick starting the fan-out's invocations (as bench-scanner)
TICK_LEAD_SECONDS = 30.0  # the latest a tick can read a minute's bucket before it falls due (lookahead 90 s)
MARKER_READ_UNITS = 900 / 15_625  # strongly consistent read units a marker (docs/scaling.md section 4)


@dataclass(frozen=True)
class Deployment:
    mode: str  # "standard" or "provisioned"
    max_concurrency: int = 1000  # standard: the mapping's MaximumConcurrency (at most 1,000)
    min_pollers: int = 2  # provisioned: pollers ready when the burst comes (warmed: raised ahead)
    max_pollers: int = 200
    lambda_quota: int = 1000  # the account's concurrent executions (documented default, adjustable)
    table_write_units: int = 40_000  # a second: on-demand table quota (documented default, adjustable)
    warm_environments: int = 0  # execution environments already running (idle: none)
    scaled_to: int = 0  # concurrency the mapping has already scaled to (idle: none; steady: its load)
    scanner_fanout: int = 64
    scanner_rate: float = capacity.SCANNER_RATE_FULL_CORE


@dataclass(frozen=True)
class Load:
    executions: int
    spread_seconds: float  # due instants spread evenly over this long (0: all at one instant)


@dataclass
class Result:
    executions: int
    p50_seconds: float
    p99_seconds: float
    max_seconds: float
    within_goal_share: float
    last_start_seconds: float  # after the first due instant
    scanner_drain_seconds: float
    scanner_on_time: bool
    peak_concurrency: int
    cold_starts: int
    bound_by: list[str]  # the limits executions waited for, in the order first reached


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def simulate(load: Load, d: Deployment, *, batch_seconds: float, seed: int = 1) -> Result:
    """Step the pipeline DT at a time from the first due instant (t = 0) until every execution started."""
    rng = random.Random(seed)
    n = load.executions
    # The scanner: the tick reads the minute TICK_LEAD_SECONDS ahead at the latest; each of its
    # invocations sends its share at the measured rate. A message is visible at its instant (SQS holds
    # it with DelaySeconds), or when sent if the scanner is late.
    per_invocation = math.ceil(n / d.scanner_fanout)
    drain = INVOCATION_START_SECONDS + per_invocation / d.scanner_rate
    # (Bucket partitions: each invocation's reads of its buckets stay far under a partition's limit.)
    assert d.scanner_rate * MARKER_READ_UNITS < PARTITION_READ_UNITS
    step = load.spread_seconds / n if load.spread_seconds else 0.0
    sent_at = -TICK_LEAD_SECONDS
    visible = deque(
        max(i * step, sent_at + INVOCATION_START_SECONDS + (i % per_invocation) / d.scanner_rate)
        for i in range(n)
    )
    dues = deque(i * step for i in range(n))
    lateness: list[float] = []
    busy: list[float] = []  # heap of times at which a busy environment becomes free
    idle = d.warm_environments
    environments = d.warm_environments
    cold = 0
    peak = 0
    started_at: float | None = None  # when the mapping first saw messages
    table_free_at = -1.0  # the table's write capacity is a rate: the time it is used up to
    bounds: dict[str, float] = {}  # each limit reached while executions waited: when first
    t = min(visible[0], 0.0)
    receives_carry = 0.0
    while dues:
        t += DT
        while busy and busy[0] <= t:
            heapq.heappop(busy)
            idle += 1
        # Assumed: a second of unused write capacity may be spent at once (burst capacity).
        table_free_at = max(table_free_at, t - 1.0)
        if visible[0] > t:
            continue
        if started_at is None:
            started_at = t
        ramp = t - started_at
        if d.mode == "standard":
            mapping = min(
                d.max_concurrency, max(d.scaled_to, STANDARD_START + STANDARD_PER_MINUTE * ramp / 60)
            )
            receives = math.inf
        else:
            mapping = min(
                d.max_pollers * 10, max(d.scaled_to, d.min_pollers * 10 + PROVISIONED_PER_MINUTE * ramp / 60)
            )
            pollers = mapping / sizing.POLLER_CONCURRENT_INVOKES
            receives_carry += pollers * sizing.POLLER_RECEIVES_PER_SECOND * DT
            receives = receives_carry
        env_cap = d.warm_environments + ENVIRONMENTS_PER_10_SECONDS * (1 + int(ramp / 10))
        limit = min(mapping, d.lambda_quota, env_cap)
        running = len(busy)
        free = int(limit) - running
        while free > 0 and receives >= 1 and dues and visible[0] <= t:
            size = 0
            first_due = dues[0]
            while size < sizing.SQS_BATCH and visible and visible[0] <= t:
                size += 1
                visible.popleft()
            # Beyond the table's rate its writes are throttled: the batch waits for capacity, holding
            # its environment (the worker's retries back off).
            writes_at = max(t, table_free_at)
            table_free_at = writes_at + size * WORKER_WRITE_UNITS / d.table_write_units
            wait = writes_at - t
            if wait > 0.1:
                bounds.setdefault("table write units", round(t, 2))
            if idle > 0:
                idle -= 1
                init = 0.0
            else:
                environments += 1
                cold += 1
                init = rng.uniform(*COLD_START)
            begin = t + RECEIVE_SECONDS + init + wait + PRE_START_SECONDS
            for _ in range(size):
                due = dues.popleft()
                lateness.append(max(0.0, begin - due))
            heapq.heappush(busy, max(begin, first_due) + batch_seconds)
            free -= 1
            if receives is not math.inf:
                receives_carry -= 1
                receives = receives_carry
        if free <= 0 and dues:
            limits = [
                (mapping, "the mapping's scaling"),
                (d.lambda_quota, "Lambda concurrency quota"),
                (env_cap, "Lambda environment scaling"),
            ]
            bounds.setdefault(min(limits, key=lambda pair: pair[0])[1], round(t, 2))
        elif receives is not math.inf and receives < 1 and dues and visible[0] <= t:
            bounds.setdefault("poller receives (10 a second a poller)", round(t, 2))
        peak = max(peak, len(busy))
    ordered = sorted(lateness)
    within = sum(1 for x in ordered if x <= GOAL_SECONDS) / n
    return Result(
        executions=n,
        p50_seconds=round(percentile(ordered, 0.5), 3),
        p99_seconds=round(percentile(ordered, 0.99), 3),
        max_seconds=round(ordered[-1], 3),
        within_goal_share=round(within, 4),
        last_start_seconds=round(t, 2),
        scanner_drain_seconds=round(drain, 1),
        scanner_on_time=drain <= TICK_LEAD_SECONDS,
        peak_concurrency=peak,
        cold_starts=cold,
        bound_by=sorted(bounds, key=bounds.__getitem__),
    )


def scenarios(rate: float, args: argparse.Namespace) -> dict[str, tuple[Load, Deployment]]:
    burst = args.burst
    instant, spread = Load(burst, 0.0), Load(burst, 60.0)
    standard = Deployment("standard", max_concurrency=1000, scanner_rate=rate)
    floor = Deployment("provisioned", min_pollers=2, max_pollers=2000, scanner_rate=rate)
    warmed = replace(floor, min_pollers=sizing.MIN_POLLERS_RANGE[1])
    # Quotas raised to what the spread minute needs (16,667 executions/s: ~420 concurrent batches,
    # 50,000 write units/s), and the table warmed to them.
    raised = replace(warmed, lambda_quota=3000, table_write_units=args.raised_write_units)
    raised_all = replace(raised, lambda_quota=20_000, table_write_units=1_600_000, max_pollers=2000)
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


INPUTS: dict[str, dict[str, Any]] = {
    "scanner_rate_per_invocation": {
        "label": "measured",
        "source": "make bench-scanner (capacity.SCANNER_RATE_FULL_CORE, or --measure-scanner)",
    },
    "scanner_fanout": {"value": 64, "label": "deployment default", "source": "infra/settings.py"},
    "tick_lead_seconds": {
        "value": TICK_LEAD_SECONDS,
        "label": "derived",
        "source": "lookahead 90 s, tick 60 s: a minute's bucket is read at least 30 s ahead",
    },
    "invocation_start_seconds": {"value": INVOCATION_START_SECONDS, "label": "assumed"},
    "standard_mapping": {
        "value": f"{STANDARD_START} concurrent batches, +{STANDARD_PER_MINUTE} a minute, MaximumConcurrency <= 1,000",
        "label": "documented",
        "source": SCALING_PAGE,
    },
    "provisioned_mapping": {
        "value": f"each poller 10 concurrent invokes, 10 receives/s, 1 MB/s; MinimumPollers 2-200, "
        f"MaximumPollers 2-2,000; +{PROVISIONED_PER_MINUTE} concurrent invokes a minute",
        "label": "documented",
        "source": f"{SCALING_PAGE}, {ESM_PAGE}",
    },
    "warming": {
        "value": "MinimumPollers raised to 200 before the minute (punctual.burst, minutes ahead)",
        "label": "assumed: the update takes effect within the forecast's minutes",
    },
    "lambda_environment_scaling": {
        "value": f"{ENVIRONMENTS_PER_10_SECONDS} new execution environments every 10 s per function",
        "label": "documented",
        "source": LAMBDA_SCALING_PAGE,
    },
    "lambda_concurrency_quota": {
        "value": 1000,
        "label": "documented (default, adjustable)",
        "source": LAMBDA_QUOTA_PAGE,
    },
    "cold_start_seconds": {"value": list(COLD_START), "label": "assumed (uniform)"},
    "receive_and_invoke_seconds": {"value": RECEIVE_SECONDS, "label": "assumed"},
    "worker_pre_start_seconds": {"value": PRE_START_SECONDS, "label": "assumed"},
    "worker_batch_seconds": {
        "label": "assumed",
        "source": "capacity.Assumptions: task 0.2 s + the worker's own calls 0.05 s",
    },
    "worker_write_units_per_execution": {
        "value": WORKER_WRITE_UNITS,
        "label": "measured",
        "source": "bench-cost (docs/scaling.md section 1)",
    },
    "table_write_units_per_second": {
        "value": 40_000,
        "label": "documented (on-demand table quota, default, adjustable); the table assumed warmed to it "
        "(a new on-demand table serves 4,000 at first)",
        "source": DDB_QUOTA_PAGE,
    },
    "partition_limits": {
        "value": "1,000 write / 3,000 read units a second a partition",
        "label": "documented",
        "source": DDB_PARTITION_PAGE,
        "note": "bucket partitions are only read by the scanner (~230 read units/s an invocation); "
        "executions are written under their own job's partition: neither binds",
    },
    "sqs_ordering": {"value": "oldest visible first", "label": "assumed (standard queues order best-effort)"},
}


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
    inputs = {k: dict(v) for k, v in INPUTS.items()}
    inputs["scanner_rate_per_invocation"]["value"] = round(rate, 1)
    inputs["worker_batch_seconds"]["value"] = args.batch_seconds
    results = {
        name: asdict(simulate(load, deployment, batch_seconds=args.batch_seconds, seed=args.seed))
        | {"deployment": asdict(deployment), "load": asdict(load)}
        for name, (load, deployment) in scenarios(rate, args).items()
        if not args.only or name in args.only
    }
    met = {name: r["max_seconds"] <= GOAL_SECONDS for name, r in results.items()}
    return {
        "benchmark": "burst",
        "command": "python -m bench.burst " + " ".join(sys.argv[1:]),
        "goal": f"every execution of the minute started within {GOAL_SECONDS:g} s",
        "inputs": inputs,
        "results": results,
        "goal_met": met,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__.split("\n")[0])
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
    p.add_argument("--only", nargs="*", help="run only these scenarios")
    p.add_argument("--seed", type=int, default=1)
    return p


def main(argv: list[str] | None = None) -> int:
    from bench.common import emit

    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
