"""Jobs and due markers: a job, its status, task and outcome; when it runs (its first run, the one
after a run, spread by a flexible window), whether a run may go ahead, whether it completes its job,
and how users see a job beside its last execution. Plain Python, no AWS.

Executions: `punctual.domain.executions`; the rules a job is given (retry, policy, notify rules):
`punctual.domain.policies`."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from punctual.domain.cron.bounds import CronBoundExceeded
from punctual.domain.executions import LEASE_MARGIN, Execution, ExecutionStatus, execution_id_for
from punctual.domain.policies import JobPolicy, NotifyRule, RetryPolicy
from punctual.domain.schedules import (
    LATEST_INSTANT,
    RateSchedule,
    Schedule,
    _Schedule,
    is_recurring,
    next_run,
    occurrences,
    rate_anchor,
)
from punctual.platform.signing import SigningKeys
from punctual.platform.timefmt import to_epoch_ms


class JobStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


SCHEDULE_ADAPTER: TypeAdapter[_Schedule] = TypeAdapter(Schedule)


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


class TaskRef(BaseModel):
    """A job's named task (the owner's, by name) and the parameters the job gives it: merged over
    the task's defaults when it runs, so that a change to the task applies to every job using it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


# The spec a worker runs for a named task it could not resolve (gone, or the job's parameters no
# longer fit its schema): it fails at once, saying why (`punctual.tasks.run`). Not a type anyone names.
UNRESOLVED_TASK = "(unresolved)"


@dataclass(frozen=True)
class Outcome:
    """How the job's latest execution to run to its end (SUCCEEDED or FAILED) ended, kept on the job
    item when it finishes so that lists show it and filter by it without reading executions."""

    status: ExecutionStatus
    at: datetime  # when it finished
    execution_id: str
    scheduled_at: datetime
    consecutive_failures: int = 0


# A job's timeout when it gives none (the API's default; a job with a named task may take the task's).
DEFAULT_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class Job:
    id: str
    owner: str
    name: str
    status: JobStatus
    task: TaskSpec | TaskRef
    schedule: _Schedule
    retry: RetryPolicy
    timeout_seconds: int
    created_at: datetime
    updated_at: datetime
    next_run_at: datetime | None = None
    # Bumped whenever the schedule, pause or resume changes which occurrences are valid: executions
    # materialised under an older version are skipped.
    schedule_version: int = 1
    # A rate schedule's first run, fixed at creation so that later occurrences do not drift.
    anchor_at: datetime | None = None
    # The execution after which a recurring job has no more occurrences.
    final_execution_id: str | None = None
    # A recurring job's most recently enqueued occurrence: next_run_at already points past it. A paused
    # one-time job's run from before its pause (its next_run_at then), which a pack may still run.
    queued_run_at: datetime | None = None
    # A recurring job resumed or rescheduled: when its schedule's current version began, so that its
    # runs from then on count (queued_runs), none from before. None: from its creation.
    runs_since: datetime | None = None
    # A paused one-time job: the version it ran under before the pause, whose execution, if one is
    # under way, may still end while the job is paused.
    paused_version: int | None = None
    # When that execution ended (the job paused): it ran, so resuming completes the job rather than
    # running it again, even once the execution has expired from the history.
    ran_at: datetime | None = None
    last_execution: Execution | None = None
    tags: dict[str, str] = field(default_factory=dict)
    policy: JobPolicy = field(default_factory=JobPolicy)
    # Scheduled occurrences dispatched so far (for `policy.max_runs`).
    runs_dispatched: int = 0
    # Of "retry" and "timeout_seconds", those a job with a named task takes from the task when it
    # runs (it gave none of its own): its `retry` and `timeout_seconds` then hold the defaults.
    inherits: frozenset[str] = frozenset()
    # The version of its named task this copy was resolved with (the worker's; None otherwise).
    task_version: int | None = None
    outcome: Outcome | None = None
    notify: tuple[NotifyRule, ...] = ()
    # Write-only: never shown. None: the job signs nothing.
    signing: SigningKeys | None = None
    # Why and when a PAUSED job was paused (by its owner, or by `policy.pause_after_failures`).
    pause_note: str | None = None
    paused_at: datetime | None = None
    # The batch (POST /jobs/batch) whose one list entry lists this job in its owner's list, instead of
    # an entry of its own: while nothing but its run's end (and a failure's flag) has written it, and
    # it expires before that entry does (store/jobs.py). None: listed on its own.
    listed_in: str | None = None
    # One more with every change through the API (store/jobs.py): what If-Match names, so that a
    # change read-modify-written by one client does not undo another's.
    revision: int = 1

    @property
    def recurring(self) -> bool:
        return is_recurring(self.schedule)

    def upcoming_run(self, now: datetime) -> datetime | None:
        """The next run as users see it: an enqueued occurrence still counts until its instant."""
        if self.status is not JobStatus.ACTIVE:
            return self.next_run_at
        queued = self.queued_run_at
        if queued is None or queued <= now:
            return self.next_run_at
        return next(iter(queued_runs(self, now)), queued)

    @property
    def task_name(self) -> str | None:
        return self.task.name if isinstance(self.task, TaskRef) else None


