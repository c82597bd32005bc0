"""The scanner: once a tick, dispatch every marker due before now + lookahead.

It reads only due buckets: from its checkpoint (the first minute that may still hold markers) up to
the lookahead horizon, one query per bucket and shard. A late, missed or crashed tick skips nothing:
the checkpoint only moves past minutes that were drained and can no longer receive markers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from punctual.clock import Clock
from punctual.dispatch import Dispatcher
from punctual.models import DueMarker
from punctual.observability import EXECUTIONS_ENQUEUED, SCANNER_DURATION_MS, logger, metrics
from punctual.store import Store, bucket_minute

# Markers may still arrive in a past minute for this long: an API request that files a marker for
# "now" takes up to API Gateway's 29 s, and a dispatch filing a follow-up is quicker. Buckets younger
# than this are read again on every tick; the checkpoint never passes them.
SETTLE = timedelta(minutes=2)
MINUTE = timedelta(minutes=1)
DISPATCH_CHUNK = 500


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
    buckets_read: int = 0
    first_minute: datetime | None = None
    last_minute: datetime | None = None
    complete: bool = True
    errors: list[str] = field(default_factory=list)


class Scanner:
    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        clock: Clock,
        *,
        lookahead: timedelta,
        shards: Sequence[int],
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._lookahead = lookahead
        self._shards = list(shards)

    def tick(self, budget: timedelta = timedelta(seconds=50)) -> ScanReport:
        started = time.monotonic()
        now = self._clock.now()
        horizon = now + self._lookahead
        settled = floor_minute(now - SETTLE)
        # Checkpoints are per shard, so that changing how shards are grouped across scanner
        # invocations never skips a bucket.
        checkpoints = self._store.get_checkpoints(self._shards).values()
        first = min([settled, *(c for c in checkpoints if c is not None)])
        report = ScanReport(first_minute=first)

        minute = first
        drained_until = first  # every minute before this one is empty
        while minute <= floor_minute(horizon):
            if time.monotonic() - started > budget.total_seconds():
                report.complete = False
                logger.warning("scanner out of time; the next tick continues", extra={"minute": str(minute)})
                break
            failed_before = report.failed
            for shard in self._shards:
                self._scan_bucket(minute, shard, horizon, report)
            report.last_minute = minute
            if report.failed == failed_before and minute == drained_until:
                drained_until = minute + MINUTE
            minute += MINUTE

        self._store.advance_checkpoints(self._shards, min(drained_until, settled))
        elapsed_ms = (time.monotonic() - started) * 1000
        metrics.add_metric(name=EXECUTIONS_ENQUEUED, unit="Count", value=report.enqueued)
        metrics.add_metric(name=SCANNER_DURATION_MS, unit="Milliseconds", value=elapsed_ms)
        logger.info(
            "scanner tick",
            extra={
                "enqueued": report.enqueued,
                "skipped": report.skipped,
                "failed": report.failed,
                "buckets": report.buckets_read,
                "from": str(first),
                "duration_ms": round(elapsed_ms, 1),
            },
        )
        return report

    def _scan_bucket(self, minute: datetime, shard: int, horizon: datetime, report: ScanReport) -> None:
        report.buckets_read += 1
        chunk: list[DueMarker] = []
        for marker in self._store.due_markers(bucket_minute(minute), shard, horizon):
            chunk.append(marker)
            if len(chunk) >= DISPATCH_CHUNK:
                self._dispatch(chunk, report)
                chunk = []
        self._dispatch(chunk, report)

    def _dispatch(self, markers: list[DueMarker], report: ScanReport) -> None:
        if not markers:
            return
        result = self._dispatcher.dispatch(markers)
        report.enqueued += len(result.enqueued)
        report.skipped += len(result.skipped)
        report.failed += len(result.failed)
