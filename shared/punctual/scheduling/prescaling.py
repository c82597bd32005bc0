"""Ahead of a burst: count what falls due in the coming minutes, say whether the deployment can start
it on time, and warm the worker event source mapping's pollers before a large minute.

The due buckets say how many executions fall due in each minute, minutes before the scanner
dispatches them. An SQS event source mapping in standard mode scales its pollers by 300 concurrent
invokes a minute, from 5; in provisioned mode the pollers kept ready (MinimumPollers) start at once
and the rest come at up to 1,000 concurrent invokes a minute. So the minimum is raised a few minutes
before a large minute and lowered once it has passed, and the rest of the time only the floor is
paid for (docs/scaling.md, section 4; `python -m bench.burst`).

`desired_min_pollers` and `load_percent` are arithmetic; `BurstPlanner` makes the AWS calls: a COUNT
query per shard and minute, GetEventSourceMapping and UpdateEventSourceMapping on the one mapping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.platform import aws_limits as sizing
from punctual.platform.clock import Clock
from punctual.platform.concurrency import parallel_map
from punctual.platform.observability import (
    BURST_LOAD_PERCENT,
    COMING_MINUTE_EXECUTIONS,
    WORKER_MINIMUM_POLLERS,
    logger,
    metrics,
)
from punctual.store.keys import bucket_minute
from punctual.store.markers import count_bucket

MINUTE = timedelta(minutes=1)

# Documented by AWS (sizing.py says where): each poller's limits, and MinimumPollers' range.
POLLER_CONCURRENT_INVOKES = sizing.POLLER_CONCURRENT_INVOKES
POLLER_RECEIVES_PER_SECOND = sizing.POLLER_RECEIVES_PER_SECOND
POLLER_BYTES_PER_SECOND = sizing.POLLER_BYTES_PER_SECOND
MIN_POLLERS_RANGE = sizing.MIN_POLLERS_RANGE
# Assumed: a work message (an execution's id, job id and instant) with SQS's attributes.
MESSAGE_BYTES = 1024


@dataclass(frozen=True)
class PollerPolicy:
    """How many pollers a minute's load needs, and between which bounds the minimum may move.

    `batch_seconds` is a worker batch's time (task + the worker's own calls, as punctual.platform.aws_limits has them);
    `headroom` multiplies the need, for a minute whose executions are not spread evenly across it;
    a lower need lowers the minimum only when it is at least `hysteresis` below it, or at the floor,
    so that a load that wavers does not update the mapping every minute.
    """

    floor: int
    ceiling: int
    batch_size: int = sizing.EXECUTIONS_PER_INVOKE
    batch_seconds: float = sizing.TASK_SECONDS + sizing.WORKER_OVERHEAD_SECONDS
    headroom: float = 1.5
    hysteresis: float = 0.25

    def __post_init__(self) -> None:
        low, high = MIN_POLLERS_RANGE
        if not low <= self.floor <= self.ceiling <= high:
            raise ValueError(
                f"pollers need {low} <= floor <= ceiling <= {high}, not {self.floor}, {self.ceiling}"
            )


def concurrency_for(executions_in_minute: int, policy: PollerPolicy) -> int:
    """Concurrent worker invocations that start a minute's executions as they fall due, spread over it
    (Little's law: batches a second x a batch's time)."""
    batches_per_second = executions_in_minute / 60 / policy.batch_size
    return math.ceil(batches_per_second * policy.batch_seconds * policy.headroom)


def pollers_for(executions_in_minute: int, policy: PollerPolicy) -> int:
    """Pollers a minute needs, by the first of a poller's limits it reaches (unbounded)."""
    per_second = executions_in_minute / 60 * policy.headroom
    return max(
        math.ceil(concurrency_for(executions_in_minute, policy) / POLLER_CONCURRENT_INVOKES),
        math.ceil(per_second / policy.batch_size / POLLER_RECEIVES_PER_SECOND),
        math.ceil(per_second * MESSAGE_BYTES / POLLER_BYTES_PER_SECOND),
    )


def desired_min_pollers(coming: Sequence[int], current: int, policy: PollerPolicy) -> int:
    """The mapping's MinimumPollers for the coming minutes' counts (the busiest decides), given its
    current value: raised at once, lowered with hysteresis, always within the policy's bounds."""
    busiest = max(coming, default=0)
    needed = min(policy.ceiling, max(policy.floor, pollers_for(busiest, policy)))
    if needed >= current or current > policy.ceiling or current < policy.floor:
        return needed
    if needed == policy.floor or needed <= current * (1 - policy.hysteresis):
        return needed
    return current


