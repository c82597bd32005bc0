"""Benchmark 4: the deployed pipeline under a burst, a discrete-event model. Prints JSON.

Not a measurement of AWS: a simulation of the scanner, SQS, the worker's event source mapping,
Lambda and the table by the scaling rules AWS documents, driven by the scanner's dispatch rate that
`make bench-scanner` measures. Every input is labelled measured, documented (with its page's title)
or assumed, and printed with the results. Lateness is an execution's start minus its scheduled
instant. Where two of AWS's pages disagree, the model takes the stricter figure and says so.

Two blocks answer the question asked of the AWS path:
- `one_instant_million`: 1,000,000 executions due at one instant onto the default deployment with
  the pre-scaling on (infra/settings.py's defaults, and `-c worker_min_pollers=2 -c
  burst_forecast_minutes=5 -c worker_prescale=true`), with the quotas that deployment can use raised
  (`quota_raises`) and, beside, at the default quotas; the goal is every execution started within 2 s.
- `steady_10k_per_s`: 10,000 executions a second, steady, onto the same deployment.
Then the older scenarios: a 1,000,000-execution minute onto an idle deployment, at one instant and
spread over the minute, with the mapping in standard mode, in provisioned mode at its floor, and
warmed ahead, at the default quotas and with the quotas raised.

    .venv/bin/python -m bench.burst                       # make bench-burst
    .venv/bin/python -m bench.burst --measure-scanner     # measure the scanner's rate first (~1 min)
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, replace
from typing import Any

from bench import webhook_cpu
from infra.settings import DeploySettings
from punctual.platform import aws_limits as sizing
from punctual_cli import capacity

DT = 0.01  # seconds a simulation step
GOAL_SECONDS = 2.0

# AWS's pages, by title (what docs/scaling.md cites), with their addresses.
SQS_SCALING_PAGE = (
    "Configuring scaling behavior for SQS event source mappings (AWS Lambda Developer Guide)",
    "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html",
)
SQS_SCALING_KC_PAGE = (
    "AWS re:Post Knowledge Center, lambda-sqs-scaling; AWS Compute Blog, Introducing faster polling "
    "scale-up for AWS Lambda functions configured with Amazon SQS",
    "https://repost.aws/knowledge-center/lambda-sqs-scaling",
)
SCALING_CONFIG_PAGE = (
    "ScalingConfig (AWS Lambda API Reference)",
    "https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html",
)
POLLER_CONFIG_PAGE = (
    "ProvisionedPollerConfig (AWS Lambda API Reference); AWS::Lambda::EventSourceMapping "
    "ProvisionedPollerConfig (AWS CloudFormation)",
    "https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html, "
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html",
)
PROVISIONED_BLOG_PAGE = (
    "AWS Lambda enhances event processing with provisioned mode for SQS event-source mapping (AWS News Blog)",
    "https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity",
)
LAMBDA_SCALING_PAGE = (
    "Lambda scaling behavior",
    "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html",
)
LAMBDA_QUOTA_PAGE = (
    "Lambda quotas",
    "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
)
SQS_QUOTA_PAGE = (
    "Amazon SQS standard queue quotas",
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html",
)
DDB_QUOTA_PAGE = (
    "Maximum throughput for on-demand tables; Understanding warm throughput (Amazon DynamoDB Developer Guide)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html",
)
DDB_PARTITION_PAGE = (
    "Best practices for designing and using partition keys effectively (Amazon DynamoDB Developer Guide)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html",
)
LAMBDA_PRICING_PAGE = ("AWS Lambda pricing", "https://aws.amazon.com/lambda/pricing/")

# Documented by AWS.
STANDARD_START = 5  # concurrent batches when messages appear (SQS_SCALING_PAGE)
STANDARD_PER_MINUTE = 300  # concurrent invokes added a minute (SQS_SCALING_PAGE)
# Standard mode without MaximumConcurrency: 1,000 batches at once (SQS_SCALING_PAGE) or 1,250
# concurrent invokes (SQS_SCALING_KC_PAGE). What it can start: the stricter 1,000; what it may take of
# the account's concurrency: 1,250.
STANDARD_BATCHES = sizing.ESM_STANDARD_BATCHES
STANDARD_CONCURRENCY = sizing.ESM_STANDARD_CONCURRENCY
PROVISIONED_PER_MINUTE = 1000  # concurrent invokes added a minute in provisioned mode (SQS_SCALING_PAGE)
# MaximumPollers: 2-10,000 for SQS in the API reference (POLLER_CONFIG_PAGE), at most 2,000 in
# CloudFormation and the CDK: the stricter 2,000 (20,000 concurrent invokes, as PROVISIONED_BLOG_PAGE
# says), which is also what the stack can set.
MAX_POLLERS = sizing.MAX_POLLERS_RANGE[1]
# New execution environments a function may add: 1,000 every 10 s, refilled continuously and never
# carried over, so 1,000 at once and then 100 a second (LAMBDA_SCALING_PAGE).
ENVIRONMENTS_PER_10_SECONDS = sizing.LAMBDA_ENVIRONMENTS_PER_10_SECONDS
# An environment serves about 10 requests a second: it takes no new invoke sooner than 0.1 s after
# its last one started (LAMBDA_SCALING_PAGE, LAMBDA_QUOTA_PAGE).
MIN_INVOKE_SECONDS = 1 / sizing.LAMBDA_REQUESTS_PER_ENVIRONMENT
SQS_IN_FLIGHT = sizing.SQS_IN_FLIGHT  # messages received and not deleted, a standard queue (SQS_QUOTA_PAGE)
PARTITION_READ_UNITS = sizing.PARTITION_READ_UNITS  # a second, per partition (DDB_PARTITION_PAGE)

# Assumed.
COLD_START = (0.25, 0.8)  # seconds, uniform: a Python function with boto3 and Powertools
RECEIVE_SECONDS = 0.02  # a poller's ReceiveMessage returning messages, and the invoke
PRE_START_SECONDS = 0.02  # the worker's reads and its claim of the execution before the task
# Table write units an execution in the worker: its claim, its end and the job's outcome (bench-cost;
# the list indexes' entries are written to the indexes, whose throughput is their own).
WORKER_WRITE_UNITS = 3.0
INVOCATION_START_SECONDS = 1.0  # the tick starting the fan-out's invocations (as bench-scanner)
TICK_LEAD_SECONDS = 30.0  # the latest a tick can read a minute's bucket before it falls due (lookahead 90 s)
MARKER_READ_UNITS = 900 / 15_625  # strongly consistent read units a marker (docs/scaling.md section 4)
# The pre-scaling raises MinimumPollers as soon as the forecast sees the minute and lowers it once the
# minute has passed: the extra pollers are paid for about this long a burst.
PRESCALE_MINUTES = 7.0
# The pre-scaling's settings on top of the defaults (infra/settings.py needs all three).
PRESCALE_CONTEXT = "-c worker_min_pollers=2 -c burst_forecast_minutes=5 -c worker_prescale=true"


@dataclass(frozen=True)
class Deployment:
    mode: str  # "standard" or "provisioned"
    # standard: the mapping's MaximumConcurrency (2-1,000), None when not set
    max_concurrency: int | None = None
    min_pollers: int = 2  # provisioned: pollers ready when the burst comes (warmed: raised ahead)
    max_pollers: int = 200
    lambda_quota: int = 1000  # the account's concurrent executions (documented default, adjustable)
    table_write_units: int = 40_000  # a second: on-demand table quota (documented default, adjustable)
    warm_environments: int = 0  # execution environments already running (idle: none)
    scaled_to: int = 0  # concurrency the mapping has already scaled to (idle: none; steady: its load)
    scanner_fanout: int = 64
    scanner_rate: float = capacity.SCANNER_RATE_FULL_CORE

    def __post_init__(self) -> None:
        if self.mode == "standard":
            if (
                self.max_concurrency is not None
                and not 2 <= self.max_concurrency <= sizing.ESM_MAX_CONCURRENCY
            ):
                raise ValueError(
                    f"MaximumConcurrency is 2-{sizing.ESM_MAX_CONCURRENCY:,}, not {self.max_concurrency}"
                )
        elif self.mode == "provisioned":
            low, high = sizing.MIN_POLLERS_RANGE
            if not low <= self.min_pollers <= high or not self.min_pollers <= self.max_pollers <= MAX_POLLERS:
                raise ValueError(
                    f"pollers need {low} <= MinimumPollers <= {high} and MinimumPollers <= MaximumPollers "
                    f"<= {MAX_POLLERS:,}, not {self.min_pollers}, {self.max_pollers}"
                )
        else:
            raise ValueError(f"mode is standard or provisioned, not {self.mode!r}")


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
    environments: int  # execution environments used: the warm ones and those started cold
    cold_starts: int
    peak_in_flight_messages: int
    peak_write_units_per_second: float  # the worker's table writes, in the busiest second
    bound_by: list[str]  # the limits executions waited for, in the order first reached


# ------------------------------------------------------------------------------- the rules


def mapping_ceiling(d: Deployment) -> int:
    """Concurrent invokes the worker's event source mapping can reach (batches of ten at once)."""
    if d.mode == "standard":
        return STANDARD_BATCHES if d.max_concurrency is None else d.max_concurrency
    return d.max_pollers * sizing.POLLER_CONCURRENT_INVOKES


