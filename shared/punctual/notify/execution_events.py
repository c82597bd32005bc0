"""Execution status changes as EventBridge events, on a bus of the stack (AWS only).

The table's stream carries every write to an execution's item; the execution_events function turns
each one that changes its status into one event on the stack's bus, so that a platform team routes
them (rules, any target) without touching jobs. Every writer is covered, whatever wrote the change
(the worker, the dead-letter handler, an extra run's QUEUED record), at least once: the stream retries
a batch from its first record whose event was not put.

The event (`source` "punctual", `detail-type` "Punctual Execution Status Change"; docs/monitoring.md):
    {"version": 1, "job_id", "owner", "execution_id", "scheduled_at", "status", "previous_status",
     "attempts", "manual", "retry_of", "dead_lettered", "started_at", "finished_at", "lateness_ms",
     "error", "next_attempt_at"}
`previous_status` is null when the change stored the execution (its first claim on AWS).

A one-time job's run that ended under its pack's lease may be stored on its job's item, in the write
that completed the job: that job item's record, where the run appears, is the run's end, as the
record storing its own item would be.

Which records write an execution, and how they read, is the store's to know: `read` (given by
wiring.py) answers, for a record, an execution item's new and old images as plain values, or the run
that appears on a job's item.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.domain.executions import FINAL_STATUSES, Execution, ExecutionStatus
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_rfc3339

SOURCE = "punctual"
DETAIL_TYPE = "Punctual Execution Status Change"
# Which changes become events (the deployment's `execution_events`).
ALL = "all"
FINAL = "final"  # only those that reach a final status: SUCCEEDED, FAILED, CANCELLED, SKIPPED
OFF = "off"
MODES = (ALL, FINAL, OFF)
PUT_ATTEMPTS = 3
FINAL_STATUS_VALUES = frozenset(status.value for status in FINAL_STATUSES)
_ATTEMPT_ENDS = frozenset(
    status.value for status in (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.RETRYING)
)
# A stream record -> what it writes of an execution: an execution item's new and old images (plain
# values; the old one empty when the write stored it), a run stored on its job's item that this write
# put there, or None (another kind of item, an execution expiring, a job's write that keeps its run).
StreamReader = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]] | Execution | None]


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def detail_of(record: dict[str, Any], read: StreamReader, mode: str = ALL) -> dict[str, Any] | None:
    """The event's detail for a stream record that changes an execution's status, or None."""
    change = read(record)
    if change is None:
        return None
    if isinstance(change, Execution):
        return _run_on_job(change, mode)
    new, old = change
    status, attempts = _shown(new)
    # (an attempt's outcome ends a run claimed ahead that started at its instant: it was RUNNING)
    previous = old.get("status") if status in _ATTEMPT_ENDS else _shown(old)[0]
    if status is None or status == previous or (mode == FINAL and status not in FINAL_STATUS_VALUES):
        return None
    return {
        "version": 1,
        "job_id": new.get("job_id"),
        "owner": new.get("owner"),
        "execution_id": new.get("id"),
        "scheduled_at": new.get("scheduled_at"),
        "status": status,
        "previous_status": previous,
        "attempts": attempts,
        "manual": bool(new.get("manual", False)),
        "retry_of": new.get("retry_of"),
        "dead_lettered": bool(new.get("dead_lettered", False)),
        "started_at": new.get("started_at"),
        "finished_at": new.get("finished_at"),
        "lateness_ms": _json_value(new.get("lateness_ms")),
        "error": new.get("error"),
        "next_attempt_at": new.get("next_attempt_at"),
    }


def _run_on_job(run: Execution, mode: str) -> dict[str, Any] | None:
    """The event of a run stored on its job's item, where it appears (its end: nothing of it was
    stored before), or None."""
    if mode == FINAL and run.status.value not in FINAL_STATUS_VALUES:
        return None
    return _detail(run)


def _detail(run: Execution) -> dict[str, Any]:
    def iso(value: Any) -> str | None:
        return None if value is None else to_rfc3339(value)

    return {
        "version": 1,
        "job_id": run.job_id,
        "owner": run.owner,
        "execution_id": run.id,
        "scheduled_at": iso(run.scheduled_at),
        "status": run.status.value,
        "previous_status": None,
        "attempts": run.attempts,
        "manual": run.manual,
        "retry_of": run.retry_of,
        "dead_lettered": run.dead_lettered,
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "lateness_ms": run.lateness_ms,
        "error": run.error,
        "next_attempt_at": iso(run.next_attempt_at),
    }


def _shown(image: dict[str, Any]) -> tuple[Any, Any]:
    """An image's status and attempts as users see them: a claim made ahead of the execution's instant
    (RUNNING, no start recorded: the outcome's write records it) is still QUEUED, the claim's
    attempt not counted (`executions.execution_as_seen`)."""
    status, attempts = image.get("status"), _json_value(image.get("attempts", 0))
    if status == ExecutionStatus.RUNNING.value and image.get("started_at") is None:
        return ExecutionStatus.QUEUED.value, attempts - 1
    return status, attempts


def publish(
    records: Sequence[dict[str, Any]], read: StreamReader, events: Any, bus: str, mode: str = ALL
) -> dict[str, Any]:
    """Put one event per status change of these stream records on `bus`, in order, ten a call.
    Returns the batch response of a stream event source: the sequence number of the first record
    whose event could not be put, from which the stream retries (those before it are done)."""
    pending: list[tuple[str, dict[str, Any]]] = []
    for record in records:
        detail = detail_of(record, read, mode)
        if detail is not None:
            entry = {
                "Source": SOURCE,
                "DetailType": DETAIL_TYPE,
                "Detail": json.dumps(detail),
                "EventBusName": bus,
            }
            pending.append((str((record.get("dynamodb") or {}).get("SequenceNumber", "")), entry))
    for start in range(0, len(pending), 10):
        chunk = pending[start : start + 10]
        failed = _put(events, chunk)
        if failed is not None:
            logger.warning(
                "execution events not put; the stream retries from there", extra={"sequence": failed}
            )
            return {"batchItemFailures": [{"itemIdentifier": failed}]}
    return {"batchItemFailures": []}


def _put(events: Any, chunk: list[tuple[str, dict[str, Any]]]) -> str | None:
    """Put a chunk's events, retrying those refused; the sequence number of the first still refused."""
    left = chunk
    for attempt in range(PUT_ATTEMPTS):
        try:
            answer = events.put_events(Entries=[entry for _, entry in left])
        except (ClientError, BotoCoreError) as exc:
            logger.warning("PutEvents failed", extra={"error": str(exc)})
            answer = {"FailedEntryCount": len(left), "Entries": [{"ErrorCode": "Failed"}] * len(left)}
        if not answer.get("FailedEntryCount"):
            return None
        results = answer.get("Entries") or []
        left = [pair for pair, result in zip(left, results, strict=False) if result.get("ErrorCode")]
        if not left:
            return None
        time.sleep(0.1 * 2**attempt)
    return left[0][0]