@dataclass(frozen=True)
class Limits:
    """What the deployment can start at once: the worker mapping's concurrency (MaximumConcurrency in
    standard mode; MaximumPollers x 10 in provisioned mode), the account's Lambda concurrency left to
    the workers, and the table's write units a second (its quota on-demand, its maximum provisioned)."""

    worker_concurrency: int
    lambda_concurrency: int
    table_write_units: int
    write_units_per_execution: float = sizing.ONE_TIME_WRITE_UNITS


def load_percent(executions_in_minute: int, limits: Limits, policy: PollerPolicy) -> float:
    """How much of what the deployment can start a minute's load needs, in percent (over 100: some of
    it will start late): the tightest of worker concurrency, Lambda concurrency and table writes."""
    concurrency = concurrency_for(executions_in_minute, policy)
    write_units = executions_in_minute / 60 * limits.write_units_per_execution
    return round(
        100
        * max(
            concurrency / max(1, limits.worker_concurrency),
            concurrency / max(1, limits.lambda_concurrency),
            write_units / max(1, limits.table_write_units),
        ),
        1,
    )


@dataclass
class BurstReport:
    counts: dict[str, int] = field(default_factory=dict)  # minute (YYYYMMDDHHMM) -> due executions
    busiest: int = 0  # the busiest of the coming minutes (now and after)
    load_percent: float = 0.0
    min_pollers: int | None = None  # the mapping's MinimumPollers after this run (None: not managed)
    updated: bool = False


class BurstPlanner:
    """Counts the due buckets of the last, current and next `minutes_ahead` minutes on every shard,
    publishes the busiest coming minute and its load, and (given a mapping) moves its minimum pollers.

    Runs once a tick, in one invocation (the tick's own, not the fan-out's): the decision is the whole
    deployment's. The last minute is counted so that the pollers stay up while its executions run.
    """

    def __init__(
        self,
        dynamodb: Any,
        table_name: str,
        shard_count: int,
        clock: Clock,
        *,
        minutes_ahead: int,
        limits: Limits,
        policy: PollerPolicy,
        lambda_client: Any = None,
        mapping_id: str = "",
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._shards = list(range(shard_count))
        self._clock = clock
        self._ahead = minutes_ahead
        self._limits = limits
        self._policy = policy
        self._lambda = lambda_client
        self._mapping_id = mapping_id

    def count(self, minute: datetime) -> int:
        """Executions due in a minute, every shard's bucket counted (markers stay until they expire,
        so a minute already dispatched still counts)."""
        return sum(parallel_map(partial(count_bucket, self._dynamodb, self._table, minute), self._shards))

    def run(self) -> BurstReport:
        now = self._clock.now().replace(second=0, microsecond=0)
        minutes = [now + MINUTE * k for k in range(-1, self._ahead + 1)]
        counts = [self.count(minute) for minute in minutes]
        report = BurstReport(counts={bucket_minute(m): c for m, c in zip(minutes, counts, strict=True)})
        report.busiest = max(counts[1:])
        report.load_percent = load_percent(report.busiest, self._limits, self._policy)
        metrics.add_metric(name=COMING_MINUTE_EXECUTIONS, unit="Count", value=report.busiest)
        metrics.add_metric(name=BURST_LOAD_PERCENT, unit="Percent", value=report.load_percent)
        if report.load_percent > 100:
            logger.warning(
                "a coming minute needs more than the deployment can start on time",
                extra={"counts": report.counts, "load_percent": report.load_percent},
            )
        if self._mapping_id and self._lambda is not None:
            self._prescale(counts, report)
        return report

    def _prescale(self, counts: list[int], report: BurstReport) -> None:
        """Set the mapping's MinimumPollers for the counts. A failure (the mapping still updating from
        the last change, a throttled call) is logged and left to the next tick: the tick goes on."""
        try:
            mapping = self._lambda.get_event_source_mapping(UUID=self._mapping_id)
            config = mapping.get("ProvisionedPollerConfig") or {}
            current = int(config.get("MinimumPollers", MIN_POLLERS_RANGE[0]))
            maximum = int(config.get("MaximumPollers", self._policy.ceiling))
            desired = desired_min_pollers(counts, current, self._policy)
            report.min_pollers = current
            if desired != current:
                # MaximumPollers is sent as it is (never below the minimum): an update without it
                # would set it back to its default.
                self._lambda.update_event_source_mapping(
                    UUID=self._mapping_id,
                    ProvisionedPollerConfig={
                        "MinimumPollers": desired,
                        "MaximumPollers": max(maximum, desired),
                    },
                )
                logger.info(
                    "worker pollers set for the coming minutes",
                    extra={"from": current, "to": desired, "counts": report.counts},
                )
                report.min_pollers = desired
                report.updated = True
        except (ClientError, BotoCoreError):
            logger.exception("could not set the worker mapping's pollers; the next tick tries again")
        if report.min_pollers is not None:
            metrics.add_metric(name=WORKER_MINIMUM_POLLERS, unit="Count", value=report.min_pollers)