def mapping_claim(d: Deployment) -> int:
    """What the mapping may take of the account's concurrency: for a standard mapping without
    MaximumConcurrency the higher documented ceiling, 1,250."""
    if d.mode == "standard" and d.max_concurrency is None:
        return STANDARD_CONCURRENCY
    return mapping_ceiling(d)


def mapping_concurrency(d: Deployment, ramp: float) -> float:
    """Concurrent invokes the mapping allows `ramp` seconds after it first saw messages."""
    if d.mode == "standard":
        scaled = STANDARD_START + STANDARD_PER_MINUTE * ramp / 60
    else:
        scaled = d.min_pollers * sizing.POLLER_CONCURRENT_INVOKES + PROVISIONED_PER_MINUTE * ramp / 60
    return min(mapping_ceiling(d), max(d.scaled_to, scaled))


def environment_ceiling(warm: int, ramp: float) -> float:
    """Execution environments the worker function may have `ramp` seconds into its scaling: the warm
    ones, 1,000 more at once, then 100 a second."""
    return warm + ENVIRONMENTS_PER_10_SECONDS + ENVIRONMENTS_PER_10_SECONDS / 10 * ramp


def busy_until(started: float, first_due: float, begin: float, batch_seconds: float) -> float:
    """When an environment that took a batch at `started` can take another: after its batch (which
    fires at its first instant, never early), and never under a tenth of a second after the last."""
    return max(started + MIN_INVOKE_SECONDS, max(begin, first_due) + batch_seconds)


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
    busy: list[tuple[float, int]] = []  # heap: when a busy environment is free, and its batch's size
    in_flight = 0  # messages received and not yet deleted
    peak_in_flight = 0
    idle = d.warm_environments
    environments = d.warm_environments
    cold = 0
    peak = 0
    started_at: float | None = None  # when the mapping first saw messages
    table_free_at = -1.0  # the table's write capacity is a rate: the time it is used up to
    writes: dict[int, float] = defaultdict(float)  # table write units, by the second they fall in
    bounds: dict[str, float] = {}  # each limit reached while executions waited: when first
    t = min(visible[0], 0.0)
    receives_carry = 0.0
    while dues:
        t += DT
        while busy and busy[0][0] <= t:
            _, size = heapq.heappop(busy)
            in_flight -= size  # the mapping deletes a batch's messages once it has run
            idle += 1
        # Assumed: a second of unused write capacity may be spent at once (burst capacity).
        table_free_at = max(table_free_at, t - 1.0)
        if visible[0] > t:
            continue
        if started_at is None:
            started_at = t
        ramp = t - started_at
        mapping = mapping_concurrency(d, ramp)
        receives: float = math.inf
        if d.mode == "provisioned":
            pollers = mapping / sizing.POLLER_CONCURRENT_INVOKES
            receives_carry += pollers * sizing.POLLER_RECEIVES_PER_SECOND * DT
            receives = receives_carry
        env_cap = environment_ceiling(d.warm_environments, ramp)
        limit = min(mapping, d.lambda_quota, env_cap)
        free = int(limit) - len(busy)
        while (
            free > 0
            and receives >= 1
            and dues
            and visible[0] <= t
            and in_flight + sizing.SQS_BATCH <= SQS_IN_FLIGHT
        ):
            size = 0
            first_due = dues[0]
            while size < sizing.SQS_BATCH and visible and visible[0] <= t:
                size += 1
                visible.popleft()
            in_flight += size
            # Beyond the table's rate its writes are throttled: the batch waits for capacity, holding
            # its environment (the worker's retries back off).
            writes_at = max(t, table_free_at)
            table_free_at = writes_at + size * WORKER_WRITE_UNITS / d.table_write_units
            writes[math.floor(writes_at)] += size * WORKER_WRITE_UNITS
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
            heapq.heappush(busy, (busy_until(t, first_due, begin, batch_seconds), size))
            free -= 1
            if d.mode == "provisioned":
                receives_carry -= 1
                receives = receives_carry
        peak_in_flight = max(peak_in_flight, in_flight)
        if dues and visible[0] <= t:
            if in_flight + sizing.SQS_BATCH > SQS_IN_FLIGHT:
                bounds.setdefault("SQS messages in flight (~120,000 a standard queue)", round(t, 2))
            elif free <= 0:
                limits = [
                    (mapping, "the mapping's scaling or ceiling"),
                    (d.lambda_quota, "Lambda concurrency quota"),
                    (env_cap, "Lambda environment scaling"),
                ]
                bounds.setdefault(min(limits, key=lambda pair: pair[0])[1], round(t, 2))
            elif receives < 1:
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
        environments=environments,
        cold_starts=cold,
        peak_in_flight_messages=peak_in_flight,
        peak_write_units_per_second=round(max(writes.values(), default=0.0), 1),
        bound_by=sorted(bounds, key=bounds.__getitem__),
    )


