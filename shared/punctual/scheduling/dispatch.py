"""Dispatch: turn due markers into queued executions. Shared by the scanner and the API's hand-off.

For a batch of markers, in an order that survives a crash at any step:
1. read the markers' jobs (not those the API has just created), eventually consistent and again
   consistently where that read would stop a marker, and drop markers whose job is gone, cancelled,
   paused or rescheduled; but leave for a later dispatch one whose request may still be storing the
   job write it goes with (`models.storing`: a request files the marker first);
2. for a recurring job, file the next occurrence's marker and move the job's next_run_at, so the
   chain continues whatever happens to this execution;
3. send the messages, held by DelaySeconds until their instant, or until a lead before it chosen
   from how many executions fall due then (`lead`, prescaling.lead_seconds: a crowded instant's
   packs are taken and prepared by workers that hold them until it comes): one a pack of executions
   due at the same instant (and from the same shard), up to `pack_size`;
4. delete the markers filed as due soon (`DueMarker.soon`); a minute bucket's markers stay, read
   once by the scanner (which keeps its position in each bucket) and left to expire.
A crash before the scanner records its position (or, for a soon marker, before 4) leaves the markers
to be read again, so the next tick repeats the steps: 2 changes nothing the second time, and 3 sends
duplicates that the worker recognises by the execution's stored status.

Where a marker is filed: one due before now + `soon` (the API's hand-off window: the scanner's
lookahead, a tick and a margin) goes to its shard's soon partition, which every tick reads whole,
since a tick may already have read past that instant in the minute's bucket; anything later goes to
its minute's bucket, which no tick has reached yet (handoff.py: who enqueues which).

The execution itself is stored by the worker when it starts (the message carries what it needs): on
AWS the queue keeps the message, so a record written here would be one more write per execution for
nothing but showing it as QUEUED for the minute before it runs. One kind of execution is stored as
QUEUED before its message is sent: an extra run (POST /jobs/{id}/run answers with the execution).
The API stores it; should the request have died before, it is stored here. Those are read first,
so that a repeated dispatch never overwrites an execution that has started, and not sent again once
started; and sent whatever their job's state, for the worker to end them CANCELLED if it stops them.
Every call is batched (BatchGetItem, BatchWriteItem, SendMessageBatch) and they run side by side: a
few calls per hundred executions, so one scanner invocation is bounded by CPU, not by round trips.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from punctual.domain.cron.bounds import CHAIN_BUDGET, CronBoundExceeded
from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import (
    DueMarker,
    Job,
    JobStatus,
    marker_for,
    next_after,
    skip_reason,
    spread,
    storing,
)
from punctual.domain.schedules import next_run
from punctual.domain.work import WorkItem, delay_seconds, pack_items
from punctual.platform.clock import Clock
from punctual.platform.concurrency import parallel_map
from punctual.platform.observability import logger
from punctual.ports.queue import WorkQueue
from punctual.ports.store import Store
from punctual.scheduling import handoff
from punctual.scheduling.prescaling import LeadPolicy, lead_seconds

QUEUED = ExecutionStatus.QUEUED
# Executions a work message carries at most (Settings.pack_size).
PACK_SIZE = 500
# Statuses of an execution whose message may not have been sent yet.
UNSENT = frozenset({ExecutionStatus.PENDING, ExecutionStatus.QUEUED})


@dataclass
class DispatchResult:
    enqueued: list[DueMarker] = field(default_factory=list)
    skipped: list[DueMarker] = field(default_factory=list)
    failed: list[DueMarker] = field(default_factory=list)
    quarantined: list[DueMarker] = field(default_factory=list)
    # Markers whose job write has not landed yet (`storing`): left as they are, for a later dispatch.
    waiting: list[DueMarker] = field(default_factory=list)
    # Recurring jobs' next occurrences filed meanwhile.
    filed: list[DueMarker] = field(default_factory=list)
    # Jobs whose next occurrence could not be computed within the bound, with why.
    unschedulable: dict[str, str] = field(default_factory=dict)


class Dispatcher:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        clock: Clock,
        *,
        soon: timedelta,
        early_visibility_seconds: int = 0,
        pack_size: int = PACK_SIZE,
        lead: LeadPolicy | None = None,
    ) -> None:
        """`early_visibility_seconds`: every message visible at least this early; `lead`: how much
        earlier a crowded instant's are (None: no more)."""
        self._store = store
        self._queue = queue
        self._clock = clock
        self.soon = soon
        self._early = timedelta(seconds=early_visibility_seconds)
        self.pack_size = pack_size
        self._lead = lead

    @property
    def sends_ahead(self) -> timedelta:
        """How far ahead of its instant a message may be sent and become visible: a soon partition
        is read to the hand-off window, a crowded instant's lead comes on top, and a delay is whole
        seconds rounded down (`delay_seconds`): up to a second more."""
        lead = self._lead.bound_seconds if self._lead is not None else 0
        return self.soon + max(self._early, timedelta(seconds=lead)) + timedelta(seconds=1)

    def route(self, marker: DueMarker, now: datetime) -> DueMarker:
        """The marker as it must be filed (`handoff.route`)."""
        return handoff.route(marker, now, self.soon)

    def _guarded(self, marker: DueMarker, now: datetime) -> bool:
        """Whether this marker's execution may have been sent before or be stored already."""
        return self._recorded(marker) or (marker.handoff_until is not None and marker.handoff_until <= now)

    def _confirmed(
        self, markers: Sequence[DueMarker], jobs: dict[str, Job], unreadable: dict[str, str]
    ) -> dict[str, Job]:
        """The jobs as read eventually consistently (half the read units), those read again
        consistently whose read would stop their marker: missing, or not at its version and status
        (a job created, resumed or rescheduled within the last second may read as it was). A stale
        read that lets a marker through costs nothing: the worker reads its job consistently before
        the run, and a recurring job's next marker filed from a stale version is dropped when due."""
        again = {m.job_id for m in markers if skip_reason(jobs.get(m.job_id), m) is not None}
        if not again:
            return jobs
        fresh = self._store.jobs.get_many(sorted(again), ends=False)
        found = {k: v for k, v in jobs.items() if k not in again}
        found.update(fresh.found)
        unreadable.update(fresh.unreadable)
        return found

    def _recorded(self, marker: DueMarker) -> bool:
        """Whether this marker's execution is stored as QUEUED before its message is sent."""
        return marker.manual

    def ahead(self, executions: int) -> timedelta:
        """How long before their instant messages become visible, for `executions` due at it."""
        lead = lead_seconds(executions, self._lead) if self._lead is not None else 0
        return max(self._early, timedelta(seconds=lead))

    def dispatch(
        self,
        markers: Sequence[DueMarker],
        new_jobs: Sequence[Job] = (),
        *,
        resent: bool = False,
        due_at: Mapping[datetime, int] | None = None,
    ) -> DispatchResult:
        """`new_jobs`: jobs the caller has just stored, with these markers their first: not read again,
        and known to have no execution yet. `resent`: the markers may have been sent before (their
        packs are guarded). `due_at`: executions falling due at each instant, deployment-wide, as the
        caller knows them (the scanner, from its buckets); an instant not there counts these markers'."""
        result = DispatchResult()
        if not markers:
            return result
        given = {job.id: job for job in new_jobs}
        recorded = [m for m in markers if self._recorded(m) and m.job_id not in given]
        reads: list[Callable[[], Any]] = []
        unknown = [m.job_id for m in markers if m.job_id not in given]
        if unknown:
            # (a run ended in its batch's ends item is not looked for: sent again, its pack finds it)
            reads.append(lambda: self._store.jobs.get_many(unknown, consistent=False, ends=False))
        if recorded:
            reads.append(lambda: self._store.executions.statuses(recorded))
        answers = parallel_map(lambda read: read(), reads, reads=True)
        jobs, unreadable = answers[0] if unknown else ({}, {})
        read = [m for m in markers if m.job_id not in given and m.job_id not in unreadable]
        jobs = {**self._confirmed(read, jobs, unreadable), **given}
        existing: dict[str, ExecutionStatus | None] = answers[-1] if recorded else {}
        runnable: list[tuple[DueMarker, Job]] = []
        read_at = self._clock.now()
        for marker in markers:
            if marker.job_id in unreadable:
                result.quarantined.append(marker)
                continue
            job = jobs.get(marker.job_id)
            reason = skip_reason(job, marker)
            if job is not None and (reason is None or marker.manual):
                # A run by hand, acknowledged, is stored before its marker (jobs.changes): sent even
                # if its job was paused or cancelled meanwhile, for the worker to end it in the history
                # (CANCELLED, saying why), never dropped.
                runnable.append((marker, job))
            elif storing(job, marker, read_at):
                result.waiting.append(marker)
            else:
                logger.debug("dropping marker", extra={"execution_id": marker.execution_id, "reason": reason})
                result.skipped.append(marker)

        runnable, following = self._schedulable(runnable, result)
        ready = self._record(runnable, following, existing, result)
        result.failed.extend(m for m, _ in runnable if m.execution_id not in ready)

        # A stored execution past QUEUED was sent by an earlier dispatch and has been received since.
        sent_before = [
            m
            for m, _ in runnable
            if m.execution_id in ready and existing.get(m.execution_id, QUEUED) not in UNSENT
        ]
        result.skipped.extend(sent_before)
        already = {m.execution_id for m in sent_before}
        sendable = [m for m, _ in runnable if m.execution_id in ready and m.execution_id not in already]
        now = self._clock.now()
        # Executions of one instant (and shard) go in one message, which one worker runs side by side.
        packs = pack_items(
            (
                (WorkItem(m.job_id, m.execution_id, m.scheduled_at, m.schedule_version, m.manual), m.shard)
                for m in sendable
            ),
            guarded=(m.execution_id for m in sendable if resent or self._guarded(m, now)),
            max_entries=self.pack_size,
        )
        here = Counter(m.scheduled_at for m in markers)
        known = due_at or {}
        counts = {at: max(here[at], known.get(at, 0)) for at in {pack.scheduled_at for pack in packs}}
        # (a chunk's instants are many, their counts few: the lead is worked out once a count)
        leads = {count: self.ahead(count) for count in set(counts.values())}
        ahead = {at: leads[count] for at, count in counts.items()}
        unsent = {
            item.execution_id
            for pack in self._queue.send_packs(
                [(pack, delay_seconds(pack.scheduled_at - ahead[pack.scheduled_at], now)) for pack in packs]
            )
            for item in pack.items
        }
        for marker in sendable:
            (result.failed if marker.execution_id in unsent else result.enqueued).append(marker)

        if result.quarantined:
            self._quarantine(result.quarantined, {**unreadable, **result.unschedulable})
        # Soon markers that were sent, set aside or that must not run are done with; failures stay for
        # the next tick. A marker whose deletion fails stays too: the next tick sends it again (unless
        # its stored execution has started), and the worker drops the duplicate. (A minute bucket's
        # markers are not deleted: the scanner's position moves past them.)
        done = [m for m in result.enqueued + result.skipped + result.quarantined if m.soon]
        if not done:
            return result
        try:
            self._store.markers.delete_many(done)
        except RetryableStoreError:
            logger.warning(
                "could not delete markers; the next tick reads them again", extra={"count": len(done)}
            )
        return result

    def _quarantine(self, markers: list[DueMarker], reasons: dict[str, str]) -> None:
        """A job that cannot be read would hold its bucket (and the scanner's checkpoint) up forever:
        its markers are set aside, loudly, until an operator fixes the job and releases them."""
        # (The scanner counts them in its metrics: Powertools' metric set is not for many threads.)
        self._store.markers.quarantine(markers, reasons, self._clock.now())
        for marker in markers:
            logger.error(
                "job cannot be read; its execution is quarantined",
                extra={
                    "job_id": marker.job_id,
                    "execution_id": marker.execution_id,
                    "reason": reasons.get(marker.job_id),
                },
            )

    def _schedulable(
        self, runnable: list[tuple[DueMarker, Job]], result: DispatchResult
    ) -> tuple[list[tuple[DueMarker, Job]], dict[str, datetime | None]]:
        """The runnable markers whose recurring job's next occurrence can be computed, with those
        occurrences by execution id; the others are quarantined: one job's schedule must not hold up
        its shard."""
        following: dict[str, datetime | None] = {}
        kept = []
        for marker, job in runnable:
            if job.recurring and not marker.manual:
                try:
                    following[marker.execution_id] = next_after(job, marker.scheduled_at, steps=CHAIN_BUDGET)
                except CronBoundExceeded as exc:
                    result.quarantined.append(marker)
                    result.unschedulable[marker.job_id] = f"schedule computation exceeded its bound: {exc}"
                    continue
            kept.append((marker, job))
        return kept, following

    def _record(
        self,
        runnable: list[tuple[DueMarker, Job]],
        following: dict[str, datetime | None],
        existing: dict[str, ExecutionStatus | None],
        result: DispatchResult,
    ) -> set[str]:
        """Step 2 (with the QUEUED executions stored here). Returns the execution ids that may be sent."""
        if not runnable:
            return set()
        now = self._clock.now()
        new = [
            Execution(
                id=marker.execution_id,
                job_id=job.id,
                owner=job.owner,
                scheduled_at=marker.scheduled_at,
                status=ExecutionStatus.QUEUED,
                schedule_version=marker.schedule_version,
                manual=marker.manual,
                created_at=now,
            )
            for marker, job in runnable
            if self._recorded(marker) and marker.execution_id not in existing
        ]
        chained = [(m, j) for m, j in runnable if j.recurring and not m.manual]
        filed = [
            self.route(marker_for(j.id, at, m.schedule_version), now)
            for m, j in chained
            if (at := following[m.execution_id]) is not None
        ]
        try:
            self._store.executions.put_new_many(new, markers=filed)
        except Exception:
            logger.exception(
                "could not record executions and next occurrences; the next tick retries them",
                extra={"count": len(new)},
            )
            return set()
        result.filed.extend(filed)
        advanced = parallel_map(lambda pair: self._advance(*pair, following[pair[0].execution_id]), chained)
        failed = {m.execution_id for (m, _), ok in zip(chained, advanced, strict=True) if not ok}
        return {m.execution_id for m, _ in runnable} - failed

    def _advance(self, marker: DueMarker, job: Job, following: datetime | None) -> bool:
        """Move a recurring job's next_run_at past this occurrence. False on an unexpected error."""
        if job.next_run_at is not None and following is not None and job.next_run_at >= following:
            return True  # already advanced by an earlier, interrupted dispatch of this marker
        changes: dict[str, object] = {"next_run_at": following, "queued_run_at": marker.scheduled_at}
        if job.policy.max_runs is not None:
            changes["runs_dispatched"] = job.runs_dispatched + 1
        if following is None:
            changes["final_execution_id"] = marker.execution_id
        try:
            self._store.jobs.update(
                job,
                changes,
                allowed_statuses=[job.status],
                schedule_version=marker.schedule_version,
                next_run_before=following,
            )
        except LostRace:
            # The job was paused, cancelled or rescheduled meanwhile (that change filed its own marker
            # and the worker will skip this execution; the marker just filed is dropped as superseded),
            # or another dispatch already moved it past this occurrence.
            pass
        except Exception:
            logger.exception("could not advance job", extra={"job_id": job.id})
            return False
        return True


