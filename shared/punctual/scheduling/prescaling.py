"""Ahead of a burst: count what falls due in the coming minutes, say whether the deployment can start
it on time, and warm the worker event source mapping's pollers before a large minute.

The due buckets say how many executions fall due in each minute, minutes before the scanner
dispatches them. An SQS event source mapping in standard mode scales its pollers by 300 concurrent
invokes a minute, from 5; in provisioned mode the pollers kept ready (MinimumPollers) start at once
and the rest come at up to 1,000 concurrent invokes a minute. So the minimum is raised a few minutes
before a large minute and lowered once it has passed, and the rest of the time only the floor is
paid for (docs/scaling.md, section 4; `python -m bench.burst`).

A minute's count does not say whether its executions are spread over it or all due at one instant, so
the pollers are sized for the stricter: every pack of the minute due at once, each holding its
invocation from when it is taken until it has fired, if that instant would be crowded
(`instant_invokes`). And the dispatcher makes
a crowded instant's packs visible some seconds before it (`lead_seconds`), so that the environments
the instant needs are started and holding when it comes.

`desired_min_pollers`, `load_percent` and `lead_seconds` are arithmetic; `BurstPlanner` makes the AWS
calls: a COUNT query per shard and minute, GetEventSourceMapping and UpdateEventSourceMapping on the
one mapping.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.domain.buckets import bucket_minute
from punctual.platform import aws_limits as sizing
from punctual.platform.clock import Clock
from punctual.platform.concurrency import parallel_map
from punctual.platform.config import Settings
from punctual.platform.observability import (
    BURST_LOAD_PERCENT,
    COMING_MINUTE_EXECUTIONS,
    WORKER_MINIMUM_POLLERS,
    logger,
    metrics,
)

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
    so that a load that wavers does not update the mapping every minute. `pack_size` and `shards`
    say how a minute all at one instant is packed (Settings.pack_size, Settings.shard_count).
    """

    floor: int
    ceiling: int
    batch_size: int = sizing.EXECUTIONS_PER_INVOKE
    batch_seconds: float = sizing.TASK_SECONDS + sizing.WORKER_OVERHEAD_SECONDS
    headroom: float = 1.5
    hysteresis: float = 0.25
    pack_size: int = 500
    shards: int = 16

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


def instant_packs(executions: int, shards: int, pack_size: int) -> int:
    """Packs (work messages) of `executions` due at one instant: spread evenly over the shards by
    their ids, each shard's part cut every `pack_size` (tick.instant_chunks)."""
    if executions <= 0:
        return 0
    per_shard = math.ceil(executions / shards)
    return min(shards, executions) * math.ceil(per_shard / pack_size)


def instant_invokes(executions: int, policy: PollerPolicy) -> int:
    """Concurrent invokes `executions` all due at one instant hold at once: every pack, when the
    instant is crowded (more than a pack a shard), since each is then taken ahead of it
    (`lead_seconds`) and holds its invoke until it has fired. A quiet instant's packs are taken at it
    and need no more than the even spread's."""
    packs = instant_packs(executions, policy.shards, policy.pack_size)
    return packs if packs > policy.shards else 0


def pollers_for_instant(executions: int, policy: PollerPolicy) -> int:
    """Pollers for `executions` all due at one instant (unbounded), 10 invokes a poller."""
    return math.ceil(instant_invokes(executions, policy) / POLLER_CONCURRENT_INVOKES)


