"""What the worker and the dead-letter handler record of a run besides its status changes.

The execution a message names before it is stored, its lateness, a result kept small enough to store
and the fields of an attempt's log line: plain functions of their arguments, shared by the worker
(punctual.execution.worker) and the dead-letter handler (punctual.execution.dead_letters), which read no store here.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, TaskSpec
from punctual.domain.validation import json_problem
from punctual.domain.work import WorkItem
from punctual.platform.observability import logger
from punctual.tasks import MAX_RESULT_DEPTH


def unstored_execution(
    item: WorkItem, job: Job | None, now: datetime, retention: timedelta
) -> Execution | None:
    """The execution a message names that is not stored yet (the scanner stores none: its first claim
    does), as QUEUED; None if it cannot be: its job is gone, the message predates the fields, or it is
    older than the history's retention (its record may have expired after it ran: running it anew
    would repeat it)."""
    if item.schedule_version is None or job is None or now - item.scheduled_at >= retention:
        logger.warning(
            "no such execution; dropping message",
            extra={"execution_id": item.execution_id, "job_exists": job is not None},
        )
        return None
    return Execution(
        id=item.execution_id,
        job_id=item.job_id,
        owner=job.owner,
        scheduled_at=item.scheduled_at,
        status=ExecutionStatus.QUEUED,
        schedule_version=item.schedule_version,
        manual=item.manual,
        created_at=now,
    )


def lateness_ms(execution: Execution, started: datetime) -> int:
    return int((started - execution.scheduled_at) / timedelta(milliseconds=1))


def attempt_log(job: Job, execution: Execution) -> dict[str, Any]:
    """The fields of an attempt's log line."""
    return {
        "job_id": job.id,
        "execution_id": execution.id,
        "attempt": execution.attempts,
        "lateness_ms": execution.lateness_ms,
        "task": job.task.type if isinstance(job.task, TaskSpec) else job.task.name,
    }


def ms(duration: timedelta) -> int:
    return round(duration / timedelta(milliseconds=1))


def truncate(result: Any, max_bytes: int) -> Any:
    """Keep a result small and readable: if its JSON is too long, or cannot be stored as JSON (nested
    too deep, a number no float holds, an unpaired surrogate), store a truncated string of it instead."""
    if result is None:
        return None
    unfit = json_problem(result, MAX_RESULT_DEPTH)
    try:
        text = json.dumps(result, default=str)  # (ASCII: a surrogate is escaped)
    except RecursionError:
        text = f"(a result nested deeper than {MAX_RESULT_DEPTH} levels)"
    if not unfit and len(text.encode()) <= max_bytes:
        return result
    return {"truncated": True, "preview": text.encode()[:max_bytes].decode("utf-8", errors="ignore")}