@dataclass(frozen=True)
class JobStamp:
    """A job's status, schedule version and time of last change: whether it changed since a read."""

    status: JobStatus
    schedule_version: int
    updated_at: datetime

    @staticmethod
    def of(job: Job) -> JobStamp:
        return JobStamp(job.status, job.schedule_version, job.updated_at)


@dataclass(frozen=True)
class DueMarker:
    """The durable intent to enqueue one execution, filed under its minute bucket and shard."""

    job_id: str
    execution_id: str
    scheduled_at: datetime
    schedule_version: int
    manual: bool = False
    # The shard it is filed under, once read back from the store.
    shard: int | None = None
    # Filed by an API request that enqueues it itself (due before the next tick): until this instant
    # the scanner leaves it alone, so the two do not both send it.
    handoff_until: datetime | None = None
    # Filed under its shard's "soon" partition rather than its minute's bucket: a marker due before a
    # scanner tick could have read its bucket (the API's hand-offs, and anything filed that close to
    # its instant). The scanner reads those partitions whole and deletes what it sends; it reads each
    # minute's buckets once, up to its position, and never deletes from them (they expire).
    soon: bool = False
    # When an API request filed it, before the job write it goes with (a new job, a resume, a new
    # schedule): until that write lands the marker does not match its job, and a dispatch that reads
    # it meanwhile leaves it for later instead of dropping it (`storing`). None: filed by a dispatch
    # (a recurring job's next occurrence, whose job already matches) or by an earlier version.
    filed_at: datetime | None = None
    # Read back from an item it shares with the other markers of its instant filed in the same request
    # (a batch): that item's place in its bucket, where a scanner stopped at it reads again. None: its
    # own item, at `place_of`.
    place: str | None = None


def first_run(
    schedule: _Schedule, now: datetime, anchor: datetime | None, job_id: str = "", window: int = 0
) -> datetime | None:
    """When a job with this schedule, created or resumed at `now`, first runs (spread by its flexible
    window, `spread`)."""
    if not is_recurring(schedule):
        at = next_run(schedule, now)
        return None if at is None else max(at, now)
    return spread(job_id, schedule, next_run(schedule, now, anchor), anchor, window)


def anchor_for(schedule: _Schedule, created_at: datetime) -> datetime | None:
    return rate_anchor(schedule, created_at) if isinstance(schedule, RateSchedule) else None


def next_after(job: Job, scheduled_at: datetime, *, steps: int | None = None) -> datetime | None:
    """The recurring job's occurrence after the one at `scheduled_at` (spread by its flexible window:
    a spread instant stays before the next nominal one, so the first nominal run after it is the
    next), or None once `max_runs` occurrences have been dispatched with this one. `steps`: the cron
    budget for finding it (the scheduler's chain gives cron.CHAIN_BUDGET; a request's reads keep
    cron.BUDGET)."""
    if not job.recurring:
        return None
    limit = job.policy.max_runs
    if limit is not None and job.runs_dispatched + 1 >= limit:
        return None
    nominal = next_run(job.schedule, scheduled_at + timedelta(milliseconds=1), job.anchor_at, steps=steps)
    return spread(job.id, job.schedule, nominal, job.anchor_at, job.policy.flexible_window_seconds)


def spread(
    job_id: str, schedule: _Schedule, nominal: datetime | None, anchor: datetime | None, window: int
) -> datetime | None:
    """A recurring run moved by a deterministic share of the flexible window, kept a second before
    the following nominal run, so the order of runs and `next_after` hold."""
    if nominal is None or window <= 0 or not is_recurring(schedule):
        return nominal
    # (the last run before LATEST_INSTANT is spread short of it too: no run is one a request may not name)
    try:
        following = next_run(schedule, nominal + timedelta(milliseconds=1), anchor) or LATEST_INSTANT
    except CronBoundExceeded:
        # Only whether the following run falls within the window matters, and one that takes more
        # than a computation's bound to find is decades away (a longer window than any allowed).
        following = LATEST_INSTANT
    room = min(window, int((following - nominal).total_seconds()) - 1)
    if room <= 0:
        return nominal
    digest = hashlib.sha256(f"{job_id}|{to_epoch_ms(nominal)}".encode()).digest()
    return nominal + timedelta(seconds=int.from_bytes(digest[:8], "big") % (room + 1))


