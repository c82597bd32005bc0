"""The model: a deployment, a load, and a discrete-event simulation of the scanner, SQS, the
worker's event source mapping, Lambda and the table, by the scaling rules AWS documents.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict, deque
from dataclasses import dataclass

from bench.burst.documented import (
    COLD_START,
    ENVIRONMENTS_PER_10_SECONDS,
    INVOCATION_START_SECONDS,
    MARKER_READ_UNITS,
    MAX_POLLERS,
    MIN_INVOKE_SECONDS,
    PARTITION_READ_UNITS,
    PRE_START_SECONDS,
    PROVISIONED_PER_MINUTE,
    RECEIVE_SECONDS,
    SQS_IN_FLIGHT,
    STANDARD_BATCHES,
    STANDARD_CONCURRENCY,
    STANDARD_PER_MINUTE,
    STANDARD_START,
    TICK_LEAD_SECONDS,
    WORKER_WRITE_UNITS,
)
from punctual.platform import aws_limits as sizing
from punctual_cli import capacity

DT = 0.01  # seconds a simulation step
GOAL_SECONDS = 2.0


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
