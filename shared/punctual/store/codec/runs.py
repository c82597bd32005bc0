"""A run on its job's item: the job's outcome (its last finished run, kept small), and a one-time
job's run stored in the write that completes the job, with the item's size that decides whether it
fits there. Apart from jobs.py and executions.py: a run's end writes these onto the job's item, and
they read back as the job's outcome or as an execution.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Outcome
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms
from punctual.store.codec.values import optional_int, present


# A job's outcome, kept small (a job item over 1 KB costs two write units a write): its status, when
# it finished (ms), the run as `<scheduled ms>#<execution id less the job id>`, and the consecutive
# failures (absent when none).
def _outcome_run(execution: Execution) -> str:
    short = (
        execution.id.removeprefix(execution.job_id)
        if execution.id.startswith(f"{execution.job_id}.")
        else f"/{execution.id}"
    )
    return f"{to_epoch_ms(execution.scheduled_at):013d}#{short}"


def outcome_from(item: dict[str, Any]) -> Outcome | None:
    if not item.get("outcome") or "outcome_run" not in item:
        return None
    try:
        ms, _, short = str(item["outcome_run"]).partition("#")
        job_id = str(item["id"])
        return Outcome(
            status=ExecutionStatus(item["outcome"]),
            at=from_epoch_ms(int(item["outcome_at"])),
            execution_id=short[1:] if short.startswith("/") else job_id + short,
            scheduled_at=from_epoch_ms(int(ms)),
            consecutive_failures=int(item.get("failures", 0)),
        )
    except (KeyError, ValueError):
        return None  # written by a newer version: shown as none rather than failing the read


def outcome_update(execution: Execution) -> tuple[list[str], list[str], dict[str, Any]]:
    """The SET and REMOVE clauses (and their values) that record a finished execution as its job's
    outcome: a failure adds one to the consecutive failures, a success ends them. (The job's flag,
    which its outcome and its status decide, is the caller's to set: `list_keys.flag_of`.)"""
    assert execution.finished_at is not None
    sets = ["outcome = :oc", "outcome_at = :oat", "outcome_run = :orun"]
    removes: list[str] = []
    values: dict[str, Any] = {
        ":oc": execution.status.value,
        ":oat": to_epoch_ms(execution.finished_at),
        ":orun": _outcome_run(execution),
    }
    if execution.status is ExecutionStatus.FAILED:
        sets.append("failures = if_not_exists(failures, :ozero) + :oone")
        values.update({":ozero": 0, ":oone": 1})
    else:
        removes.append("failures")
    return sets, removes, values


def outcome_update_values(execution: Execution) -> dict[str, Any]:
    """A success's outcome as `outcome_update` writes it, as attribute values (store/batch_ends.py lays
    it over a job's item)."""
    assert execution.finished_at is not None and execution.status is not ExecutionStatus.FAILED
    return {
        "outcome": execution.status.value,
        "outcome_at": to_epoch_ms(execution.finished_at),
        "outcome_run": _outcome_run(execution),
    }


# What the write that completes a job removes from its item (besides what its outcome's update
# removes): `jobs._complete`, and a run's end from its batch's ends item laid over it (batch_ends.py).
COMPLETION_REMOVES = ("next_run_at", "queued_run_at", "last_execution", "last_execution_ms", "task_ref")


# A one-time job's scheduled run that ended under its pack's lease may be stored on its job's item,
# in the write that completes the job (`store.jobs.complete_with_run`), as the map `run`: its short id (as
# in `outcome_run`), instant, schedule version, status, attempts, start, end, lateness and creation
# (ms), its task's version, and its error and result when it has them. Its own copy, not the
# outcome's: a run by hand that ends later records its outcome over the job's.
RUN = "run"
# In a run on its job's item, copied there from its batch's ends item (store/batch_ends.py), whose
# stream record announced its end.
FROM_ENDS = "b"
# A run goes on its job only with an error this short: a longer one goes on an item of its own.
RUN_ERROR_MAX_CHARS = 200
# Nor when the job's item would then take more than one write unit.
JOB_ITEM_MAX_BYTES = 1024


def _short_id(execution: Execution) -> str:
    return _outcome_run(execution).partition("#")[2]


def run_map(execution: Execution) -> dict[str, Any]:
    """A run as stored on its job's item (an ended first attempt: SUCCEEDED or FAILED)."""
    assert execution.started_at is not None and execution.finished_at is not None, "it ran"
    run = {
        "id": _short_id(execution),
        "at": to_epoch_ms(execution.scheduled_at),
        "sv": execution.schedule_version,
        "st": execution.status.value,
        "n": execution.attempts,
        "t0": to_epoch_ms(execution.started_at),
        "t1": to_epoch_ms(execution.finished_at),
        "late": execution.lateness_ms,
        "c": None if execution.created_at is None else to_epoch_ms(execution.created_at),
        "tv": execution.task_version,
        "err": execution.error,
        "res": None if execution.result is None else json.dumps(execution.result),
    }
    return present(run)


def embedded_execution(item: dict[str, Any]) -> Execution | None:
    """The run a job's item carries (`run_map`), as an execution; None when it carries none, or one
    this version cannot read."""
    run = item.get(RUN)
    if not isinstance(run, dict):
        return None
    try:
        job_id = str(item["id"])
        short = str(run["id"])
        result = run.get("res")
        created = run.get("c")
        return Execution(
            id=short[1:] if short.startswith("/") else job_id + short,
            job_id=job_id,
            owner=str(item["owner"]),
            scheduled_at=from_epoch_ms(int(run["at"])),
            status=ExecutionStatus(run["st"]),
            schedule_version=int(run["sv"]),
            attempts=int(run["n"]),
            started_at=from_epoch_ms(int(run["t0"])),
            finished_at=from_epoch_ms(int(run["t1"])),
            lateness_ms=optional_int(run.get("late")),
            error=run.get("err"),
            result=None if result is None else json.loads(result),
            created_at=None if created is None else from_epoch_ms(int(created)),
            task_version=optional_int(run.get("tv")),
        )
    except (KeyError, ValueError, TypeError):
        return None  # written by a newer version: shown as none rather than failing the read


def run_fits(execution: Execution) -> bool:
    """Whether this run may be stored on its job's item: an ended first attempt of its one-time job's
    schedule, its error short, and the job's item, completed with it, one write unit at most."""
    if (
        execution.job_item_bytes is None
        or execution.manual
        or not execution.status.ran_to_end
        or len(execution.error or "") > RUN_ERROR_MAX_CHARS
    ):
        return False
    return execution.job_item_bytes + item_bytes({RUN: run_map(execution)}) <= JOB_ITEM_MAX_BYTES


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size by DynamoDB's rules (what its writes and reads cost): per attribute its name's
    UTF-8 bytes and its value's; a string its UTF-8 bytes, a number 1 byte a two significant digits
    and 1, null and boolean 1, a map or list 3 and 1 an element, with its elements."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, int | float | Decimal):
        digits = str(Decimal(str(value))).lstrip("-").replace(".", "").split("E")[0]
        return (len(digits.strip("0") or "0") + 1) // 2 + 1
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, dict):
        return 3 + sum(len(str(k).encode()) + _value_bytes(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(_value_bytes(v) + 1 for v in value)
    if isinstance(value, set | frozenset):
        return sum(_value_bytes(v) for v in value)
    raise TypeError(f"no item size for {type(value).__name__}")
