"""The domain records: jobs, executions, due markers and their rules. Plain Python, no AWS."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from punctual.schedules import RateSchedule, Schedule, _Schedule, is_recurring, next_run, rate_anchor
from punctual.timefmt import to_epoch_ms
from punctual.validation import JSON_NUMBER


class JobStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


class ExecutionStatus(StrEnum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATUSES

    @property
    def ran_to_end(self) -> bool:
        """Final, having run (SUCCEEDED or FAILED); a skipped execution (CANCELLED) did not."""
        return self in RAN_TO_END

    @property
    def under_way(self) -> bool:
        """Started and not ended: RUNNING, or RETRYING between attempts."""
        return self in UNDER_WAY


FINAL_STATUSES = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED})
RAN_TO_END = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED})
UNDER_WAY = frozenset({ExecutionStatus.RUNNING, ExecutionStatus.RETRYING})

SCHEDULE_ADAPTER: TypeAdapter[_Schedule] = TypeAdapter(Schedule)


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter between attempts of one execution."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: Annotated[int, JSON_NUMBER] = Field(default=3, ge=1, le=10)
    backoff_seconds: Annotated[float, JSON_NUMBER] = Field(default=2, ge=0, le=3600)
    max_backoff_seconds: Annotated[float, JSON_NUMBER] = Field(default=300, ge=0, le=12 * 3600)

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based): half fixed, half jitter."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * (2 ** (attempt - 1)))
        draw = (rng or random).random()
        return ceiling / 2 + draw * ceiling / 2


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    id: str
    job_id: str
    owner: str
    scheduled_at: datetime
    status: ExecutionStatus
    schedule_version: int
    manual: bool = False
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness_ms: int | None = None
    error: str | None = None
    result: Any = None
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class Job:
    id: str
    owner: str
    name: str
    status: JobStatus
    task: TaskSpec
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
    # A recurring job's most recently enqueued occurrence: next_run_at already points past it.
    queued_run_at: datetime | None = None
    # A paused one-time job: the version it ran under before the pause, whose execution, if one is
    # under way, may still end while the job is paused.
    paused_version: int | None = None
    # When that execution ended (the job paused): it ran, so resuming completes the job rather than
    # running it again, even once the execution has expired from the history.
    ran_at: datetime | None = None
    last_execution: Execution | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def recurring(self) -> bool:
        return is_recurring(self.schedule)

    def upcoming_run(self, now: datetime) -> datetime | None:
        """The next run as users see it: an enqueued occurrence still counts until its instant."""
        if self.status is not JobStatus.ACTIVE:
            return self.next_run_at
        if self.queued_run_at is not None and self.queued_run_at > now:
            return self.queued_run_at
        return self.next_run_at


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


def execution_id_for(job_id: str, scheduled_at: datetime, schedule_version: int) -> str:
    """Deterministic, so that materialising the same occurrence twice yields the same execution."""
    return f"{job_id}.{to_epoch_ms(scheduled_at):x}.{schedule_version}"


def manual_execution_id(job_id: str, scheduled_at: datetime, token: str) -> str:
    return f"{job_id}.{to_epoch_ms(scheduled_at):x}.r{token}"


def first_run(schedule: _Schedule, now: datetime, anchor: datetime | None) -> datetime | None:
    """When a job with this schedule, created or resumed at `now`, first runs."""
    if not is_recurring(schedule):
        at = next_run(schedule, now)
        return None if at is None else max(at, now)
    return next_run(schedule, now, anchor)


def anchor_for(schedule: _Schedule, created_at: datetime) -> datetime | None:
    return rate_anchor(schedule, created_at) if isinstance(schedule, RateSchedule) else None


def next_after(job: Job, scheduled_at: datetime) -> datetime | None:
    """The recurring job's occurrence after the one at `scheduled_at`."""
    if not job.recurring:
        return None
    return next_run(job.schedule, scheduled_at + timedelta(milliseconds=1), job.anchor_at)


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


def completes_job(job: Job, execution: Execution) -> bool:
    """Whether this execution reaching a final status completes its job: one that ran (a skipped one,
    CANCELLED, did not) and was not run by hand."""
    if execution.manual or execution.status is ExecutionStatus.CANCELLED:
        return False
    if not job.recurring:
        return True
    return job.final_execution_id == execution.id
