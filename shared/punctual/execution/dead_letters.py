"""Dead letters: executions whose message exhausted its deliveries, listed and redriven by their owner.

The dead-letter queue's handler consumes each message as it arrives (`dead_letter`): it ends the
execution FAILED (marked `dead_lettered`) and keeps a record of it under its job's owner
(`RunHooks.dead_lettered`), so that the queue itself stays empty (its alarm says when the handler cannot keep up) and each owner
sees only their own. Redriving one puts its execution back to QUEUED and sends its message again: the
same execution (the same `X-Punctual-Execution-Id`), its attempts so far still counted, is run once
more as if its message had just come, and the record goes. A run its job would not make now is
not sent (the worker would only cancel it): a paused job's run by hand waits for the job to be
resumed, its record kept; a cancelled job's run, or a scheduled run its job was paused, resumed or
rescheduled since, never would, and its record goes (retrying the execution runs it anew).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from punctual.domain.errors import LostRace, UnreadableItem
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import JobStatus, completes_job, skip_reason
from punctual.domain.work import WorkItem
from punctual.execution import pausing
from punctual.execution.hooks import RunHooks
from punctual.execution.run_records import unstored_execution
from punctual.platform.clock import Clock
from punctual.platform.observability import DEAD_LETTERED, EXECUTIONS_FAILED, logger, metrics
from punctual.ports.pages import Page
from punctual.ports.queue import WorkQueue
from punctual.ports.store import Store

MAX_REDRIVE = 100


class Redriven(StrEnum):
    REDRIVEN = "redriven"  # queued again
    NOT_FOUND = "not_found"  # no such dead letter of this owner (or redriven already)
    GONE = "gone"  # its execution has expired from the history: nothing to run (the record is dropped)
    NOT_DEAD_LETTERED = "not_dead_lettered"  # its execution is no longer FAILED by the handler
    # Its job is paused: resume it, then redrive (a run by hand; the record stays).
    JOB_PAUSED = "job_paused"
    # Its job would never run it (cancelled; or paused, resumed or rescheduled since this scheduled
    # run was queued): the worker would cancel it. The record goes; retrying the execution runs it
    # as a new one.
    JOB_CANCELLED = "job_cancelled"
    SUPERSEDED = "superseded"
    FAILED = "failed"  # could not be sent: try again (the record stays)


@dataclass(frozen=True)
class RedriveResult:
    execution_id: str
    result: Redriven


class DeadLetters:
    def __init__(self, store: Store, queue: WorkQueue, clock: Clock) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock

    def page(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        return self._store.dead_letters.page(owner, limit, start_key)

    def redrive(self, owner: str, execution_ids: Sequence[str]) -> list[RedriveResult]:
        return [
            RedriveResult(execution_id, self._redrive_one(owner, execution_id))
            for execution_id in execution_ids
        ]

    def _redrive_one(self, owner: str, execution_id: str) -> Redriven:
        letter = self._store.dead_letters.get(owner, execution_id)
        if letter is None:
            return Redriven.NOT_FOUND
        execution = self._store.executions.get(letter.job_id, letter.scheduled_at, letter.execution_id)
        job = self._store.jobs.get(letter.job_id)
        if execution is None or job is None:
            self._store.dead_letters.delete(owner, execution_id)
            return Redriven.GONE
        # (what the worker would do with it: a run its job would not make is not sent)
        if job.status is JobStatus.PAUSED and execution.manual:
            return Redriven.JOB_PAUSED
        if skip_reason(job, execution) is not None:
            self._store.dead_letters.delete(owner, execution_id)
            return Redriven.JOB_CANCELLED if job.status is JobStatus.CANCELLED else Redriven.SUPERSEDED
        try:
            # QUEUED first: a message naming a FAILED execution would be dropped as a duplicate.
            self._store.executions.requeue_dead_lettered(execution, self._clock.now())
        except LostRace:
            self._store.dead_letters.delete(owner, execution_id)
            return Redriven.NOT_DEAD_LETTERED
        item = WorkItem(
            job_id=letter.job_id,
            execution_id=letter.execution_id,
            scheduled_at=letter.scheduled_at,
            schedule_version=execution.schedule_version,
            manual=execution.manual,
        )
        if self._queue.send([(item, 0)]):
            # Left QUEUED with its record: redriving it again sends it (a QUEUED one may be requeued).
            logger.warning("redrive could not send the message", extra={"execution_id": execution_id})
            return Redriven.FAILED
        self._store.dead_letters.delete(owner, execution_id)
        logger.info("dead letter redriven", extra={"execution_id": execution_id, "job_id": letter.job_id})
        return Redriven.REDRIVEN


def dead_letter(store: Store, clock: Clock, item: WorkItem, hooks: RunHooks | None = None) -> None:
    """A message that exhausted its receives: its execution fails (marked dead-lettered), and a
    one-time job completes; with a hooks, it is kept for its owner to redrive, and notified."""
    try:
        stored = store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
    except UnreadableItem:
        # Leave the message on the dead-letter queue (its retention, 14 days) for a version that can
        # read the execution: failing here keeps it there.
        logger.error("dead-lettered execution cannot be read; the message stays on the dead-letter queue")
        raise
    if stored is not None and stored.status.is_final:
        # Ended already (the last delivery's worker died after recording it, say): its job may not
        # have been completed yet.
        ended: Execution = stored
    else:
        execution = stored or unstored_execution(
            item, store.jobs.get(item.job_id), clock.now(), store.retention
        )
        if execution is None:
            return
        try:
            ended = store.executions.give_up(
                execution,
                status=ExecutionStatus.FAILED,
                finished_at=clock.now(),
                error="gave up: the message exhausted its deliveries (dead-letter queue)",
                dead_lettered=True,
            )
        except LostRace:
            return
        metrics.add_metric(name=DEAD_LETTERED, unit="Count", value=1)
        metrics.add_metric(name=EXECUTIONS_FAILED, unit="Count", value=1)
        logger.warning("execution dead-lettered", extra={"execution_id": execution.id})
    job = store.jobs.get(item.job_id)
    if job is not None and hooks is not None:
        hooks.dead_lettered(job, ended)
    elif job is not None and completes_job(job, ended):
        pausing.complete_job(store, job, ended)
