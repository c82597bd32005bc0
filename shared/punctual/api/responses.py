"""Response models built from domain objects. Nothing here reads a clock: a route passes `now`,
read from the injected clock once per request."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel

from punctual.api.schemas import DeliveryOut, ExecutionOut, JobOut, OutcomeOut, SigningOut, TaskOut
from punctual.domain.executions import Delivery, Execution
from punctual.domain.models import Job, TaskRef
from punctual.domain.named_tasks import NamedTask
from punctual.platform.timefmt import to_rfc3339


def _iso(value: Any) -> str | None:
    return None if value is None else to_rfc3339(value)


def delivery_out(delivery: Delivery) -> DeliveryOut:
    return DeliveryOut(
        event=delivery.event,
        rule=delivery.rule,
        to=delivery.to,
        status=delivery.status,
        attempts=delivery.attempts,
        at=to_rfc3339(delivery.at),
        error=delivery.error,
        next_attempt_at=_iso(delivery.next_attempt_at),
    )


def execution_out(execution: Execution) -> ExecutionOut:
    return ExecutionOut(
        id=execution.id,
        job_id=execution.job_id,
        scheduled_at=to_rfc3339(execution.scheduled_at),
        status=execution.status,
        attempts=execution.attempts,
        manual=execution.manual,
        started_at=_iso(execution.started_at),
        finished_at=_iso(execution.finished_at),
        lateness_ms=execution.lateness_ms,
        error=execution.error,
        result=execution.result,
        next_attempt_at=_iso(execution.next_attempt_at),
        task_version=execution.task_version,
        retry_of=execution.retry_of,
        dead_lettered=execution.dead_lettered,
        notifications=[delivery_out(d) for d in execution.deliveries],
    )


def job_out(job: Job, now: datetime) -> JobOut:
    """`now` decides the next run shown (a paused job's, or one past its run limit, is none) and
    whether a rotated-out signing secret still signs."""
    return JobOut(
        id=job.id,
        name=job.name,
        status=job.status,
        task=job.task.name if isinstance(job.task, TaskRef) else job.task,
        params=job.task.params if isinstance(job.task, TaskRef) else None,
        tags=job.tags,
        schedule=job.schedule,  # type: ignore[arg-type]
        retry=None if "retry" in job.inherits else job.retry,
        timeout_seconds=None if "timeout_seconds" in job.inherits else job.timeout_seconds,
        policy=job.policy,
        next_run_at=_iso(job.upcoming_run(now)),
        created_at=to_rfc3339(job.created_at),
        updated_at=to_rfc3339(job.updated_at),
        last_execution=None if job.last_execution is None else execution_out(job.last_execution),
        outcome=None
        if job.outcome is None
        else OutcomeOut(
            status=job.outcome.status,
            at=to_rfc3339(job.outcome.at),
            execution_id=job.outcome.execution_id,
            consecutive_failures=job.outcome.consecutive_failures,
        ),
        notify=list(job.notify),
        signing=SigningOut(
            enabled=job.signing is not None,
            previous_valid_until=None
            if job.signing is None or job.signing.previous_until is None or job.signing.previous_until <= now
            else to_rfc3339(job.signing.previous_until),
        ),
        pause_note=job.pause_note,
        paused_at=_iso(job.paused_at),
        revision=job.revision,
    )


def task_out(task: NamedTask) -> TaskOut:
    return TaskOut(
        name=task.name,
        type=task.type,
        params=task.params,
        params_schema=task.params_schema,
        retry=task.retry,
        timeout_seconds=task.timeout_seconds,
        description=task.description,
        tags=task.tags,
        version=task.version,
        created_at=to_rfc3339(task.created_at),
        updated_at=to_rfc3339(task.updated_at),
    )


# An answer's items, as Lambda carries them, take at most this many bytes: Lambda answers at most 6 MiB
# (6,291,456 bytes), and the rest is left to the envelope (status, headers, a cursor). A list page
# stops early to stay within it (ports.pages.PAGE_BYTES); a batch whose jobs would pass it is refused.
ANSWER_MAX_BYTES = 5_000_000


def answer_bytes(model: BaseModel) -> int:
    """A model's bytes in Lambda's answer: its JSON as the resolver writes it (ASCII, every other
    character escaped), inside the body's JSON string, where each quote and backslash is escaped
    again. (pydantic's JSON, written faster, is the same text when it is ASCII, but for a float's
    exponent sign: `1e300` for `1e+300`.)"""
    text = model.model_dump_json()
    if not text.isascii():
        text = json.dumps(model.model_dump(mode="json"), separators=(",", ":"))
    return len(text) + text.count('"') + text.count("\\")


def json_response(
    model: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> Response[Any]:
    # The resolver validates the model against the route's declared response and serializes it.
    return Response(status_code=status, content_type="application/json", body=model, headers=headers)