def marker_for(job_id: str, scheduled_at: datetime, schedule_version: int) -> DueMarker:
    """The marker of a scheduled (not manual) occurrence."""
    return DueMarker(
        job_id=job_id,
        execution_id=execution_id_for(job_id, scheduled_at, schedule_version),
        scheduled_at=scheduled_at,
        schedule_version=schedule_version,
    )


def skip_reason(job: Job | None, marker_or_execution: DueMarker | Execution) -> str | None:
    """Why an execution must not run (or be enqueued) now, or None when it may."""
    if job is None:
        return "job no longer exists"
    if job.status is JobStatus.CANCELLED:
        return "job cancelled"
    if job.status is JobStatus.PAUSED:
        return "job paused"  # nothing runs until resumed, extra runs included
    if marker_or_execution.manual:
        return None
    if marker_or_execution.schedule_version != job.schedule_version:
        return "superseded: the job was rescheduled, or paused and resumed, since it was queued"
    return None


# How long after filing a marker a request may still be storing the job write that goes with it: API
# Gateway and the API function give up on a request after 29 s (handoff.HANDOFF_CLAIM is as long).
STORING_SECONDS = 30


def storing(job: Job | None, marker: DueMarker, now: datetime) -> bool:
    """Whether a marker that does not match its job (`skip_reason`) may still come to: the request
    that filed it files the marker first and writes the job after (so that no stored job is ever
    without its marker), and may not have written it yet. Nothing has written the job since the
    marker was filed, and the request may still be running. Otherwise the marker is superseded, or
    its request died before storing the job: it is dropped."""
    if marker.filed_at is None or (now - marker.filed_at).total_seconds() >= STORING_SECONDS:
        return False
    return job is None or job.updated_at <= marker.filed_at


# A pack fired this long after its instant or later reads its members' jobs again at its start
# instead of the change records (execution.firing): records are kept only for runs that close.
CHANGE_RECORDS_LATE = timedelta(seconds=60)


def dispatched_runs(job: Job, now: datetime, ahead: timedelta) -> list[datetime]:
    """The instants of this job's runs that a pack may start after now under its change records: its
    next run and a recurring job's occurrences in the queue (`queued_runs`, which next_run_at has
    moved past), each if due within `ahead` (how far ahead of its instant a message may be sent) and
    not more than CHANGE_RECORDS_LATE past."""
    runs = {job.next_run_at, *queued_runs(job, now - CHANGE_RECORDS_LATE)}
    return sorted(at for at in runs if at is not None and now - CHANGE_RECORDS_LATE < at <= now + ahead)


def runs_taken_back(job: Job, now: datetime) -> dict[str, int]:
    """The change to `runs_dispatched` when a new schedule version (a pause, a resume, a new
    schedule) makes the occurrences queued after `now` stale: they will be cancelled, not run, so
    they no longer count toward `policy.max_runs`. Empty when nothing is taken back."""
    if not job.recurring or job.policy.max_runs is None or not job.runs_dispatched:
        return {}
    stale = len(queued_runs(job, now))
    return {"runs_dispatched": max(0, job.runs_dispatched - stale)} if stale else {}


def queued_runs(job: Job, after: datetime) -> list[datetime]:
    """The job's runs after `after` that may be in the queue: a one-time job's enqueued run, and
    every occurrence of a recurring job up to the one enqueued last (`queued_run_at`). A tick may
    enqueue several occurrences ahead, and queued_run_at names only the last of them."""
    queued = job.queued_run_at
    if queued is None or queued <= after:
        return []
    if not job.recurring:
        return [queued]
    # A spread run comes at most its window after its nominal time: none before that is after `after`.
    # Nor one before the schedule's version began: the first run then was the first nominal one after.
    window = job.policy.flexible_window_seconds
    since = job.runs_since or job.created_at
    runs: list[datetime] = []
    for nominal in occurrences(job.schedule, max(after - timedelta(seconds=window), since), job.anchor_at):
        at = spread(job.id, job.schedule, nominal, job.anchor_at, window)
        if at is None or at >= queued:
            break
        if at > after:
            runs.append(at)
    return [*runs, queued]


# A batch's job's item expires this long after its run's instant and the retention, when its run
# ends in its batch's ends item (store/batch_ends.py); a run that ends later goes on its job's item.
BATCH_END_MARGIN = timedelta(days=1)
# And never sooner than this after its instant: a first attempt that failed is retried for up to 10
# attempts at most 12 hours apart, the last of which writes the job's own expiry.
BATCH_RETRIES_SPAN = timedelta(days=5)


