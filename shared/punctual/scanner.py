"""The scanner: once a tick, dispatch every marker due before now + lookahead.

It reads only due buckets: from its checkpoint (the first minute that may still hold markers) up to
the lookahead horizon, one query per bucket and shard. A late, missed or crashed tick skips nothing:
the checkpoint only moves past minutes that were drained and can no longer receive markers.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from punctual.clock import Clock
from punctual.concurrency import chunks, parallel_map
from punctual.dispatch import Dispatcher
from punctual.models import DueMarker
from punctual.observability import (
    EXECUTIONS_ENQUEUED,
    EXECUTIONS_QUARANTINED,
    SCANNER_DURATION_MS,
    logger,
    metrics,
)
from punctual.store import Store, bucket_minute

# Markers may still arrive in a past minute for this long: an API request that files a marker for
# "now" takes up to API Gateway's 29 s, and a dispatch filing a follow-up is quicker. Buckets younger
# than this are read again on every tick; the checkpoint never passes them.
SETTLE = timedelta(minutes=2)
MINUTE = timedelta(minutes=1)
# Markers dispatched together (a few batched calls per hundred), and chunks dispatched at once.
DISPATCH_CHUNK = 250
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


def floor_minute(instant: datetime) -> datetime:
    return instant.replace(second=0, microsecond=0)


@dataclass
class ScanReport:
    enqueued: int = 0
    skipped: int = 0
    failed: int = 0
    deferred: int = 0  # markers an API request is enqueueing itself (hand-off claim still running)
    quarantined: int = 0  # markers set aside because their job cannot be read
    buckets_read: int = 0
    first_minute: datetime | None = None
    last_minute: datetime | None = None
    complete: bool = True
    busy: bool = False  # another tick held the shards: nothing was done


@dataclass
class _Counts:
    enqueued: int = 0
    skipped: int = 0
    failed: int = 0
    deferred: int = 0
    quarantined: int = 0
    undeleted: int = 0


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
        holder = secrets.token_hex(8)
        now = self._clock.now()
        if not self._store.acquire_scan_lease(self._shards, holder, now, now + LEASE):
            logger.warning(
                "another scanner tick holds these shards; leaving them to it", extra={"shards": self._shards}
            )
            return ScanReport(complete=False, busy=True)
        try:
            return self._tick(budget)
        finally:
            self._store.release_scan_lease(self._shards, holder)

    def _tick(self, budget: timedelta) -> ScanReport:
        started = time.monotonic()
        now = self._clock.now()
        horizon = now + self._lookahead
        settled = floor_minute(now - SETTLE)
        # Checkpoints are per shard, so that changing how shards are grouped across scanner
        # invocations never skips a bucket.
        checkpoints = self._store.get_checkpoints(self._shards).values()
        first = min([settled, *(c for c in checkpoints if c is not None)])
        report = ScanReport(first_minute=first)

        drained_until = first  # every minute before this one is empty
        error: BaseException | None = None
        with ThreadPoolExecutor(max_workers=self._lanes, thread_name_prefix="scanner") as lanes:
            minute = first
            while minute <= floor_minute(horizon):
                if time.monotonic() - started > budget.total_seconds():
                    report.complete = False
                    logger.warning(
                        "scanner out of time; the next tick continues", extra={"minute": str(minute)}
                    )
                    break
                # A minute's buckets are read side by side and their chunks dispatched on the lanes;
                # the next minute is read only once this one is done, because dispatching files
                # recurring jobs' next occurrences into later minutes, which must be read after.
                buckets = parallel_map(partial(self._read_bucket, minute, horizon), self._shards)
                report.buckets_read += len(buckets)
                futures = [
                    lanes.submit(self._dispatch, list(chunk), now)
                    for markers in buckets
                    for chunk in chunks(markers, DISPATCH_CHUNK)
                ]
                clean = True
                for future in futures:
                    try:
                        counts = future.result()
                    except Exception as exc:
                        # The other chunks still count; the tick fails once its checkpoint is safe.
                        error = error or exc
                        clean = False
                        continue
                    report.enqueued += counts.enqueued
                    report.skipped += counts.skipped
                    report.failed += counts.failed
                    report.deferred += counts.deferred
                    report.quarantined += counts.quarantined
                    clean = clean and not (counts.failed or counts.deferred or counts.undeleted)
                if minute == drained_until and clean:
                    drained_until = minute + MINUTE
                report.last_minute = minute
                minute += MINUTE

        self._store.advance_checkpoints(self._shards, min(drained_until, settled))
        elapsed_ms = (time.monotonic() - started) * 1000
        metrics.add_metric(name=EXECUTIONS_ENQUEUED, unit="Count", value=report.enqueued)
        if report.quarantined:
            metrics.add_metric(name=EXECUTIONS_QUARANTINED, unit="Count", value=report.quarantined)
        metrics.add_metric(name=SCANNER_DURATION_MS, unit="Milliseconds", value=elapsed_ms)
        logger.info(
            "scanner tick",
            extra={
                "enqueued": report.enqueued,
                "skipped": report.skipped,
                "failed": report.failed,
                "deferred": report.deferred,
                "quarantined": report.quarantined,
                "buckets": report.buckets_read,
                "from": str(first),
                "duration_ms": round(elapsed_ms, 1),
            },
        )
        if error is not None:
            raise error
        return report

    def _read_bucket(self, minute: datetime, horizon: datetime, shard: int) -> list[DueMarker]:
        return list(self._store.due_markers(bucket_minute(minute), shard, horizon))

    def _dispatch(self, markers: list[DueMarker], now: datetime) -> _Counts:
        # A marker an API request is still enqueueing stays (and its minute undrained) for a later tick.
        mine = [m for m in markers if m.handoff_until is None or m.handoff_until <= now]
        counts = _Counts(deferred=len(markers) - len(mine))
        result = self._dispatcher.dispatch(mine)
        counts.enqueued = len(result.enqueued)
        counts.skipped = len(result.skipped)
        counts.failed = len(result.failed)
        counts.quarantined = len(result.quarantined)
        counts.undeleted = len(result.undeleted)
        return counts