# ------------------------------------------------------------------ the default deployment


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


def _documented(value: Any, *pages: tuple[str, str], note: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {
        "value": value,
        "label": "documented",
        "pages": [title for title, _ in pages],
        "source": ", ".join(url for _, url in pages),
    }
    if note:
        found["note"] = note
    return found


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
    "standard_mapping": _documented(
        f"{STANDARD_START} concurrent batches, +{STANDARD_PER_MINUTE} a minute",
        SQS_SCALING_PAGE,
    ),
    "standard_mapping_ceiling": _documented(
        f"without MaximumConcurrency: {STANDARD_BATCHES:,} batches at once (Developer Guide) or "
        f"{STANDARD_CONCURRENCY:,} concurrent invokes (Knowledge Center, Compute Blog)",
        SQS_SCALING_PAGE,
        SQS_SCALING_KC_PAGE,
        note=f"the pages disagree: lateness is modelled with the stricter {STANDARD_BATCHES:,}, the "
        f"account's concurrency with {STANDARD_CONCURRENCY:,}",
    ),
    "maximum_concurrency_setting": _documented("MaximumConcurrency 2-1,000", SCALING_CONFIG_PAGE),
    "provisioned_mapping": _documented(
        f"each poller 10 concurrent invokes, 10 receives/s, 1 MB/s; MinimumPollers 2-200; "
        f"+{PROVISIONED_PER_MINUTE} concurrent invokes a minute",
        SQS_SCALING_PAGE,
        PROVISIONED_BLOG_PAGE,
    ),
    "maximum_pollers_ceiling": _documented(
        f"{MAX_POLLERS:,}",
        POLLER_CONFIG_PAGE,
        PROVISIONED_BLOG_PAGE,
        note="the pages disagree: the API reference accepts 2-10,000 for SQS, CloudFormation and the CDK "
        "at most 2,000; the stricter 2,000 (20,000 concurrent invokes, as the News Blog says)",
    ),
    "warming": {
        "value": "MinimumPollers raised to 200 before the minute (punctual.scheduling.prescaling, minutes ahead)",
        "label": "assumed: the update takes effect within the forecast's minutes",
    },
    "lambda_environment_scaling": _documented(
        f"{ENVIRONMENTS_PER_10_SECONDS:,} new execution environments every 10 s per function, "
        "refilled continuously (1,000 at once, then 100 a second), unused rate not carried over",
        LAMBDA_SCALING_PAGE,
    ),
    "requests_per_environment": _documented(
        f"about {sizing.LAMBDA_REQUESTS_PER_ENVIRONMENT} a second: an environment takes no new invoke "
        f"within {MIN_INVOKE_SECONDS:g} s of its last",
        LAMBDA_SCALING_PAGE,
        LAMBDA_QUOTA_PAGE,
    ),
    "lambda_concurrency_quota": _documented(
        "1,000 (default, adjustable to tens of thousands); new accounts start lower",
        LAMBDA_QUOTA_PAGE,
    ),
    "sqs_in_flight": _documented(
        f"about {SQS_IN_FLIGHT:,} messages received and not deleted, a standard queue",
        SQS_QUOTA_PAGE,
        note="one execution a message: at most 12,000 batches of ten at once on one queue",
    ),
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
        "source": "bench-cost: the worker's table writes (claim, end, the job's outcome); the list "
        "indexes' entries go to the indexes' own throughput",
    },
    "table_write_units_per_second": _documented(
        40_000,
        DDB_QUOTA_PAGE,
        note="on-demand table quota (default, adjustable); the table assumed warmed to it (a new "
        "on-demand table serves 4,000 at first)",
    ),
    "partition_limits": {
        **_documented("1,000 write / 3,000 read units a second a partition", DDB_PARTITION_PAGE),
        "note": "bucket partitions are only read by the scanner (~230 read units/s an invocation); "
        "executions are written under their own job's partition: neither binds",
    },
    "burst_cost": {
        "label": "measured and documented",
        "source": "each execution at bench-cost's measured usage (capacity.figures.ONE_TIME, creation "
        f"included) and list prices; pollers at the EPU-hour price ({LAMBDA_PRICING_PAGE[0]}) for "
        f"{PRESCALE_MINUTES:g} minutes (assumed); cold starts' initialisation billed",
    },
    "sqs_ordering": {"value": "oldest visible first", "label": "assumed (standard queues order best-effort)"},
    "worker_cpu_ms_per_webhook": {
        "label": "measured",
        "source": "python -m bench.webhook_cpu (capacity.WORKER_CPU_MS_PER_WEBHOOK, "
        "or --measure-worker); plain HTTP on loopback, no TLS",
    },
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
    if args.measure_worker:
        args.worker_cpu_ms = webhook_cpu.measure(1000, 50)["at_once"]["cpu_ms_per_webhook"]
    inputs = {k: dict(v) for k, v in INPUTS.items()}
    inputs["worker_cpu_ms_per_webhook"]["value"] = args.worker_cpu_ms
    inputs["scanner_rate_per_invocation"]["value"] = round(rate, 1)
    inputs["worker_batch_seconds"]["value"] = args.batch_seconds
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
    p.add_argument(
        "--measure-worker", action="store_true", help="measure the worker's CPU a webhook first (~5 s)"
    )
    p.add_argument(
        "--worker-cpu-ms",
        type=float,
        default=capacity.WORKER_CPU_MS_PER_WEBHOOK,
        help="the worker's CPU a webhook, in ms (measured: bench.webhook_cpu)",
    )
    p.add_argument("--only", nargs="*", help="run only these scenarios")
    p.add_argument("--seed", type=int, default=1)
    return p


def main(argv: list[str] | None = None) -> int:
    from bench.common import emit

    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
