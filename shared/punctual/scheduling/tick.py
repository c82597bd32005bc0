"""One scanner tick on its shards: their markers read, dispatched in chunks, and their positions
moved past what was sent.

It reads two kinds of partition per shard:
- its soon partition, whole (markers filed due sooner than a tick could have read their bucket: the
  API's hand-offs and their failures, close follow-ups); what it sends from there it deletes. Whole:
  up to now + `Dispatcher.soon`, not just the horizon, since a marker is filed there only when due
  before its filing + `soon`, so a tick reads every one filed before it started. An unclaimed one (due
  at least `handoff_claim_seconds` after its filing: a tick period, the tick's lateness and 15 s) is
  thus sent by the first tick after its filing, which starts within a period and its lateness: 15 s
  or more before its instant (on AWS: filed at 12:00:40, due at 12:02:55 or after, sent by a tick by
  12:02:40). Its message may be sent up to `soon` (180 s) ahead, well within SQS's 900 s delay. (A
  recurring job's next occurrence filed there during the tick is chased within it only when due
  before the horizon, as through the buckets: a later one is sent by a later tick.);
- the minute buckets, each once: a shard's position (a minute and a place in its bucket, stored per
  shard) says where it reads on, and moves past what was sent. Markers there are not deleted; they
  expire. A bucket never receives a marker behind a position: anything due that soon is filed under
  the soon partition instead (`Dispatcher.route`).
Before sending, it counts how many executions fall due at each instant it has read this tick, so
that the dispatcher can make a crowded instant's messages visible ahead of it (`Dispatcher.ahead`;
`Scanner.due_at` scales the count to all shards). The count runs across the tick's reads (soon
partitions and buckets), not one read's; and an instant at which a soon read was cut (SOON_READ) may
hold more than the tick has read when it sends the first of them, so it is counted as crowded as any.
(The soon markers read first are still counted without the buckets read after them.)
A late, missed or crashed tick skips nothing: the position moves only past markers that were sent
(or dropped, or set aside); a failure keeps it at the first marker that failed, so the next tick reads
from there (sending again what followed it, which the worker recognises).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial

from punctual.domain.buckets import Position, shard_of
from punctual.domain.errors import RetryableStoreError
from punctual.domain.models import DueMarker
from punctual.platform.concurrency import parallel_map
from punctual.platform.observability import logger
from punctual.ports.store import Store
from punctual.scheduling import handoff
from punctual.scheduling.dispatch import Dispatcher

# Soon markers read from a shard at a time (a backlog is worked through in several readings).
SOON_READ = 2000
MINUTE = timedelta(minutes=1)


def instant_chunks(markers: Sequence[DueMarker], pack_size: int) -> list[list[DueMarker]]:
    """A shard's markers (in sort-key order) as chunks to dispatch, each of at most `pack_size`:
    whole instants together, an instant with more cut every `pack_size` from its first marker.

    So the same markers make the same packs (and pack ids) however many ticks read them, and a
    crowded instant is never cut where a neighbour happens to end."""
    pieces: list[list[DueMarker]] = []
    for marker in markers:
        last = pieces[-1] if pieces else None
        if last is not None and last[0].scheduled_at == marker.scheduled_at and len(last) < pack_size:
            last.append(marker)
        else:
            pieces.append([marker])
    out: list[list[DueMarker]] = []
    for piece in pieces:
        if (
            out
            and len(out[-1]) + len(piece) <= pack_size
            and out[-1][-1].scheduled_at != piece[0].scheduled_at
        ):
            out[-1].extend(piece)
        else:
            out.append(list(piece))
    return out


def floor_minute(instant: datetime) -> datetime:
    return instant.replace(second=0, microsecond=0)


@dataclass
class ScanReport:
    """What a tick did on its shards."""

    enqueued: int = 0
    skipped: int = 0
    failed: int = 0
    # markers an API request is enqueueing itself (hand-off claim still running) or still storing the
    # job of (`models.storing`)
    deferred: int = 0
    quarantined: int = 0  # markers set aside because their job cannot be read
    buckets_read: int = 0
    first_minute: datetime | None = None
    last_minute: datetime | None = None
    complete: bool = True
    busy: bool = False  # another tick held the shards: nothing was done
    behind_seconds: float = 0.0  # how far the furthest-behind shard's position is behind now


@dataclass
class _Counts:
    """What dispatching a chunk did."""

    enqueued: int = 0
    skipped: int = 0
    failed: list[DueMarker] = field(default_factory=list)
    deferred: list[DueMarker] = field(default_factory=list)
    quarantined: int = 0
    filed: list[DueMarker] = field(default_factory=list)


class Tick:
    """One tick's work and what it has done so far: its positions, its report, the shards held at a
    marker, the soon markers already dispatched."""

    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        shards: Sequence[int],
        *,
        now: datetime,
        lookahead: timedelta,
        stored: dict[int, Position | None],
        positions: dict[int, Position],
        deadline: float,
        crowds: Callable[[Mapping[datetime, int], Collection[datetime]], dict[datetime, int]],
    ) -> None:
        """`stored`: the shards' positions as saved; `positions`: where each is read from. `crowds`:
        the crowded instants' counts on every shard, from the markers these shards hold at each and
        the instants not all read yet (`Scanner.due_at`)."""
        self._store = store
        self._dispatcher = dispatcher
        self._shards = list(shards)
        self._crowds = crowds
        self.now = now
        self.horizon = now + lookahead
        # How far the soon partitions are read: all they hold (module docstring).
        self.reach = max(self.horizon, now + dispatcher.soon)
        self.last_minute = floor_minute(self.horizon)
        self.positions = positions
        self.saved = dict(stored)
        self.deadline = deadline
        self.report = ScanReport(first_minute=min(p.minute for p in positions.values()))
        self.held: dict[int, Position] = {}  # shards stopped at a marker this tick (could not be set aside)
        self.due_soon: list[DueMarker] = []  # follow-ups filed under a soon partition, due within this tick
        self.seen: set[str] = set()  # soon markers dispatched (or set there) this tick: once a tick each
        self.counted: Counter[datetime] = Counter()  # markers read this tick, by instant
        self.cut: set[datetime] = set()  # instants at which a soon read stopped (more may follow)
        self.error: BaseException | None = None
        self.lanes: ThreadPoolExecutor | None = None

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def read_soon(self, shards: Sequence[int]) -> list[int]:
        """The soon partitions: what is due, each marker once a tick, at most SOON_READ a shard at a
        time (a backlog, after an outage, never takes a whole tick). Returns the shards that had more."""
        read = parallel_map(self._read_soon, list(shards))
        self.report.buckets_read += len(read)
        # A read is in instant order: only its last instant may go on past it.
        self.cut.update(markers[-1].scheduled_at for _, markers in read if len(markers) >= SOON_READ)
        unseen = [(shard, [m for m in markers if m.execution_id not in self.seen]) for shard, markers in read]
        self.seen.update(m.execution_id for _, markers in unseen for m in markers)
        self.due_soon.clear()
        self.run(unseen)
        return [
            shard
            for (shard, markers), (_, fresh) in zip(read, unseen, strict=True)
            if len(markers) >= SOON_READ and fresh
        ]

    def read_buckets(self) -> None:
        """The minute buckets, from the earliest position to the horizon's minute, within the budget."""
        minute = self.report.first_minute
        assert minute is not None
        while minute <= self.last_minute:
            if self.out_of_time():
                self.report.complete = False
                logger.warning("scanner out of time; the next tick continues", extra={"minute": str(minute)})
                return
            self.read_minute(minute)
            self.report.last_minute = minute
            minute += MINUTE

    def read_minute(self, minute: datetime) -> None:
        """A minute's buckets, read side by side and their chunks dispatched on the lanes. The next
        minute is read only once this one is done, because dispatching files recurring jobs' next
        occurrences into later minutes, which must be read after."""
        reading = [s for s in self._shards if s not in self.held and self.positions[s].minute <= minute]
        batches = parallel_map(partial(self._read_bucket, minute), reading)
        self.report.buckets_read += len(batches)
        self.run(batches)
        for shard in reading:
            if shard in self.held:
                self.positions[shard] = self.held[shard]
            elif minute < self.last_minute:
                self.positions[shard] = Position(minute + MINUTE)
            else:
                self.positions[shard] = Position.bound(minute, self.horizon)
        # Saved after each minute that held markers: a tick stopped part way (its function timed
        # out) keeps what it did, and the next one goes on from there. (Minutes without any are saved
        # once, at the end: a catch-up writes little to the positions' partition.)
        if any(markers for _, markers in batches):
            self.save(reading)

    def chase_soon(self, more: list[int]) -> None:
        """The soon partitions again, as long as there is more there (a backlog) or dispatching files
        more that are due: a recurring job caught up after an outage files each next occurrence there
        (it is due soon), and its chain goes on within this tick, as it does through the buckets."""
        while (more or self.due_soon) and not self.out_of_time():
            chased = {shard_of(m.execution_id, self._store.shard_count) for m in self.due_soon}
            more = self.read_soon([s for s in self._shards if s in more or s in chased])

    def run(self, batches: list[tuple[int, list[DueMarker]]]) -> None:
        """Dispatch the markers of some shards on the lanes. A minute bucket's markers that could not
        be sent (a failure, or a hand-off claim still running) are moved to their shard's soon
        partition, which every tick reads, so that one marker failing again and again never holds up
        the rest of its shard; only if that fails too does the shard stop at it."""
        assert self.lanes is not None
        self.counted.update(m.scheduled_at for _, markers in batches for m in markers)
        due_at = self._crowds(self.counted, self.cut)
        futures = [
            (shard, list(chunk), self.lanes.submit(self._dispatch, list(chunk), due_at))
            for shard, markers in batches
            for chunk in instant_chunks(markers, self._dispatcher.pack_size)
        ]
        stuck: dict[int, list[DueMarker]] = {}
        for shard, chunk, future in futures:
            try:
                counts = future.result()
            except Exception as exc:
                # The other chunks still count; the tick fails once its positions are safe.
                self.error = self.error or exc
                failed = chunk
            else:
                self._count(counts)
                failed = counts.failed + counts.deferred
            stuck.setdefault(shard, []).extend(m for m in failed if not m.soon)
        for shard, markers in stuck.items():
            if markers:
                self._set_aside(shard, markers)

    def save(self, shards: Sequence[int]) -> None:
        """Record the shards' positions now; if the store is busy, at the end of the tick instead."""
        wanted = {shard: self.positions[shard] for shard in shards}
        try:
            self._store.scanner.save_positions(wanted)
        except RetryableStoreError:
            logger.warning(
                "positions not saved; the tick saves them at its end", extra={"shards": list(shards)}
            )
            return
        self.saved.update(wanted)

    def save_the_rest(self) -> None:
        """What the minutes did not save: a position brought back to the horizon on a shard not read."""
        unsaved = {shard: p for shard, p in self.positions.items() if self.saved.get(shard) != p}
        if unsaved:
            self._store.scanner.save_positions(unsaved)

    def _count(self, counts: _Counts) -> None:
        report = self.report
        report.enqueued += counts.enqueued
        report.skipped += counts.skipped
        report.failed += len(counts.failed)
        report.deferred += len(counts.deferred)
        report.quarantined += counts.quarantined
        self.due_soon.extend(m for m in counts.filed if m.soon and m.scheduled_at < self.horizon)

    def _dispatch(self, markers: list[DueMarker], due_at: Mapping[datetime, int] | None = None) -> _Counts:
        """`due_at`: the crowded instants' counts (`Scanner.due_at`); the dispatcher counts the rest."""
        # A marker an API request is still enqueueing stays for a later tick (in a minute bucket, the
        # shard's position stops at it).
        mine, claimed = handoff.split_claimed(markers, self.now)
        counts = _Counts(deferred=list(claimed))
        crowds = due_at or {}
        crowded = {m.scheduled_at: crowds[m.scheduled_at] for m in mine if m.scheduled_at in crowds}
        result = (
            self._dispatcher.dispatch(mine, due_at=crowded) if crowded else self._dispatcher.dispatch(mine)
        )
        counts.enqueued = len(result.enqueued)
        counts.skipped = len(result.skipped)
        counts.failed = list(result.failed)
        counts.quarantined = len(result.quarantined)
        counts.filed = result.filed
        # (a marker whose request is still storing its job: in a minute bucket, set aside as a claim is)
        counts.deferred += result.waiting
        return counts

    def _set_aside(self, shard: int, markers: list[DueMarker]) -> None:
        # With a claim run out already (no one's, the scanner's to send): they may have been sent, so
        # their packs go guarded (`Dispatcher._guarded`).
        ran_out = self.now
        try:
            self._store.markers.put_many([replace(m, soon=True, handoff_until=ran_out) for m in markers])
            self.seen.update(m.execution_id for m in markers)  # retried from there next tick
        except Exception:
            logger.exception("could not set markers aside; the shard waits at them")
            # (a bucket's markers are all due in its minute)
            self.held[shard] = min(Position.at(floor_minute(m.scheduled_at), m) for m in markers)

    def _read_soon(self, shard: int) -> tuple[int, list[DueMarker]]:
        return shard, list(self._store.markers.soon(shard, self.reach, SOON_READ))

    def _read_bucket(self, minute: datetime, shard: int) -> tuple[int, list[DueMarker]]:
        position = self.positions[shard]
        start = position if position.minute == minute else Position(minute)
        return shard, list(self._store.markers.in_bucket(shard, start, self.horizon))
