"""Pausing a job while one of its runs is under way: the protocol, in one place.

A pause gives the job a fresh schedule version (`pause_changes`), so every execution filed before it
is stale, and a one-time job remembers the version it was paused from (`paused_version`). Then:
1. A worker that comes to run an execution of a paused job skips it (`skip_run`). A run already under
   way (RUNNING, or RETRYING between attempts) is cancelled in one transaction with a check that the
   job is still paused, so that a resume giving the job back this run's version (3) and the
   cancellation cannot both happen; the worker looks again if the check fails.
2. A run under way that ends anyway cannot complete its paused job (completion wants the job ACTIVE
   at the run's version): a one-time job paused from that run's version notes instead that it ran
   (`complete_job`), so that resuming it does not run it again.
3. Resuming a paused one-time job reads its run from before the pause (`run_before_pause`, after the
   job, consistently). One still under way goes on: the job takes back its version in one
   transaction that holds only while the run is still under way (`JobStore.resume_with_run`), and
   the run completes the job when it ends. A run under its pack's lease is stored only at its end:
   while that lease may hold it (`unstored_run_before_pause`), the transaction holds only while
   nothing of it is stored. One that ended is the job's run: nothing is left to run
   (`resumed_one_time_run`). Otherwise the job runs at its instant, or now, or never if its instant
   passed while it was paused.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus, in_flight, new_version, runs_taken_back
from punctual.domain.schedules import AtSchedule
from punctual.ports.store import Store


def pause_changes(job: Job, now: datetime, note: str | None) -> dict[str, Any]:
    """The changes that pause an ACTIVE job: nothing of it runs until resumed (a fresh schedule
    version makes every execution already filed stale), with a note saying why (or none)."""
    return {
        # (the occurrences queued after now will be cancelled: they do not count toward max_runs)
        **runs_taken_back(job, now),
        "status": JobStatus.PAUSED,
        "next_run_at": None,
        # A one-time job keeps its run's instant here: a run under its pack's lease is stored only at
        # its end, and a resume must find it under way (3, `unstored_run_before_pause`).
        "queued_run_at": None if job.recurring else job.next_run_at,
        "schedule_version": new_version(),
        # A one-time job's run under way may end while it is paused: it notes so on the job (2).
        "paused_version": None if job.recurring else job.schedule_version,
        "pause_note": note,
        "paused_at": now,
        "updated_at": now,
    }


def skip_run(
    store: Store,
    job: Job | None,
    execution: Execution,
    *,
    finished_at: datetime,
    reason: str,
    status: ExecutionStatus = ExecutionStatus.CANCELLED,
) -> None:
    """Skip an execution that must not run, if it is still as read (1); a run under way of a paused
    job only while the job is still paused. Raises LostRace otherwise."""
    if job is not None and job.status is JobStatus.PAUSED and execution.status.under_way:
        store.executions.skip_while_paused(execution, finished_at=finished_at, reason=reason, status=status)
    else:
        store.executions.skip(execution, finished_at=finished_at, reason=reason, status=status)


def complete_job(store: Store, job: Job, execution: Execution) -> int | None:
    """Complete a job whose last execution this was, its outcome recorded in the same write; returns
    the job's consecutive failures (None when no outcome was recorded). If the job was paused,
    cancelled or rescheduled meanwhile (or is gone), only the outcome is recorded, and a one-time
    job paused while this, its run, was under way notes that it ran (2). A run whose end was stored
    on its job's item completed the job in that write (`ExecutionRepository.put_end`): nothing more
    is written."""
    if execution.job_failures is not None:
        return execution.job_failures
    try:
        return store.jobs.complete(job, execution)
    except LostRace:
        if not job.recurring and not execution.manual:
            store.jobs.note_ran_while_paused(job, execution, execution.finished_at or execution.scheduled_at)
        return store.jobs.record_outcome(execution) if execution.status.ran_to_end else None


def run_before_pause(store: Store, job: Job) -> Execution | None:
    """A paused one-time job's scheduled run from before its pause, if it has one not noted as ended (3)."""
    if job.recurring or not job.paused_version or job.ran_at is not None:
        return None
    # (one stored on the job's item, with a completion: of a version before the job was revived)
    on_job = job.last_execution
    if on_job is not None and not on_job.manual and on_job.schedule_version == job.paused_version:
        return on_job
    return store.executions.scheduled_run(job.id, job.paused_version)


def unstored_run_before_pause(job: Job, now: datetime) -> Execution | None:
    """A paused one-time job's run from before its pause that nothing stored yet, while its pack's
    lease may hold it under way (its instant had come, within its timeout and the lease's margin):
    RUNNING, as the job's listing shows it (`models.in_flight`). None otherwise: it never started, or
    is stored (`run_before_pause` reads that)."""
    if job.recurring or not job.paused_version or job.ran_at is not None or job.queued_run_at is None:
        return None
    running = in_flight(
        replace(
            job, status=JobStatus.ACTIVE, next_run_at=job.queued_run_at, schedule_version=job.paused_version
        ),
        now,
    )
    return None if running is None or running.scheduled_at > (job.paused_at or now) else running


def resumed_one_time_run(job: Job, now: datetime, *, ran: bool = False) -> datetime | None:
    """When a resumed one-time job runs: never if it already ran (`ran`: its run from before the pause
    ended) or its instant passed while paused."""
    if ran or job.ran_at is not None:
        return None  # (its end noted on the job outlives the execution's record in the history)
    last = job.last_execution
    # (A job item without paused_version, paused before an upgrade, counts its last execution.)
    if last is not None and not last.manual and job.paused_version in (None, last.schedule_version):
        return None
    if isinstance(job.schedule, AtSchedule):
        return job.schedule.at if job.schedule.at >= now else None
    return now  # a "now" job paused before it ran