def ends_in_batch(job: Job) -> bool:
    """Whether a job's scheduled run would end in its batch's ends item: a batch's one-time job, active
    and never changed since its creation, its task its own (a named task's is in use while its item
    says so), without notifications or policies (which read and write its item at the end). (Of the
    job as stored: a named task resolved for its run is its own no more. Not of what it shows of its
    history: a run by hand is no change, and the API and the worker must judge alike.)"""
    return (
        job.listed_in is not None
        and isinstance(job.task, TaskSpec)
        and not job.recurring
        and job.status is JobStatus.ACTIVE
        and job.next_run_at is not None
        and job.created_at == job.updated_at
        and not job.notify
        and job.policy.is_default
    )


def end_in_batch(job: Job, execution: Execution, now: datetime) -> bool:
    """Whether this run's end goes in its batch's ends item: a first attempt of its job's run that ends
    there (`ends_in_batch`), succeeded, and ended within BATCH_END_MARGIN of its instant."""
    return (
        ends_in_batch(job)
        and execution.status is ExecutionStatus.SUCCEEDED
        and execution.attempts == 1
        and not execution.manual
        and execution.scheduled_at == job.next_run_at
        and execution.schedule_version == job.schedule_version
        and now - execution.scheduled_at < BATCH_END_MARGIN
    )


def ran_on_job(job: Job | None, execution_id: str) -> bool:
    """Whether the job carries this execution, ended (a one-time job's run stored with its completion)."""
    run = None if job is None else job.last_execution
    return run is not None and run.id == execution_id and run.status.is_final


def completes_job(job: Job, execution: Execution) -> bool:
    """Whether this execution reaching a final status completes its job: one that ran (a skipped one,
    CANCELLED, did not) and was not run by hand."""
    if execution.manual or execution.status is ExecutionStatus.CANCELLED:
        return False  # (SKIPPED by the job's policy counts: the run's time came and went)
    if not job.recurring:
        return True
    return job.final_execution_id == execution.id


def in_flight(job: Job, now: datetime) -> Execution | None:
    """The job's scheduled run whose instant has come, as users see it while nothing of it is stored:
    RUNNING (a pack's member runs under its pack's lease and is stored at its end, its attempt, start
    and lateness with it). None when the job has no such run; the caller shows this only if no item
    of that execution is stored. (One-time: its `next_run_at`; recurring: the latest of its queued
    occurrences whose instant has come.)"""
    if job.status is not JobStatus.ACTIVE:
        return None
    # (only while its pack's lease may hold it: one still not stored by then is not under way)
    held = timedelta(seconds=job.timeout_seconds) + LEASE_MARGIN
    if job.recurring:
        # (the latest come of those queued: a later one may be in the queue too)
        come = [at for at in queued_runs(job, now - held) if at <= now]
        at = come[-1] if come else None
    else:
        at = job.next_run_at
    if at is None or not at <= now < at + held:
        return None
    return Execution(
        id=execution_id_for(job.id, at, job.schedule_version),
        job_id=job.id,
        owner=job.owner,
        scheduled_at=at,
        status=ExecutionStatus.RUNNING,
        schedule_version=job.schedule_version,
    )


def job_as_seen(job: Job) -> Job:
    """A job as users see it beside its last execution (`Job.last_execution`, read with it). The
    worker writes a run's end first and then the job's outcome (and, for its last run, its
    completion), so a read between the two would show a finished run beside a job that says nothing
    happened: the job is shown as that second write makes it (`punctual.execution.hooks.RunHooks.ended`)."""
    last = job.last_execution
    if last is None or not last.status.ran_to_end or last.finished_at is None:
        return job
    recorded = job.outcome
    if recorded is not None and (recorded.execution_id == last.id or recorded.at >= last.finished_at):
        return job  # recorded, or a run that ended after it is
    failures = 0
    if last.status is ExecutionStatus.FAILED:
        failures = 1 + (recorded.consecutive_failures if recorded is not None else 0)
    outcome = Outcome(
        status=last.status,
        at=last.finished_at,
        execution_id=last.id,
        scheduled_at=last.scheduled_at,
        consecutive_failures=failures,
    )
    seen = replace(job, outcome=outcome)
    if (
        job.status is JobStatus.ACTIVE
        and completes_job(job, last)
        and job.schedule_version == last.schedule_version
    ):
        return replace(seen, status=JobStatus.COMPLETED, next_run_at=None, queued_run_at=None)
    return seen


MAX_PAUSE_NOTE_CHARS = 500


def new_version() -> int:
    """A fresh schedule version. Random, not version + 1: a request that loses a race to another
    change must not share the winner's version, or the marker it filed first would stay valid. (None
    is 0: `NO_VERSION`; jobs of the first versions have 1.)"""
    return secrets.randbelow(2**52) + 2


NO_VERSION = 0
