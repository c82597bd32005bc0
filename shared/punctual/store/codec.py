"""Items <-> domain objects: every attribute name the table's items carry, and how each is stored
(a job's index keys that are not fields of its own, and its tag entries: list_keys.py).

Readers are lenient where a newer version may have written more (an outcome or a delivery record of
a form this one does not know reads as none), and take what older versions wrote (a job without a
schedule version is at 1; one without a retry or timeout takes its named task's or the defaults).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter

from punctual.domain.executions import DeadLetter, Execution, ExecutionStatus
from punctual.domain.models import (
    DEFAULT_TIMEOUT_SECONDS,
    SCHEDULE_ADAPTER,
    DueMarker,
    Job,
    JobStatus,
    Outcome,
    TaskRef,
    TaskSpec,
)
from punctual.domain.policies import JobPolicy, NotifyRule, RetryPolicy
from punctual.platform.signing import SigningKeys
from punctual.platform.timefmt import from_epoch_ms, parse_rfc3339, to_epoch_ms, to_rfc3339
from punctual.store import keys, list_keys
from punctual.store.deliveries import deliveries_from

# Markers in minute buckets are read once and never deleted by the scanner: they expire, this long
# after their instant (a scanner stopped for longer would find them gone; its alarms fire long before).
# Soon markers do not expire: the scanner deletes each once it is sent.
MARKER_TTL = timedelta(days=30)
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
# A job's stamp (`JobStamp`): the projection that reads it, and its names.
STAMP_ATTRIBUTES = (
    "#pk, #st, #sv, #up",
    {"#pk": "pk", "#st": "status", "#sv": "schedule_version", "#up": "updated_at"},
)
_TIMES = {"next_run_at", "anchor_at", "created_at", "updated_at", "queued_run_at", "ran_at", "paused_at"}
_NOTIFY_ADAPTER: TypeAdapter[tuple[NotifyRule, ...]] = TypeAdapter(tuple[NotifyRule, ...])


def iso(value: datetime | None) -> str | None:
    return None if value is None else to_rfc3339(value)


def _dt(value: Any) -> datetime | None:
    return None if value in (None, "") else parse_rfc3339(str(value))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _present(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}


# ------------------------------------------------------------------- jobs
def job_attributes(changes: dict[str, Any]) -> dict[str, Any]:
    """Domain field values -> stored attributes (None removes the attribute)."""
    stored: dict[str, Any] = {}
    for name, value in changes.items():
        if name in {"task", "retry", "policy"}:
            stored[name] = None if value is None else value.model_dump_json()
        elif name == "tags":
            stored[name] = dict(value) if value else None
        elif name == "schedule":
            stored[name] = SCHEDULE_ADAPTER.dump_json(value).decode()
        elif name in _TIMES:
            stored[name] = iso(value)
        elif name == "status":
            stored[name] = value.value
        elif name == "notify":
            stored[name] = _notify_json(value)
        elif name == "signing":
            stored.update(_signing_attributes(value))
        else:
            stored[name] = value
    return stored


def job_item(job: Job) -> dict[str, Any]:
    item = {
        **keys.job_key(job.id),
        "id": job.id,
        "owner": job.owner,
        "owner_pk": keys.owner_pk(job.owner),
        "owner_sk": keys.owner_sk(job.created_at, job.id),
        "name": list_keys.stored_name(job.id, job.name),
        "status": job.status.value,
        # (absent while a job with a named task takes the task's: `Job.inherits`)
        "timeout_seconds": None if "timeout_seconds" in job.inherits else job.timeout_seconds,
        "schedule_version": job.schedule_version,
        "final_execution_id": job.final_execution_id,
        "revision": 1,
        **job_attributes(
            {
                "task": job.task,
                "retry": None if "retry" in job.inherits else job.retry,
                "schedule": job.schedule,
                "created_at": job.created_at,
                "updated_at": job.updated_at,
                "next_run_at": job.next_run_at,
                "anchor_at": job.anchor_at,
                # (kept off the item while default: most jobs have none, and every read pays for it)
                "policy": None if job.policy.is_default else job.policy,
                "tags": job.tags,
                "notify": job.notify,
                "signing": job.signing,
                "pause_note": job.pause_note,
                "paused_at": job.paused_at,
            }
        ),
        "runs_dispatched": job.runs_dispatched or None,
        "task_ref": list_keys.task_ref_of(job.owner, job.task, job.status),
        "flag": list_keys.flag_of(job.status, None if job.outcome is None else job.outcome.status),
    }
    return _present(item)


def job_from(item: dict[str, Any]) -> Job:
    task = json.loads(item["task"])
    inherits = frozenset(name for name in ("retry", "timeout_seconds") if name not in item)
    return Job(
        id=str(item["id"]),
        owner=str(item["owner"]),
        name=str(item.get("name") or item["id"]),
        status=JobStatus(item["status"]),
        task=TaskRef.model_validate(task) if "name" in task else TaskSpec.model_validate(task),
        schedule=SCHEDULE_ADAPTER.validate_json(item["schedule"]),
        retry=RetryPolicy.model_validate_json(item["retry"]) if "retry" in item else RetryPolicy(),
        timeout_seconds=int(item.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)),
        created_at=parse_rfc3339(item["created_at"]),
        updated_at=parse_rfc3339(item["updated_at"]),
        next_run_at=_dt(item.get("next_run_at")),
        schedule_version=int(item.get("schedule_version", 1)),
        anchor_at=_dt(item.get("anchor_at")),
        final_execution_id=item.get("final_execution_id"),
        queued_run_at=_dt(item.get("queued_run_at")),
        paused_version=_int(item.get("paused_version")),
        ran_at=_dt(item.get("ran_at")),
        policy=JobPolicy.model_validate_json(item["policy"]) if item.get("policy") else JobPolicy(),
        runs_dispatched=int(item.get("runs_dispatched", 0)),
        tags={str(k): str(v) for k, v in (item.get("tags") or {}).items()},
        inherits=inherits,
        outcome=_outcome_from(item),
        notify=_NOTIFY_ADAPTER.validate_json(item["notify"]) if item.get("notify") else (),
        signing=_signing_from(item),
        pause_note=item.get("pause_note"),
        paused_at=_dt(item.get("paused_at")),
        last_execution=embedded_execution(item),
    )


def _notify_json(rules: Sequence[NotifyRule] | None) -> str | None:
    """A job's notification rules as stored (none: no attribute)."""
    if not rules:
        return None
    return json.dumps(
        [rule.model_dump(mode="json", exclude_none=True) for rule in rules], separators=(",", ":")
    )


