"""The run hooks: what follows an execution's start and end, beside running it. The job's recorded
outcome, the auto-pause after failures, the dead-letter record and the job's notifications; a
feature that reacts to a run's end (a job started when another succeeds) hooks in here.

The worker and the dead-letter handler call `RunHooks.started` and `RunHooks.ended`. Everything here is
written after the execution's own status, and in an order that survives a crash at any step: the
outcome first (a repeat of it is refused by its condition, so it is never counted twice), then the
pause, then the notifications, whose failure to be queued makes the work message come back (the
execution, finished, is not run again; its notifications are queued again).
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import TypeVar

from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.domain.executions import DeadLetter, Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus, Outcome, completes_job, dispatched_runs
from punctual.domain.policies import NotifyEvent, NotifyRule
from punctual.domain.work import WorkItem
from punctual.execution import pausing
from punctual.notify.messages import Outbox, events_at_end, is_late, notifications
from punctual.platform.clock import Clock
from punctual.platform.observability import JOBS_AUTO_PAUSED, logger, metrics
from punctual.ports.queue import WorkQueue
from punctual.ports.store import Store

# How long a write that must happen (a run's end, its outcome) rides out throttling before the message
# is given back, which runs the task again. At a crowded instant the ends of a million runs queue for
# the table's write units (bench.burst sizes the quota so that they drain within this); kept under
# the pack's LEASE_MARGIN, so that no other worker takes the pack over while its ends are written.
PERSIST_SECONDS = 15.0
PERSIST_MAX_BACKOFF_SECONDS = 2.0
PAUSE_ATTEMPTS = 3
# Executions whose `late` notification went out at their start, remembered until their end (in this
# process: a run that ends in another tells of its lateness again, at least once).
_REMEMBERED_LATE = 10_000

_T = TypeVar("_T")


class RunHooks:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        outbox: Outbox | None,
        rng: random.Random | None = None,
        *,
        sent_ahead: timedelta,
        queue: WorkQueue | None = None,
    ) -> None:
        """`sent_ahead`: how far ahead of its instant a run's message may be sent (a job paused after
        failures records the change for a pack already sent: JobLifecycle._write does the same).
        `queue`: where a run waiting for the one that ended is sent on (None: it waits for its own
        next look)."""
        self._store = store
        self._queue = queue
        self._sent_ahead = sent_ahead
        self._clock = clock
        self._outbox = outbox
        self._rng = rng or random.Random()
        self._late_sent: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def started(self, job: Job, execution: Execution) -> None:
        """A run's first attempt has started: tell of it now if it is late. Never fails the run: a
        notification that cannot be queued now goes with the execution's end."""
        if not job.notify or self._outbox is None:
            return
        now = self._clock.now()
        messages = notifications(
            job, execution, now, lambda rule: [NotifyEvent.LATE] if is_late(rule, execution) else []
        )
        if not messages:
            return
        try:
            self._outbox.send(messages)
        except Exception as exc:
            logger.warning(
                "late notification not queued yet", extra={"execution_id": execution.id, "error": str(exc)}
            )
            return
        with self._lock:
            self._late_sent[execution.id] = None
            while len(self._late_sent) > _REMEMBERED_LATE:
                self._late_sent.popitem(last=False)

    def ended(self, job: Job, execution: Execution, *, wake: bool = True) -> None:
        """An execution reached its final status: complete the job if this was its last run (its
        outcome in the same write), or record the job's outcome; pause it after its allowed
        consecutive failures; send on the run waiting for it (`wake`); queue its notifications.
        Raises RetryableStoreError when the store or the queue stays busy: the caller tries again
        later."""
        shown = job
        if completes_job(job, execution) and job.status in (JobStatus.ACTIVE, JobStatus.PAUSED):
            failures = self._persist(lambda: pausing.complete_job(self._store, job, execution))
            shown = self._with_outcome(job, execution, failures)
        elif execution.status.ran_to_end:
            failures = self._persist(lambda: self._store.jobs.record_outcome(execution))
            shown = self._with_outcome(job, execution, failures)
            if failures is not None:
                shown = self._pause_after_failures(shown, execution, failures)
        if wake:
            self._wake_waiter(job, execution)
        self._notify_end(shown, execution)

    def _wake_waiter(self, job: Job, execution: Execution) -> None:
        """Send on the run waiting for this one (overlap `buffer_one`) now, rather than on its next
        look, up to a minute away. Never fails the end: a message not sent leaves it to that look."""
        waiter = execution.waiter
        if waiter is None or self._queue is None:
            return
        item = WorkItem(job.id, waiter.execution_id, waiter.scheduled_at, waiter.schedule_version)
        try:
            unsent = self._queue.send([(item, 0)])
        except Exception as exc:
            unsent = [item]
            logger.warning(
                "waiting run not sent on", extra={"execution_id": waiter.execution_id, "error": str(exc)}
            )
        if not unsent:
            logger.info(
                "waiting run sent on", extra={"execution_id": waiter.execution_id, "previous": execution.id}
            )

    def found_ended(self, execution: Execution) -> None:
        """An execution found ended on a later receipt of its message (a duplicate, a redelivery): as
        `ended`, for the worker that ended it may have died before it did that; but the run waiting
        for it is not sent on again. Its end sent it once, and its own looks stand in for a worker
        that died: sent on by every duplicate, each waiting run's copies sent on the next's, so a
        long chain of buffered runs sent more messages a run the longer it went on."""
        job = self._store.jobs.get(execution.job_id)
        # (a paused job too: a one-time job notes that its run ended, so that resuming does not repeat
        # it; and a finished one, whose notifications may not have been queued)
        if job is not None:
            self.ended(job, execution, wake=False)

    def dead_lettered(self, job: Job, execution: Execution) -> None:
        """The dead-letter handler ended `execution`: keep it for its owner to list and redrive, then
        as `ended`."""
        if execution.dead_lettered:
            self._persist(
                lambda: self._store.dead_letters.put(
                    DeadLetter(
                        owner=job.owner,
                        job_id=job.id,
                        execution_id=execution.id,
                        scheduled_at=execution.scheduled_at,
                        schedule_version=execution.schedule_version,
                        manual=execution.manual,
                        dead_lettered_at=execution.finished_at or self._clock.now(),
                        error=execution.error or "",
                    )
                )
            )
        self.ended(job, execution)

    def _notify_end(self, job: Job, execution: Execution) -> None:
        with self._lock:
            late_sent = execution.id in self._late_sent
            self._late_sent.pop(execution.id, None)
        outbox = self._outbox
        if not job.notify or outbox is None:
            return
        # (lateness is told at the end only of a run that ran: a skipped one was told of as such)
        told = late_sent or not execution.status.ran_to_end

        def pick(rule: NotifyRule) -> list[NotifyEvent]:
            return events_at_end(rule, execution, late_sent=told)

        messages = notifications(job, execution, self._clock.now(), pick)
        self._persist(lambda: outbox.send(messages))

    def _with_outcome(self, job: Job, execution: Execution, failures: int | None) -> Job:
        if failures is None or execution.finished_at is None:
            return job
        outcome = Outcome(
            status=execution.status,
            at=execution.finished_at,
            execution_id=execution.id,
            scheduled_at=execution.scheduled_at,
            consecutive_failures=failures,
        )
        return replace(job, outcome=outcome)

    def _pause_after_failures(self, job: Job, execution: Execution, failures: int) -> Job:
        """Pause the job once `policy.pause_after_failures` of its executions in a row have failed (a
        job resumed while it still fails is paused again at its next failure). Returns the job as it
        now stands."""
        limit = job.policy.pause_after_failures
        if limit is None or execution.status is not ExecutionStatus.FAILED or failures < limit:
            return job
        error = (execution.error or "").strip()[:200]
        note = (
            f"paused automatically after {failures} consecutive failed executions "
            f"(policy.pause_after_failures {limit}); the last, {execution.id}: {error}"
        )
        current: Job | None = job
        for _ in range(PAUSE_ATTEMPTS):
            if current is None or current.status is not JobStatus.ACTIVE:
                return job if current is None else replace(current, outcome=job.outcome)
            now = self._clock.now()
            self._store.changes.note(current.id, dispatched_runs(current, now, self._sent_ahead))
            try:
                paused = self._store.jobs.update(
                    current,
                    pausing.pause_changes(current, now, note),
                    allowed_statuses=[JobStatus.ACTIVE],
                    schedule_version=current.schedule_version,
                )
            except LostRace:
                current = self._store.jobs.get(job.id)  # changed meanwhile (a run moved it on): again
                continue
            metrics.add_metric(name=JOBS_AUTO_PAUSED, unit="Count", value=1)
            logger.warning("job paused after failures", extra={"job_id": job.id, "failures": failures})
            return replace(paused, outcome=job.outcome)
        return job

    def _persist(self, write: Callable[[], _T]) -> _T:
        return persist(write, self._clock, self._rng)


def persist(write: Callable[[], _T], clock: Clock, rng: random.Random) -> _T:
    """A write that must happen (an outcome: losing it would mean running the task again), riding out
    throttling for up to PERSIST_SECONDS, backing off with jitter, before giving the message back."""
    until = clock.now() + timedelta(seconds=PERSIST_SECONDS)
    attempt = 0
    while True:
        try:
            return write()
        except RetryableStoreError:
            pause = min(PERSIST_MAX_BACKOFF_SECONDS, 0.2 * 2**attempt) * (0.5 + rng.random() / 2)
            if clock.now() + timedelta(seconds=pause) > until:
                raise
            clock.sleep(pause)
            attempt += 1
