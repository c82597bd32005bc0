"""The scanner: once a tick, dispatch every marker due before now + lookahead, and every marker filed
under a soon partition, on the shards it is given (`tick.py`: how a tick reads and sends them).

Each shard has a stored position (a minute, and a place in that minute's bucket) that a tick reads on
from and moves past what it sent. Positions are per shard, and a tick holds its shards under a lease,
so that two ticks never work on one shard at once however the shards are grouped across invocations
(`fan_out`: one invocation per shard group).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from punctual.domain.buckets import Position
from punctual.platform import randomness
from punctual.platform.clock import Clock
from punctual.platform.observability import (
    EXECUTIONS_ENQUEUED,
    EXECUTIONS_QUARANTINED,
    SCANNER_BEHIND_SECONDS,
    SCANNER_DURATION_MS,
    logger,
    metrics,
)
from punctual.ports.store import Store
from punctual.scheduling.dispatch import Dispatcher
from punctual.scheduling.tick import ScanReport, Tick, floor_minute

# The count of an instant a tick sends before it has read all of it (a soon read cut at tick.SOON_READ, a
# million at one instant filed there): more than any deployment holds at once, so that its messages
# get the longest lead the deployment needs (prescaling.lead_seconds: its invocations all held).
UNCOUNTED = 2**62
# A shard never scanned starts this far back (markers older than that were filed by no one).
FIRST_SCAN_BACK = timedelta(minutes=2)
# Chunks of markers dispatched at once (a chunk: a few batched calls per hundred markers).
DISPATCH_LANES = 8
# A tick's hold on its shards: longer than the scanner function may run (55 s), shorter than the tick
# period, so that a tick that died without letting go delays the next one by a minute at most.
LEASE = timedelta(seconds=58)


def shard_groups(shard_count: int, fanout: int) -> list[list[int]]:
    """Split the shards into `fanout` groups, one per scanner invocation (interleaved, so even)."""
    groups = max(1, min(fanout, shard_count))
    return [list(range(first, shard_count, groups)) for first in range(groups)]


def fan_out(invoke: Callable[[dict[str, Any]], None], shard_count: int, fanout: int) -> int:
    """Start one asynchronous scanner invocation per shard group; returns how many were started."""
    groups = shard_groups(shard_count, fanout)
    for group in groups:
        invoke({"shards": group})
    return len(groups)


class Scanner:
    """Reads a minute's buckets side by side and dispatches their markers in chunks on `lanes` threads,
    so that a tick is bounded by CPU rather than by round trips."""

    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        clock: Clock,
        *,
        lookahead: timedelta,
        shards: Sequence[int],
        lanes: int = DISPATCH_LANES,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._lookahead = lookahead
        self._shards = list(shards)
        self._lanes = lanes

    def tick(self, budget: timedelta = timedelta(seconds=50)) -> ScanReport:
        """Dispatch what is due on this scanner's shards, unless another tick still works on them (a
        retried or slow invocation): two ticks at once could both record an execution as new."""
        holder = randomness.token_hex(8)
        now = self._clock.now()
        if not self._store.scanner.acquire_leases(self._shards, holder, now, now + LEASE):
            logger.warning(
                "another scanner tick holds these shards; leaving them to it", extra={"shards": self._shards}
            )
            return ScanReport(complete=False, busy=True)
        try:
            return self._tick(budget)
        finally:
            self._store.scanner.release_leases(self._shards, holder)

    def _tick(self, budget: timedelta) -> ScanReport:
        started = time.monotonic()
        now = self._clock.now()
        stored, positions = self._positions(now)
        tick = Tick(
            self._store,
            self._dispatcher,
            self._shards,
            now=now,
            lookahead=self._lookahead,
            stored=stored,
            positions=positions,
            deadline=started + budget.total_seconds(),
            crowds=self.due_at,
        )
        with ThreadPoolExecutor(max_workers=self._lanes, thread_name_prefix="scanner") as lanes:
            tick.lanes = lanes
            # The soon partitions first (failed hand-offs, short-period chains: never left behind a
            # backlog of buckets), then the buckets minute by minute, then the soon partitions again
            # while they have more.
            more = tick.read_soon(self._shards)
            tick.read_buckets()
            tick.chase_soon(more)
        tick.save_the_rest()
        self._report(tick, started)
        if tick.error is not None:
            raise tick.error
        return tick.report

    def _positions(self, now: datetime) -> tuple[dict[int, Position | None], dict[int, Position]]:
        """The shards' stored positions, and where each is read from this tick. Positions are per shard, so that changing how
        shards are grouped across scanner invocations never skips a bucket. None is past the horizon:
        one that is (a shorter lookahead since, or a clock that ran ahead) comes back to it, so that
        what is filed before the horizon is read."""
        horizon = now + self._lookahead
        stored = self._store.scanner.positions(self._shards)
        fresh = Position(floor_minute(now - FIRST_SCAN_BACK))
        cap = Position.bound(floor_minute(horizon), horizon)
        return stored, {shard: min(stored[shard] or fresh, cap) for shard in self._shards}

    def _report(self, tick: Tick, started: float) -> None:
        report = tick.report
        report.complete = report.complete and not tick.held and tick.error is None and not report.failed
        elapsed_ms = (time.monotonic() - started) * 1000
        metrics.add_metric(name=EXECUTIONS_ENQUEUED, unit="Count", value=report.enqueued)
        if report.quarantined:
            metrics.add_metric(name=EXECUTIONS_QUARANTINED, unit="Count", value=report.quarantined)
        metrics.add_metric(name=SCANNER_DURATION_MS, unit="Milliseconds", value=elapsed_ms)
        positions = tick.positions.values()
        behind = max(0.0, max((tick.now - p.instant()).total_seconds() for p in positions))
        report.behind_seconds = behind
        metrics.add_metric(name=SCANNER_BEHIND_SECONDS, unit="Seconds", value=behind)
        logger.info(
            "scanner tick",
            extra={
                "enqueued": report.enqueued,
                "skipped": report.skipped,
                "failed": report.failed,
                "deferred": report.deferred,
                "quarantined": report.quarantined,
                "buckets": report.buckets_read,
                "from": str(report.first_minute),
                "duration_ms": round(elapsed_ms, 1),
            },
        )

    def due_at(self, counts: Mapping[datetime, int], cut: Collection[datetime] = ()) -> dict[datetime, int]:
        """Executions due at each crowded instant, on every shard, from `counts`, the markers this
        scanner's shards hold at each: scaled by the shards this scanner does not read (the shards hold
        an instant's executions evenly). `cut`: instants not all read yet (UNCOUNTED). Crowded: more
        than a pack a shard; a quiet instant's lead is none whatever its count."""
        scale = max(1.0, self._store.shard_count / max(1, len(self._shards)))
        quiet = self._dispatcher.pack_size * self._store.shard_count
        crowded = {at: n for at, count in counts.items() if (n := round(count * scale)) > quiet}
        return crowded | dict.fromkeys(cut, UNCOUNTED)