def release_quarantined(store: Store, dispatcher: Dispatcher, clock: Clock, job_id: str) -> DispatchResult:
    """Send a fixed job's quarantined executions now (late, with their lateness recorded). Markers
    whose job still cannot be read are quarantined again.

    A recurring job's chain stopped at its quarantined occurrence; dispatching it files the next one,
    which is by now in a minute the scanner has passed. So the schedule picks up from now instead, as
    on resume: the occurrences missed meanwhile are not run, the quarantined one is."""
    markers = [marker for marker, _ in store.markers.quarantined(job_id)]
    result = dispatcher.dispatch(markers, resent=True)
    store.markers.release_quarantined(result.enqueued + result.skipped)
    job = store.jobs.get_many([job_id]).found.get(job_id)  # None too while it still cannot be read
    now = clock.now()
    if job is None or not job.recurring or job.status is not JobStatus.ACTIVE:
        return result
    if job.next_run_at is None or job.next_run_at > now:
        return result
    runs_at = spread(
        job.id,
        job.schedule,
        next_run(job.schedule, now, job.anchor_at, steps=CHAIN_BUDGET),
        job.anchor_at,
        job.policy.flexible_window_seconds,
    )
    if runs_at is not None:
        store.markers.put(dispatcher.route(marker_for(job.id, runs_at, job.schedule_version), now))
    # The occurrence the chain stopped at, wherever it was filed (it is in the past: not run).
    stale = marker_for(job.id, job.next_run_at, job.schedule_version)
    store.markers.delete_many([stale, replace(stale, soon=True)])
    store.jobs.update(
        job,
        {"next_run_at": runs_at},
        allowed_statuses=[JobStatus.ACTIVE],
        schedule_version=job.schedule_version,
    )
    return result