def _signing_attributes(signing: SigningKeys | None) -> dict[str, Any]:
    """A job's signing secrets as stored: None removes them (the job signs nothing)."""
    if signing is None:
        return {"signing_secret": None, "signing_previous": None, "signing_previous_until": None}
    return {
        "signing_secret": signing.current,
        "signing_previous": signing.previous,
        "signing_previous_until": iso(signing.previous_until),
    }


def _signing_from(item: dict[str, Any]) -> SigningKeys | None:
    if not item.get("signing_secret"):
        return None
    return SigningKeys(
        current=str(item["signing_secret"]),
        previous=item.get("signing_previous"),
        previous_until=_dt(item.get("signing_previous_until")),
    )


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


def _outcome_from(item: dict[str, Any]) -> Outcome | None:
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


# ----------------------------------------------- a one-time job's run on its job
# A one-time job's scheduled run that ended under its pack's lease may be stored on its job's item,
# in the write that completes the job (`jobs.complete_with_run`), as the map `run`: its short id (as
# in `outcome_run`), instant, schedule version, status, attempts, start, end, lateness and creation
# (ms), its task's version, and its error and result when it has them. Its own copy, not the
# outcome's: a run by hand that ends later records its outcome over the job's.
RUN = "run"
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
    return _present(run)


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
            lateness_ms=_int(run.get("late")),
            error=run.get("err"),
            result=None if result is None else json.loads(result),
            created_at=None if created is None else from_epoch_ms(int(created)),
            task_version=_int(run.get("tv")),
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


# ------------------------------------------------------------- executions
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
    }
    return _present(item)


