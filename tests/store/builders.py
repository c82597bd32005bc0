"""Jobs, executions and markers to store in the contract tests, at fixed instants."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.domain.executions import Execution, ExecutionStatus, execution_id_for
from punctual.domain.models import DueMarker, Job, JobStatus, TaskSpec
from punctual.domain.policies import RetryPolicy
from punctual.domain.schedules import AtSchedule

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OWNER = "alice"


def job(job_id: str = "job_1", *, created: datetime = NOW, **changes: Any) -> Job:
    at = created + timedelta(minutes=5)
    base = Job(
        id=job_id,
        owner=OWNER,
        name=job_id,
        status=JobStatus.ACTIVE,
        task=TaskSpec(type="noop"),
        schedule=AtSchedule(type="at", at=at),
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=created,
        updated_at=created,
        next_run_at=at,
    )
    return replace(base, **changes)


def execution(of: Job, *, at: datetime | None = None, **changes: Any) -> Execution:
    scheduled = at or of.next_run_at or NOW
    base = Execution(
        id=execution_id_for(of.id, scheduled, of.schedule_version),
        job_id=of.id,
        owner=of.owner,
        scheduled_at=scheduled,
        status=ExecutionStatus.QUEUED,
        schedule_version=of.schedule_version,
        created_at=NOW,
    )
    return replace(base, **changes)


def marker(of: Job, at: datetime, **changes: Any) -> DueMarker:
    base = DueMarker(of.id, execution_id_for(of.id, at, of.schedule_version), at, of.schedule_version)
    return replace(base, **changes)
