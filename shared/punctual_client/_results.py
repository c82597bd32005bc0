"""What the API answers, typed: the fields a program reads most, as Python values, and the whole
answer in `raw` (a field of a newer API than this client is there too)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from punctual.platform.timefmt import parse_rfc3339


def _time(value: Any) -> datetime | None:
    return parse_rfc3339(str(value)) if value else None


@dataclass(frozen=True)
class Execution:
    """One run of a job (docs/api.md, Execution)."""

    id: str
    job_id: str
    status: str  # QUEUED, RUNNING, RETRYING, SUCCEEDED, FAILED, CANCELLED, SKIPPED...
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    lateness_ms: float | None
    error: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    FINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"})

    @property
    def finished(self) -> bool:
        return self.status in self.FINAL

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Execution:
        return cls(
            id=str(body["id"]),
            job_id=str(body.get("job_id") or ""),
            status=str(body.get("status") or ""),
            scheduled_at=_time(body.get("scheduled_at")),
            started_at=_time(body.get("started_at")),
            finished_at=_time(body.get("finished_at")),
            attempts=int(body.get("attempts") or 0),
            lateness_ms=body.get("lateness_ms"),
            error=body.get("error"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Job:
    """A job (docs/api.md, Job): its schedule and task as the API gives them."""

    id: str
    name: str | None
    status: str  # ACTIVE, PAUSED, CANCELLED, COMPLETED
    schedule: Mapping[str, Any]
    task: Mapping[str, Any] | str  # a task, or the name of one of your named tasks
    tags: Mapping[str, str]
    next_run_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    last_execution: Execution | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> Job:
        last = body.get("last_execution")
        given = body.get("task")
        task: Mapping[str, Any] | str = given if isinstance(given, str) else dict(given or {})
        return cls(
            id=str(body["id"]),
            name=body.get("name"),
            status=str(body.get("status") or ""),
            schedule=dict(body.get("schedule") or {}),
            task=task,
            tags=dict(body.get("tags") or {}),
            next_run_at=_time(body.get("next_run_at")),
            created_at=_time(body.get("created_at")),
            updated_at=_time(body.get("updated_at")),
            last_execution=Execution.from_api(last) if isinstance(last, dict) else None,
            raw=dict(body),
        )