def desired_min_pollers(coming: Sequence[int], current: int, policy: PollerPolicy) -> int:
    """The mapping's MinimumPollers for the coming minutes' counts (the busiest decides), given its
    current value: raised at once, lowered with hysteresis, always within the policy's bounds. A
    minute is sized for the stricter of an even spread and all of it at one instant."""
    busiest = max(coming, default=0)
    need = max(pollers_for(busiest, policy), pollers_for_instant(busiest, policy))
    needed = min(policy.ceiling, max(policy.floor, need))
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
    it will start late): the tightest of worker concurrency, Lambda concurrency and table writes,
    for the minute spread evenly or all at one instant (`instant_invokes`), whichever needs more."""
    concurrency = max(
        concurrency_for(executions_in_minute, policy), instant_invokes(executions_in_minute, policy)
    )
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


@dataclass(frozen=True)
class LeadPolicy:
    """What decides how long before a crowded instant its packs become visible (`lead_seconds`).

    `bound_seconds`: the most (Settings.lead_max_seconds; the worker holds a message that early).
    `ready_invokes`: concurrent invokes the worker mapping has at once when the packs come: in
    provisioned mode its MinimumPollers x 10, which the pre-scaling raised for the minute; in
    standard mode the 5 it starts with. `invokes_per_minute`: what the mapping adds beyond them (1,000
    provisioned, 300 standard); `max_invokes`: its ceiling (MaximumPollers x 10, or MaximumConcurrency).
    `receives_per_second`: packs its pollers take a second (10 receives a second a poller; standard
    mode's pollers are AWS's and not counted). An instant of at most `quiet_packs` packs (a pack a
    shard: up to shards x pack_size executions) is quiet.
    """

    bound_seconds: int = 15
    pack_size: int = 500
    shards: int = 16
    quiet_packs: int = 16
    ready_invokes: int = sizing.STANDARD_START_INVOKES
    invokes_per_minute: int = sizing.STANDARD_INVOKES_PER_MINUTE
    max_invokes: int = 20
    receives_per_second: float = math.inf
    environments_at_once: int = sizing.LAMBDA_ENVIRONMENTS_PER_10_SECONDS
    environments_per_second: float = sizing.LAMBDA_ENVIRONMENTS_PER_10_SECONDS / 10
    start_seconds: float = sizing.COLD_START_SECONDS + sizing.PACK_PREPARE_SECONDS

    @classmethod
    def from_settings(cls, settings: Settings) -> LeadPolicy:
        """The deployment's, as its functions are configured (infra/settings.py sets them)."""
        return cls.for_deployment(
            bound_seconds=settings.lead_max_seconds,
            pack_size=settings.pack_size,
            shards=settings.shard_count,
            ready_pollers=settings.worker_ready_pollers,
            max_invokes=settings.burst_worker_concurrency,
        )

    @classmethod
    def for_deployment(
        cls,
        *,
        bound_seconds: int,
        pack_size: int,
        shards: int,
        ready_pollers: int,
        max_invokes: int,
    ) -> LeadPolicy:
        """`ready_pollers`: the provisioned mapping's MinimumPollers for a crowded minute (0: standard
        mode, bounded by `max_invokes`, its MaximumConcurrency)."""
        if not ready_pollers:
            return cls(bound_seconds, pack_size, shards, shards, max_invokes=max_invokes)
        return cls(
            bound_seconds,
            pack_size,
            shards,
            shards,
            ready_invokes=ready_pollers * POLLER_CONCURRENT_INVOKES,
            invokes_per_minute=sizing.PROVISIONED_INVOKES_PER_MINUTE,
            max_invokes=max_invokes,
            receives_per_second=ready_pollers * POLLER_RECEIVES_PER_SECOND,
        )


def take_seconds(packs: int, policy: LeadPolicy) -> float:
    """Seconds from the first of an instant's packs becoming visible until the deployment has handed
    each to an invocation, as many as it can hold at once (`max_invokes`; the rest wait for one to
    end, whatever the lead), by the first of three limits to bind:
    - the mapping: `ready_invokes` at once, then `invokes_per_minute`;
    - Lambda: `environments_at_once` new environments (1,000), then `environments_per_second` (100);
    - the pollers' receives, a pack each."""
    held = min(packs, policy.max_invokes)
    return max(
        max(0, held - policy.ready_invokes) / (policy.invokes_per_minute / 60),
        max(0, held - policy.environments_at_once) / policy.environments_per_second,
        held / policy.receives_per_second,
    )


def lead_seconds(executions: int, policy: LeadPolicy) -> int:
    """Whole seconds before an instant that `executions` due at it become visible (0: at the instant).

    A quiet instant, at most `quiet_packs` packs (a pack a shard), gets none: its invocations are
    few, the environments of a steady load take them, and a lead would bill each hold and, under a
    steady load, keep lead x packs a second invocations held. A crowded one gets the time it takes
    the deployment to hand out its packs (`take_seconds`) plus a pack's start in a new environment
    (`start_seconds`: a cold start and its reads and lease), rounded up, at most `bound_seconds`.
    Its packs are then taken and prepared before the instant and fire at it.

    A million at one instant onto the default deployment pre-scaled (64 shards, packs of 500, 200
    pollers ready, 210 at most): 64 x ceil(15,625 / 500) = 2,048 packs; the mapping has 2,000 at once
    and adds 48 in 48 / (1,000 / 60) = 2.9 s; Lambda starts 1,000 environments at once and the other
    1,048 at 100 a second, 10.5 s; the pollers' 2,000 receives a second take 1.0 s. So 10.5 s + 1.3 s
    = 11.8 s: 12 s ahead. Under 64 x 500 = 32,000 at an instant: 0.
    """
    packs = instant_packs(executions, policy.shards, policy.pack_size)
    if packs <= policy.quiet_packs or policy.bound_seconds <= 0:
        return 0
    return min(policy.bound_seconds, math.ceil(take_seconds(packs, policy) + policy.start_seconds))


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
    `count_bucket(minute, shard)`: how many markers a minute's bucket of a shard holds (the store's).
    """

    def __init__(
        self,
        count_bucket: Callable[[datetime, int], int],
        shard_count: int,
        clock: Clock,
        *,
        minutes_ahead: int,
        limits: Limits,
        policy: PollerPolicy,
        lambda_client: Any = None,
        mapping_id: str = "",
    ) -> None:
        self._count_bucket = count_bucket
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
        return sum(parallel_map(partial(self._count_bucket, minute), self._shards))

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
