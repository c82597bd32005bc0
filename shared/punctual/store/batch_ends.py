"""A batch's runs' ends at one instant, in one item: pk ENDS#<batch id>#<instant ms>, sk ENDS.

A batch's one-time jobs (`Job.listed_in`) due at one instant run in a few packs. Each run's end
written on its job's item costs a write unit a run; a pack writes its members' ends here instead, in
one write a key (`write`): `e:<job id>` the run as its job's item would carry it (`codec.runs.run_map`),
and the item's size in units for the lot. Only a run of a job never changed since its creation
(`models.end_in_batch`), while its job's item stays as created: readers lay the end over the item
(`with_ends`), which then reads as completed with its run, as if the run's end had completed it.

A change to such a job while its run may be under way (within how far ahead a message may be sent,
or past its instant) first writes `m:<job id>` here (`mark_moved`), on condition that no end is here:
a pack's write that finds it leaves that member's end to its job's item, as any run whose job moved on
(the pause protocol's). If an end is here, the run has ended and the job is complete: the change
answers as it does for a completed job. A write here and a change's mark thus exclude each other.

A job's item carries no later write of its own for such a run, so it expires from its creation: its
instant, a day (`models.BATCH_END_MARGIN`) and the retention (`JobRepository.put_new_many`); a run
that ends later goes on its job's item.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import BATCH_END_MARGIN, Job, JobStatus
from punctual.platform.timefmt import parse_stored
from punctual.store import keys, list_keys
from punctual.store.codec.runs import (
    COMPLETION_REMOVES,
    RUN,
    embedded_execution,
    outcome_update_values,
    run_fits,
    run_map,
)
from punctual.store.table import Table, call, from_wire

END = "e:"
MOVED = "m:"
# Attempts at a pack's write for one key, each without the members a change marked meanwhile.
_WRITE_ATTEMPTS = 3


def job_ends_key(item: Mapping[str, Any]) -> keys.Key | None:
    """The ends item a job's item reads its run's end from, if it may have one there: a batch's
    active job never changed, with no run on it."""
    if (
        "listed_in" not in item
        or RUN in item
        or item.get("status") != JobStatus.ACTIVE.value
        or "next_run_at" not in item
        or item.get("created_at") != item.get("updated_at")
    ):
        return None
    return keys.ends_key(str(item["listed_in"]), parse_stored(str(item["next_run_at"])))


def with_end(item: dict[str, Any], ends: Mapping[str, Any] | None, table: Table) -> dict[str, Any]:
    """A job's item with its run's end from its batch's ends item laid over it: as the write that
    completes a job with its run would leave it (`jobs._complete`). The item itself if none is
    there (or one of another version)."""
    if ends is None or job_ends_key(item) is None:
        return item
    job_id = str(item["id"])
    run = ends.get(END + job_id)
    if not isinstance(run, dict) or int(run.get("sv", -1)) != int(item.get("schedule_version", 1)):
        return item
    ended = embedded_execution({"id": job_id, "owner": item["owner"], RUN: run})
    if ended is None or ended.finished_at is None:
        return item
    completed = {k: v for k, v in item.items() if k not in {*COMPLETION_REMOVES, "flag"}}
    completed.update(status=JobStatus.COMPLETED.value, expires_at=table.expiry(ended.finished_at))
    completed[RUN] = dict(run)
    # (a success: its outcome, unless a later one is recorded, and no failures in a row)
    outcome = outcome_update_values(ended)
    if int(item.get("outcome_at", -1)) <= int(outcome["outcome_at"]):
        completed.update(outcome)
        completed.pop("failures", None)
    flag = list_keys.flag_of(JobStatus.COMPLETED, ExecutionStatus(str(completed.get("outcome", "SUCCEEDED"))))
    if flag is not None:
        completed["flag"] = flag
    return completed


class BatchEndRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def write(self, batch_id: str, instant: datetime, owner: str, ends: Mapping[str, Execution]) -> set[str]:
        """Write these runs' ends (by job id: a batch's jobs' runs at `instant`) in one write, each only
        if no change marked its job and none is there yet (a run ends once: the first end stays).
        Returns the jobs whose ends it did not write, for their jobs' items: marked by a change, or too
        large for it."""
        key = keys.ends_key(batch_id, instant)
        # (one too large for its job's item goes there, as it would have: on an item of its own)
        moved: set[str] = {job_id for job_id, execution in ends.items() if not run_fits(execution)}
        left = {job_id: execution for job_id, execution in ends.items() if job_id not in moved}
        for _ in range(_WRITE_ATTEMPTS):
            if not left:
                return moved
            names: dict[str, str] = {"#owner": "owner", "#exp": "expires_at"}
            values: dict[str, Any] = {":owner": owner}
            sets = ["#owner = :owner"]
            conditions = []
            latest = max(e.finished_at or e.scheduled_at for e in left.values())
            for i, (job_id, execution) in enumerate(sorted(left.items())):
                names[f"#e{i}"] = END + job_id
                names[f"#m{i}"] = MOVED + job_id
                values[f":e{i}"] = run_map(execution)
                sets.append(f"#e{i} = if_not_exists(#e{i}, :e{i})")
                conditions.append(f"attribute_not_exists(#m{i})")
            # (the latest end's expiry: each job's item expires by then too)
            values[":exp"] = self._table.expiry(latest + BATCH_END_MARGIN)
            sets.append("#exp = :exp")
            try:
                call(
                    partial(
                        self._table.resource.update_item,
                        Key=key,
                        UpdateExpression="SET " + ", ".join(sets),
                        ConditionExpression=" AND ".join(conditions),
                        ExpressionAttributeNames=names,
                        ExpressionAttributeValues=values,
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                )
                return moved
            except LostRace as exc:
                found = _old_item(exc)
                marked = {job_id for job_id in left if MOVED + job_id in found}
                if not marked:
                    raise  # (a condition failed for no mark seen: let the caller's fallback run)
                moved |= marked
                left = {k: v for k, v in left.items() if k not in marked}
        if left:
            raise LostRace("batch ends: marks kept coming")
        return moved

    def mark_moved(self, job: Job) -> None:
        """Mark a change to `job` (`models.ends_in_batch`) before it is written, so that no pack writes
        its run's end here after it. LostRace if its end is here: its run has ended, and the job is
        complete."""
        assert job.listed_in is not None and job.next_run_at is not None
        call(
            partial(
                self._table.resource.update_item,
                Key=keys.ends_key(job.listed_in, job.next_run_at),
                UpdateExpression="SET #m = :v, #exp = if_not_exists(#exp, :exp)",
                ConditionExpression="attribute_not_exists(#e)",
                ExpressionAttributeNames={"#m": MOVED + job.id, "#e": END + job.id, "#exp": "expires_at"},
                ExpressionAttributeValues={
                    ":v": job.schedule_version,
                    ":exp": self._table.expiry(job.next_run_at + BATCH_END_MARGIN),
                },
            )
        )

    def read_many(self, wanted: Iterable[keys.Key]) -> dict[str, dict[str, Any]]:
        """Ends items by pk (consistently: a run just ended shows)."""
        unique = {key["pk"]: key for key in wanted}
        if not unique:
            return {}
        return {str(item["pk"]): item for item in self._table.batch_get(list(unique.values()))}

    def with_ends(self, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Job items with their runs' ends from their batches' ends items laid over them (one
        BatchGetItem for those that may have one: whose run's instant has come)."""
        now = self._table.clock.now()
        keyed = [(item, job_ends_key(item)) for item in items]
        wanted = {
            key["pk"]: key
            for item, key in keyed
            if key is not None and parse_stored(str(item["next_run_at"])) <= now
        }
        if not wanted:
            return [item for item, _ in keyed]
        ends = self.read_many(wanted.values())
        return [
            item if key is None else with_end(item, ends.get(key["pk"]), self._table) for item, key in keyed
        ]

    def with_end(self, item: dict[str, Any] | None) -> dict[str, Any] | None:
        """`with_ends` for one item (a GetItem more when it may have one)."""
        if item is None:
            return None
        return self.with_ends([item])[0]

    def run_of(self, item: dict[str, Any]) -> Execution | None:
        """The run a job's item may read from its batch's ends item, if there."""
        if RUN in item:
            return None
        laid = self.with_end(item)
        return None if laid is None or RUN not in laid else embedded_execution(laid)


def _old_item(exc: LostRace) -> dict[str, Any]:
    cause = exc.__cause__
    old: Any = cause.response.get("Item") if isinstance(cause, ClientError) else None
    return from_wire(old) if isinstance(old, dict) else {}


def ended_executions(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Execution]:
    """The runs an ends item's write added (stream images, plain values), as executions."""
    owner = new.get("owner")
    if owner is None:
        return []
    added = []
    for name, run in new.items():
        if not name.startswith(END) or name in old or not isinstance(run, dict):
            continue
        execution = embedded_execution({"id": name[len(END) :], "owner": owner, RUN: run})
        if execution is not None:
            added.append(execution)
    return added
