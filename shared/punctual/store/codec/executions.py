"""Execution items: an execution's own item, kept for the history's retention, the attributes that
never change once it is stored, and the projection a job shows of its last one. Apart from runs.py:
a one-time job's run may be stored on its job's item instead of on one of these.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

from punctual.domain.executions import Execution, ExecutionStatus, Waiter
from punctual.platform.timefmt import from_epoch_ms, parse_stored, to_epoch_ms, to_rfc3339
from punctual.store import keys
from punctual.store.codec.values import from_iso, iso, optional_int, present
from punctual.store.deliveries import deliveries_from

# An execution's attributes that never change once stored (set by whichever update stores it first).
EXECUTION_FIXED = (
    "id",
    "job_id",
    "owner",
    "scheduled_at",
    "schedule_version",
    "manual",
    "created_at",
    "expires_at",
    "retry_of",
)
# What a job shows of its last execution: a projection (no result, no delivery records) and its names.
SHOWN_EXECUTION_ATTRIBUTES = (
    "#id, job_id, #owner, scheduled_at, #st, schedule_version, manual, attempts, started_at, "
    "finished_at, lateness_ms, #err, next_attempt_at, created_at, retry_of, dead_lettered, task_version",
    {"#id": "id", "#owner": "owner", "#st": "status", "#err": "error"},
)


def execution_item(execution: Execution, retention: timedelta) -> dict[str, Any]:
    created = execution.created_at or execution.scheduled_at
    item = {
        **keys.execution_key(execution.job_id, execution.scheduled_at, execution.id),
        "id": execution.id,
        "job_id": execution.job_id,
        "owner": execution.owner,
        "scheduled_at": to_rfc3339(execution.scheduled_at),
        "status": execution.status.value,
        "schedule_version": execution.schedule_version,
        "manual": execution.manual,
        "attempts": execution.attempts,
        "started_at": iso(execution.started_at),
        "finished_at": iso(execution.finished_at),
        "lateness_ms": execution.lateness_ms,
        "error": execution.error,
        "result": None if execution.result is None else json.dumps(execution.result),
        "lease_until": None if execution.lease_until is None else to_epoch_ms(execution.lease_until),
        "next_attempt_at": iso(execution.next_attempt_at),
        "task_version": execution.task_version,
        "created_at": to_rfc3339(created),
        "expires_at": int((max(created, execution.scheduled_at) + retention).timestamp()),
        "retry_of": execution.retry_of,
        "dead_lettered": execution.dead_lettered or None,
        "waiter": None if execution.waiter is None else waiter_map(execution.waiter),
    }
    return present(item)


def waiter_map(waiter: Waiter) -> dict[str, Any]:
    return {
        "id": waiter.execution_id,
        "at": to_epoch_ms(waiter.scheduled_at),
        "v": waiter.schedule_version,
    }


def _waiter_from(value: Any) -> Waiter | None:
    if not isinstance(value, dict):
        return None
    return Waiter(str(value["id"]), from_epoch_ms(int(Decimal(value["at"]))), int(value["v"]))


def execution_from(item: dict[str, Any]) -> Execution:
    result = item.get("result")
    lease = item.get("lease_until")
    return Execution(
        id=str(item["id"]),
        job_id=str(item["job_id"]),
        owner=str(item["owner"]),
        scheduled_at=parse_stored(item["scheduled_at"]),
        status=ExecutionStatus(item["status"]),
        schedule_version=int(item.get("schedule_version", 1)),
        manual=bool(item.get("manual", False)),
        attempts=int(item.get("attempts", 0)),
        started_at=from_iso(item.get("started_at")),
        finished_at=from_iso(item.get("finished_at")),
        lateness_ms=optional_int(item.get("lateness_ms")),
        error=item.get("error"),
        result=None if result is None else json.loads(result),
        lease_until=None if lease is None else from_epoch_ms(int(Decimal(lease))),
        next_attempt_at=from_iso(item.get("next_attempt_at")),
        created_at=from_iso(item.get("created_at")),
        task_version=optional_int(item.get("task_version")),
        retry_of=item.get("retry_of"),
        dead_lettered=bool(item.get("dead_lettered", False)),
        deliveries=deliveries_from(item),
        waiter=_waiter_from(item.get("waiter")),
    )
