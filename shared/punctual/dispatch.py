"""Dispatch: turn due markers into queued executions. Shared by the scanner and the API's hand-off.

For each marker, in an order that survives a crash at any step:
1. store the execution as QUEUED (idempotent: its id is derived from the occurrence);
2. for a recurring job, file the next occurrence's marker and move the job's next_run_at (the chain
   continues whatever happens to this execution);
3. send the message, held by DelaySeconds until its instant;
4. delete the marker.
A crash before 4 leaves the marker, so the next tick repeats the steps: 1 and 2 change nothing the
second time, and 3 sends a duplicate that the worker recognises by the execution's status.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from punctual.clock import Clock
from punctual.errors import LostRace
from punctual.models import (
    DueMarker,
    Execution,
    ExecutionStatus,
    Job,
    marker_for,
    next_after,
    skip_reason,
)
from punctual.observability import logger
from punctual.queue import WorkItem, WorkQueue, delay_seconds
from punctual.store import Store


@dataclass
class DispatchResult:
    enqueued: list[DueMarker] = field(default_factory=list)
    skipped: list[DueMarker] = field(default_factory=list)
    failed: list[DueMarker] = field(default_factory=list)


class Dispatcher:
    def __init__(self, store: Store, queue: WorkQueue, clock: Clock, *, parallelism: int = 16) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._parallelism = parallelism

    def dispatch(self, markers: Sequence[DueMarker]) -> DispatchResult:
        result = DispatchResult()
        if not markers:
            return result
        jobs = self._store.get_jobs(m.job_id for m in markers)
        runnable: list[tuple[DueMarker, Job]] = []
        for marker in markers:
            job = jobs.get(marker.job_id)
            reason = skip_reason(job, marker)
            if reason is None and job is not None:
                runnable.append((marker, job))
            else:
                logger.debug("dropping marker", extra={"execution_id": marker.execution_id, "reason": reason})
                result.skipped.append(marker)

        prepared = self._prepare_all(runnable)
        ready = [marker for marker, ok in zip((m for m, _ in runnable), prepared, strict=True) if ok]
        result.failed.extend(m for (m, _), ok in zip(runnable, prepared, strict=True) if not ok)

        now = self._clock.now()
        items = {
            m.execution_id: (
                WorkItem(m.job_id, m.execution_id, m.scheduled_at),
                delay_seconds(m.scheduled_at, now),
            )
            for m in ready
        }
        unsent = {item.execution_id for item in self._queue.send(list(items.values()))}
        for marker in ready:
            (result.failed if marker.execution_id in unsent else result.enqueued).append(marker)

        # Markers that were sent, or that must not run, are done with; failures stay for the next tick.
        self._store.delete_markers(result.enqueued + result.skipped)
        return result

    def _prepare(self, pair: tuple[DueMarker, Job]) -> bool:
        """Steps 1 and 2 for one marker. False when they could not be completed (retry next tick)."""
        marker, job = pair
        try:
            self._store.create_execution(
                Execution(
                    id=marker.execution_id,
                    job_id=job.id,
                    owner=job.owner,
                    scheduled_at=marker.scheduled_at,
                    status=ExecutionStatus.QUEUED,
                    schedule_version=marker.schedule_version,
                    manual=marker.manual,
                    created_at=self._clock.now(),
                )
            )
            if job.recurring and not marker.manual:
                self._advance(job, marker)
        except Exception:
            logger.exception("could not prepare execution", extra={"execution_id": marker.execution_id})
            return False
        return True

    def _advance(self, job: Job, marker: DueMarker) -> None:
        following = next_after(job, marker.scheduled_at)
        if following is not None:
            self._store.put_marker(marker_for(job.id, following, marker.schedule_version))
        if job.next_run_at is not None and following is not None and job.next_run_at >= following:
            return  # already advanced by an earlier, interrupted dispatch of this marker
        changes: dict[str, object] = {"next_run_at": following, "queued_run_at": marker.scheduled_at}
        if following is None:
            changes["final_execution_id"] = marker.execution_id
        try:
            self._store.update_job(
                job, changes, allowed_statuses=[job.status], schedule_version=marker.schedule_version
            )
        except LostRace:
            # The job was paused, cancelled or rescheduled meanwhile: that change filed its own marker
            # and the worker will skip this execution; the marker just filed is dropped as superseded.
            pass

    def _prepare_all(self, pairs: list[tuple[DueMarker, Job]]) -> list[bool]:
        if len(pairs) <= 1:
            return [self._prepare(p) for p in pairs]
        with ThreadPoolExecutor(max_workers=min(self._parallelism, len(pairs))) as pool:
            return list(pool.map(self._prepare, pairs))
