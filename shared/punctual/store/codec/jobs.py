"""Job items: a job's fields as stored, its notification rules and signing secrets, and the
projection that reads its stamp. Apart from runs.py: a job's item also carries its last run, which
the run's end writes and which this module only reads back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from punctual.domain.models import (
    DEFAULT_TIMEOUT_SECONDS,
    SCHEDULE_ADAPTER,
    Job,
    JobStatus,
    TaskRef,
    TaskSpec,
)
from punctual.domain.policies import JobPolicy, NotifyRule, RetryPolicy
from punctual.platform.signing import SigningKeys
from punctual.platform.timefmt import parse_stored
from punctual.store import keys, list_keys
from punctual.store.codec.runs import embedded_execution, outcome_from
from punctual.store.codec.values import from_iso, iso, optional_int, present

# A job's stamp (`JobStamp`): the projection that reads it, and its names.
STAMP_ATTRIBUTES = (
    "#pk, #st, #sv, #up",
    {"#pk": "pk", "#st": "status", "#sv": "schedule_version", "#up": "updated_at"},
)
_TIMES = {
    "next_run_at",
    "anchor_at",
    "created_at",
    "updated_at",
    "queued_run_at",
    "runs_since",
    "ran_at",
    "paused_at",
}
_NOTIFY_ADAPTER: TypeAdapter[tuple[NotifyRule, ...]] = TypeAdapter(tuple[NotifyRule, ...])


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
        # (none while its batch's list entry lists it: no by_owner entry of its own, `Job.listed_in`)
        "owner_pk": None if job.listed_in else keys.owner_pk(job.owner),
        "owner_sk": keys.owner_sk(job.created_at, job.id),
        "listed_in": job.listed_in,
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
    return present(item)


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
        created_at=parse_stored(item["created_at"]),
        updated_at=parse_stored(item["updated_at"]),
        next_run_at=from_iso(item.get("next_run_at")),
        schedule_version=int(item.get("schedule_version", 1)),
        anchor_at=from_iso(item.get("anchor_at")),
        final_execution_id=item.get("final_execution_id"),
        queued_run_at=from_iso(item.get("queued_run_at")),
        runs_since=from_iso(item.get("runs_since")),
        paused_version=optional_int(item.get("paused_version")),
        ran_at=from_iso(item.get("ran_at")),
        policy=JobPolicy.model_validate_json(item["policy"]) if item.get("policy") else JobPolicy(),
        runs_dispatched=int(item.get("runs_dispatched", 0)),
        tags={str(k): str(v) for k, v in (item.get("tags") or {}).items()},
        inherits=inherits,
        outcome=outcome_from(item),
        notify=_NOTIFY_ADAPTER.validate_json(item["notify"]) if item.get("notify") else (),
        signing=_signing_from(item),
        pause_note=item.get("pause_note"),
        paused_at=from_iso(item.get("paused_at")),
        last_execution=embedded_execution(item),
        listed_in=str(item["listed_in"]) if listed_by_entry(item) else None,
        # (an item from before revisions were kept: 0, which its first change through the API makes 1)
        revision=int(item.get("revision", 0)),
    )


def listed_by_entry(item: dict[str, Any]) -> bool:
    """Whether a job item is listed by its batch's list entry rather than by an entry of its own: a
    batch's job with no owner_pk (no entry of its own), or one that gained it (a failure's flag,
    which by_flag needs) and still expires before its batch's entry does. Never both, so a list shows
    it once; a change that keeps it longer (a pause, a new schedule) moves it to its own entry, which
    sorts just after its batch's (`list_entry_item`)."""
    if "listed_in" not in item:
        return False
    return "owner_pk" not in item or expires_within_entry(item)


def expires_within_entry(item: dict[str, Any]) -> bool:
    """Whether a batch's job item expires no later than its batch's list entry (`listed_until`)."""
    expires, until = item.get("expires_at"), item.get("listed_until")
    return expires is not None and until is not None and int(expires) <= int(until)


def list_entry_item(batch_id: str, jobs: Sequence[Job], expires_at: int) -> dict[str, Any]:
    """A batch's one list entry for `jobs` (each listed in it, all created at once by one owner): keyed
    in by_owner just before (newest first) the entries its jobs may gain, naming them newest first as
    by_owner orders jobs. A job leaving it for an entry of its own while a list pages through it is
    thus still ahead of that list's cursor."""
    first = jobs[0]
    return {
        **keys.list_entry_key(batch_id),
        "owner": first.owner,
        "owner_pk": keys.owner_pk(first.owner),
        "owner_sk": keys.list_entry_owner_sk(first.created_at, batch_id),
        "jobs": ",".join(sorted((job.id for job in jobs), reverse=True)),
        "expires_at": expires_at,
    }


def listed_jobs(entry: dict[str, Any]) -> list[str]:
    """The job ids a batch's list entry names, in list order."""
    return [job_id for job_id in str(entry.get("jobs", "")).split(",") if job_id]


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
        previous_until=from_iso(item.get("signing_previous_until")),
    )