def execution_from(item: dict[str, Any]) -> Execution:
    result = item.get("result")
    lease = item.get("lease_until")
    return Execution(
        id=str(item["id"]),
        job_id=str(item["job_id"]),
        owner=str(item["owner"]),
        scheduled_at=parse_rfc3339(item["scheduled_at"]),
        status=ExecutionStatus(item["status"]),
        schedule_version=int(item.get("schedule_version", 1)),
        manual=bool(item.get("manual", False)),
        attempts=int(item.get("attempts", 0)),
        started_at=_dt(item.get("started_at")),
        finished_at=_dt(item.get("finished_at")),
        lateness_ms=_int(item.get("lateness_ms")),
        error=item.get("error"),
        result=None if result is None else json.loads(result),
        lease_until=None if lease is None else from_epoch_ms(int(Decimal(lease))),
        next_attempt_at=_dt(item.get("next_attempt_at")),
        created_at=_dt(item.get("created_at")),
        task_version=_int(item.get("task_version")),
        retry_of=item.get("retry_of"),
        dead_lettered=bool(item.get("dead_lettered", False)),
        deliveries=deliveries_from(item),
    )


# ---------------------------------------------------------------- markers
def marker_item(marker: DueMarker, shard_count: int) -> dict[str, Any]:
    return {
        **keys.marker_key(marker, shard_count),
        "job_id": marker.job_id,
        "execution_id": marker.execution_id,
        "scheduled_ms": to_epoch_ms(marker.scheduled_at),
        "schedule_version": marker.schedule_version,
        "manual": marker.manual,
        **({} if marker.soon else {"expires_at": int((marker.scheduled_at + MARKER_TTL).timestamp())}),
        **(
            {"handoff_until_ms": to_epoch_ms(marker.handoff_until)}
            if marker.handoff_until is not None
            else {}
        ),
        **({"filed_ms": to_epoch_ms(marker.filed_at)} if marker.filed_at is not None else {}),
    }


def marker_from(item: dict[str, Any]) -> DueMarker:
    handoff = item.get("handoff_until_ms")
    filed = item.get("filed_ms")
    shard, soon = keys.marker_place(str(item["pk"]))
    return DueMarker(
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=int(item["schedule_version"]),
        manual=bool(item.get("manual", False)),
        shard=shard,
        handoff_until=None if handoff is None else from_epoch_ms(int(handoff)),
        soon=soon,
        filed_at=None if filed is None else from_epoch_ms(int(filed)),
    )


def quarantine_item(marker: DueMarker, reason: str, now: datetime, shard_count: int) -> dict[str, Any]:
    """A marker set aside: kept until released, so without the marker's expiry."""
    item = {k: v for k, v in marker_item(marker, shard_count).items() if k != "expires_at"}
    return {**item, **keys.quarantine_key(marker), "reason": reason, "quarantined_at": to_rfc3339(now)}


def quarantined_from(item: dict[str, Any]) -> tuple[DueMarker, str]:
    marker = DueMarker(
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=int(item["schedule_version"]),
        manual=bool(item.get("manual", False)),
    )
    return marker, str(item.get("reason", ""))


# ----------------------------------------------------------- dead letters
def dead_letter_item(letter: DeadLetter, expires_at: int) -> dict[str, Any]:
    item = {
        **keys.dead_letter_key(letter.owner, letter.execution_id),
        "job_id": letter.job_id,
        "execution_id": letter.execution_id,
        "scheduled_ms": to_epoch_ms(letter.scheduled_at),
        "schedule_version": letter.schedule_version,
        "manual": letter.manual,
        "dead_lettered_at": to_rfc3339(letter.dead_lettered_at),
        "error": letter.error,
        "expires_at": expires_at,
    }
    return _present(item)


def dead_letter_from(owner: str, item: dict[str, Any]) -> DeadLetter:
    return DeadLetter(
        owner=owner,
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=_int(item.get("schedule_version")),
        manual=bool(item.get("manual", False)),
        dead_lettered_at=parse_rfc3339(str(item["dead_lettered_at"])),
        error=str(item.get("error", "")),
    )
