"""Jobs: pk JOB#<job id>, sk JOB, with owner_pk/owner_sk, which key by_owner and, with a name given,
by_name (a batch's one-time jobs without a name of their own have no owner_pk: one list entry of the
batch's, pk LIST#<batch id>, keyed in by_owner just before them, lists them all while they expire
before it; a change gives one an entry of its own: `Job.listed_in`, `codec.jobs.listed_by_entry`); while PAUSED, CANCELLED or failing, a flag (list_keys.flag_of) for the sparse by_flag index;
and, while a job keeps a named task in use, task_ref for the sparse by_task index. A tagged job has
an entry a tag in the table (written before the job, deleted after it loses the tag).

Reads: a job by id, many by id (BatchGetItem, consistent; items this version cannot read reported
apart), their stamps (what tells whether a job changed since read). Lists and a job with its last
execution: job_views.py.
Writes: a new job (conditional: its id is new), many new jobs (a batch, unconditional: fresh ids);
a field update, only while the job is in the status and at the schedule version the caller read
(a status change checked against `lifecycle.JOB_STATUS_CHANGES`); completion, with its outcome in
the same write (`lifecycle.JOB_TRANSITIONS["complete"]`); an outcome, never over a later one; a
paused one-time job's note that its run ended, and its resume with that run (the pause protocol:
punctual/execution/pausing.py). A write that moves a job's status or outcome sets its flag from what
its caller read, then settles it against the item written (a second write only when they differ:
job_flags.py).
A change through the API adds one to the job's revision (`update(revise=True)`, a resume); the
scheduler's and the worker's own writes do not. A finished job expires with its history
(`retention_days` after it), a revived one is kept again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import (
    BATCH_END_MARGIN,
    BATCH_RETRIES_SPAN,
    Job,
    JobStamp,
    JobStatus,
    ends_in_batch,
)
from punctual.platform.timefmt import parse_stored, to_rfc3339
from punctual.ports.jobs import JobsRead
from punctual.store import job_flags, keys, lifecycle, list_keys
from punctual.store.codec.jobs import STAMP_ATTRIBUTES, job_attributes, job_from, job_item, list_entry_item
from punctual.store.codec.runs import COMPLETION_REMOVES, FROM_ENDS, RUN, item_bytes, outcome_update, run_map
from punctual.store.job_views import JobViews
from punctual.store.lifecycle import EXECUTION_TRANSITIONS, JOB_TRANSITIONS
from punctual.store.table import Table, call, delete, put

# How long after its first run is due a job listed in its batch's entry may end and still be listed by
# it (retries of up to 10 attempts, 12 hours apart at most, and room for an outage): its entry
# outlives it by this much.
LISTED_RUN_SPAN = timedelta(days=7)


class JobRepository(JobViews):
    def __init__(self, table: Table) -> None:
        super().__init__(table)

    # ------------------------------------------------------------------ reads
    def get(self, job_id: str, owner: str | None = None) -> Job | None:
        """The job; with `owner`, only if it is that owner's: then read by a Query whose filter drops
        another owner's item, so that it comes back as nothing, as an id that does not exist does
        (the same read units as a GetItem)."""
        if owner is None:
            response = call(
                lambda: self._table.resource.get_item(Key=keys.job_key(job_id), ConsistentRead=True)
            )
            item = response.get("Item")
        else:
            response = call(
                partial(
                    self._table.resource.query,
                    KeyConditionExpression="pk = :pk AND sk = :sk",
                    FilterExpression="#owner = :owner",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues={
                        ":pk": keys.job_pk(job_id),
                        ":sk": keys.JOB_SK,
                        ":owner": owner,
                    },
                    ConsistentRead=True,
                )
            )
            item = next(iter(response.get("Items", [])), None)
        return None if item is None else job_from(self._ends.with_ends([item])[0])

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True, ends: bool = True) -> JobsRead:
        """Jobs by id, read consistently unless told (one BatchGetItem a hundred), with their runs'
        ends from their batches' ends items unless told (one more)."""
        found: dict[str, Job] = {}
        unreadable: dict[str, str] = {}
        wanted = [keys.job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        items = self._table.batch_get(wanted, consistent=consistent)
        for item in self._ends.with_ends(items) if ends else items:
            job_id = keys.job_id_of(str(item["pk"]))
            try:
                found[job_id] = job_from(item)
            except Exception as exc:
                unreadable[job_id] = f"{type(exc).__name__}: {exc}"[:500]
        return JobsRead(found, unreadable)

    def stamps(self, job_ids: Iterable[str]) -> tuple[dict[str, JobStamp], dict[str, str]]:
        """What tells whether each job changed since it was read (its status, schedule version and
        time of last change), read consistently; apart the ids of items that cannot be read."""
        wanted = [keys.job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        stamps: dict[str, JobStamp] = {}
        unreadable: dict[str, str] = {}
        projection, names = STAMP_ATTRIBUTES
        for item in self._table.batch_get(wanted, projection, names):
            job_id = keys.job_id_of(str(item["pk"]))
            try:
                stamps[job_id] = JobStamp(
                    JobStatus(item["status"]),
                    int(item.get("schedule_version", 1)),
                    parse_stored(item["updated_at"]),
                )
            except Exception as exc:
                unreadable[job_id] = f"{type(exc).__name__}: {exc}"[:500]
        return stamps, unreadable

    @staticmethod
    def completed_bytes(job: Job | None) -> int | None:
        """For a one-time job's scheduled run under its pack's lease (`Execution.job_item_bytes`): the
        larger of its item's size as read and once completed, less the run; None when its run is not to
        go on it (no such job, a recurring one, one that carries a run already, or one with notification
        rules, whose notifications a redelivery finds to queue again only on a run's item of its own)."""
        if job is None or job.recurring or job.notify or job.last_execution is not None:
            return None
        item = job_item(job)
        before = item_bytes(item)
        for name in ("next_run_at", "queued_run_at", "task_ref", "flag"):
            item.pop(name, None)
        # (the longest outcome: a failure, counted, and flagged; and a batch's job's entry's expiry. A
        # batch's job that fails gains an owner_pk too, not counted here: rare, and then at most one
        # write unit more, where counting it would put most such runs on items of their own, two)
        if job.listed_in:
            item["listed_until"] = 2**32
        item.update(
            status=JobStatus.COMPLETED.value,
            expires_at=2**32,
            outcome=ExecutionStatus.SUCCEEDED.value,
            outcome_at=2**42,
            outcome_run=f"{2**42:013d}#.{2**42:x}.{job.schedule_version}",
            failures=99,
            flag=list_keys.flag_of(JobStatus.COMPLETED, ExecutionStatus.FAILED) or "",
            revision=99_999,
        )
        return max(before, item_bytes(item))

    # ----------------------------------------------------------------- writes
    def put_new(self, job: Job) -> None:
        """Store a new job; LostRace if one with its id is stored (a concurrent idempotent retry).
        Its tag entries go first (a crash between leaves entries that lists drop)."""
        if job.tags:
            self._table.batch_write([put(entry) for entry in list_keys.tag_entries(job)])
        call(
            lambda: self._table.resource.put_item(
                Item=job_item(job), ConditionExpression="attribute_not_exists(pk)"
            )
        )

    def put_new_many(self, jobs: Sequence[Job]) -> None:
        """Store new jobs with BatchWriteItem, retrying unprocessed ones. Unconditional: only for jobs
        whose ids were just drawn (an idempotent retry of a batch uses put_new for the rest).

        Jobs listed in their batch's one entry (`Job.listed_in`) have it written first, with the tag
        entries: a crash between leaves an entry naming jobs that lists skip, never a job unlisted. The
        entry expires once every job it names has (`list_entry_expiry`)."""
        batches: dict[str, list[Job]] = {}
        for job in jobs:
            if job.listed_in:
                batches.setdefault(job.listed_in, []).append(job)
        until = {batch_id: self.list_entry_expiry(members) for batch_id, members in batches.items()}
        entries = [
            list_entry_item(batch_id, members, until[batch_id]) for batch_id, members in batches.items()
        ]
        self._table.batch_write(
            [put(entry) for entry in entries]
            + [put(entry) for job in jobs for entry in list_keys.tag_entries(job)]
        )
        self._table.batch_write(
            [
                put(
                    {**job_item(job), **self._listed(job, until[job.listed_in])}
                    if job.listed_in
                    else job_item(job)
                )
                for job in jobs
            ]
        )

    def _listed(self, job: Job, until: int) -> dict[str, Any]:
        """What a job listed in its batch's entry carries besides: the entry's expiry, and its own from
        its creation. Its run may end in its batch's ends item (store/batch_ends.py), which writes
        nothing on its item; a change to it, or a run that ends otherwise, sets its expiry anew."""
        listed: dict[str, Any] = {"listed_until": until}
        if job.next_run_at is not None and ends_in_batch(job):
            listed["expires_at"] = max(
                self._table.expiry(job.next_run_at + BATCH_END_MARGIN),
                int((job.next_run_at + BATCH_RETRIES_SPAN).timestamp()),
            )
        return listed

    def list_entry_expiry(self, jobs: Sequence[Job]) -> int:
        """When a batch's list entry expires (its jobs, one-time, carry it as `listed_until`): after each
        of them that only its run's end has written. Such a job expires `retention` after that end,
        which comes at most LISTED_RUN_SPAN after its run is due; one that expires later (a later end,
        a longer retention since) gains an entry of its own (`_complete`), as a changed one does."""
        latest = max(job.next_run_at or job.created_at for job in jobs)
        return self._table.expiry(latest + LISTED_RUN_SPAN)

    def update(
        self,
        job: Job,
        changes: dict[str, Any],
        *,
        allowed_statuses: Iterable[JobStatus] | None = None,
        schedule_version: int | None = None,
        next_run_before: datetime | None = None,
        revision: int | None = None,
        revise: bool = False,
    ) -> Job:
        """Set some of a job's fields if it is in one of `allowed_statuses` (and at `schedule_version`,
        and at `revision`, and, with `next_run_before`, if its next_run_at is missing or earlier: never
        moved back). `revise`: a change through the API, which adds one to the job's revision.

        Raises LostRace when the job is missing or its state no longer matches, IllegalTransition
        (before writing) for a status change the lifecycle does not allow from `allowed_statuses`.
        """
        allowed = None if allowed_statuses is None else list(allowed_statuses)
        if "status" in changes:
            lifecycle.check_status_change(allowed or list(JobStatus), changes["status"])
        names: dict[str, str] = {"#pk": "pk"}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        attributes = job_attributes(changes)
        attributes.update(list_keys.index_keys(job, changes))
        if job.listed_in:
            # Changed: listed on its own from now on (its batch's entry passes over it), so that its
            # list entry outlives whatever this change does to when it ends.
            attributes["owner_pk"] = keys.owner_pk(job.owner)
            if "status" not in changes and job.status in (JobStatus.ACTIVE, JobStatus.PAUSED):
                # (its expiry from its creation, for a run ending in its batch's ends item: kept again)
                attributes["expires_at"] = None
        if "status" in changes:
            status = changes["status"]
            # A finished job expires with its history; a revived one is kept again.
            final = status in (JobStatus.CANCELLED, JobStatus.COMPLETED)
            attributes["expires_at"] = (
                self._table.expiry(changes.get("updated_at") or job.updated_at) if final else None
            )
        for i, (name, value) in enumerate(attributes.items()):
            names[f"#a{i}"] = name
            if value is None:
                removes.append(f"#a{i}")
            else:
                values[f":a{i}"] = value
                sets.append(f"#a{i} = :a{i}")
        if revise:
            names["#rev"] = "revision"
            sets.append("#rev = if_not_exists(#rev, :zero) + :one")
            values.update({":zero": 0, ":one": 1})
        # A job item may hold a stale copy of its last execution (docs/upgrading.md): any write drops it.
        removes += ["last_execution", "last_execution_ms"]
        expression = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        conditions = ["attribute_exists(#pk)"]
        if allowed is not None:
            names["#st"] = "status"
            placeholders = []
            for i, status in enumerate(allowed):
                values[f":s{i}"] = status.value
                placeholders.append(f":s{i}")
            conditions.append(f"#st IN ({', '.join(placeholders)})")
        if schedule_version is not None:
            names["#sv"] = "schedule_version"
            values[":sv"] = schedule_version
            conditions.append("#sv = :sv")
        if revision is not None:
            names["#rev"] = "revision"
            values[":rev"] = revision
            # (an item without one reads as revision 0)
            conditions.append(
                "(#rev = :rev OR attribute_not_exists(#rev))" if revision == 0 else "#rev = :rev"
            )
        if next_run_before is not None:
            names["#next"] = "next_run_at"
            values[":next"] = to_rfc3339(next_run_before)
            conditions.append("(attribute_not_exists(#next) OR #next < :next)")
        tags = changes.get("tags")
        added, dropped = list_keys.tag_changes(job, tags) if "tags" in changes else ([], [])
        # New tag entries before the job, old ones after: a crash between leaves a stale entry (lists
        # check each job's tags), never a tagged job missing from its tag's list.
        if added:
            self._table.batch_write([put(entry) for entry in added])
        updating = partial(
            self._table.resource.update_item,
            Key=keys.job_key(job.id),
            UpdateExpression=expression,
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        try:
            response = call(updating)
        except LostRace:
            # (a job read as completed by a run that ended in its batch's ends item: completed on its
            # item first, as its run's end would have, then changed)
            if not self._complete_from_ends(job.id):
                raise
            response = call(updating)
        if dropped:
            self._table.batch_write([delete(entry) for entry in dropped])
        item = job_flags.settle(self._table, response["Attributes"])
        return job_from(item)

    def _complete_from_ends(self, job_id: str) -> bool:
        """Write on a job's item the run its batch's ends item holds for it (`complete_with_run`), if
        it holds one: True when the item carries it now."""
        item = call(lambda: self._table.resource.get_item(Key=keys.job_key(job_id), ConsistentRead=True)).get(
            "Item"
        )
        run = None if item is None else self._ends.run_of(item)
        if run is None:
            return False
        try:
            # (marked as its ends item's: the table's stream carried its end there already)
            _complete(self._table, run, run.status, run={**run_map(run), FROM_ENDS: 1})
        except LostRace:
            pass  # (completed meanwhile)
        return True

    def complete(self, job: Job, execution: Execution) -> int | None:
        """Complete a job whose last execution this was (a one-time job's, or a recurring job's last
        occurrence), recording it as the job's outcome in the same write (`record_outcome`: its
        consecutive failures returned; None for a skipped run, which records none). Only if the job
        still runs the schedule this execution belonged to; LostRace otherwise.

        The job keeps no copy of its last execution, only its outcome, a few bytes: readers take the
        execution from the job's partition (`get_with_last_execution`), or by the key the outcome
        names (`with_outcome_executions`). (A copy's bytes pushed job items over 1 KB, where every
        write of them costs two units.) The exception is `complete_with_run`'s.
        """
        # (a COMPLETED job is flagged only while its latest outcome is FAILED)
        outcome = execution.status if execution.status.ran_to_end else _outcome_status(job)
        item = _complete(self._table, execution, outcome)
        if not execution.status.ran_to_end:
            return None
        return int(item.get("failures", 0))

    def complete_with_run(self, execution: Execution) -> int:
        """`complete_with_run`, on this repository's table."""
        return complete_with_run(self._table, execution)

    def record_outcome(self, execution: Execution) -> int | None:
        """Record a finished execution (SUCCEEDED or FAILED) as its job's outcome, unless the job has
        recorded this one already or one that finished after it (a redelivered message, runs ending
        out of order). Returns the job's consecutive failures with it, or None when not recorded (or
        the job is gone)."""
        sets, removes, values = outcome_update(execution)
        # The flag of an ACTIVE (or COMPLETED) job, as most are: one PAUSED or CANCELLED meanwhile has
        # its flag settled by a second write.
        flag = list_keys.flag_of(JobStatus.ACTIVE, execution.status)
        job_flags.set_flag(flag, sets, removes, values)
        # (a recurring job, or a run by hand: listed on its own, if its batch's entry listed it)
        job_flags.list_on_own(execution.owner, sets, values)
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            response = call(
                partial(
                    self._table.resource.update_item,
                    Key=keys.job_key(execution.job_id),
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(outcome_at) "
                    "OR outcome_at < :oat OR (outcome_at = :oat AND outcome_run < :orun))",
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
            )
        except LostRace:
            return None
        return int(job_flags.settle(self._table, response["Attributes"]).get("failures", 0))

    # ------------------------------------------------------- pause protocol
    def note_ran_while_paused(self, job: Job, execution: Execution, finished: datetime) -> bool:
        """Note on a paused one-time job that its run (`execution`) ended at `finished`, if the job was
        paused from that run's schedule version; False if it was not (nothing to note)."""
        condition = lifecycle.condition(
            JOB_TRANSITIONS["note_ran_while_paused"], schedule_version=execution.schedule_version
        )
        try:
            call(
                partial(
                    self._table.resource.update_item,
                    Key=keys.job_key(job.id),
                    UpdateExpression="SET ran_at = :at",
                    ConditionExpression=condition.expression,
                    ExpressionAttributeNames=condition.names,
                    ExpressionAttributeValues={**condition.values, ":at": to_rfc3339(finished)},
                )
            )
        except LostRace:
            return False
        return True

    def resume_with_run(self, job: Job, run: Execution, now: datetime, *, stored: bool = True) -> Job:
        """Resume a paused one-time job at the version of its run under way, so that the run goes on
        and completes it: one transaction, which holds only while the run is still RUNNING or
        RETRYING (`stored`; else, a run under its pack's lease: while nothing of it is stored) and the
        job still paused at the version read. Raises LostRace when either changed."""
        under_way = (
            lifecycle.condition(EXECUTION_TRANSITIONS["still_under_way"])
            if stored
            else lifecycle.Condition("attribute_not_exists(pk)", {}, {})
        )
        paused = lifecycle.condition(
            JOB_TRANSITIONS["resume_with_run"], schedule_version=job.schedule_version
        )
        flag = list_keys.flag_of(JobStatus.ACTIVE, _outcome_status(job))
        self._table.transact(
            [
                {
                    "ConditionCheck": {
                        "TableName": self._table.name,
                        "Key": keys.execution_key(run.job_id, run.scheduled_at, run.id),
                        "ConditionExpression": under_way.expression,
                        # (DynamoDB refuses them empty)
                        **({"ExpressionAttributeNames": under_way.names} if under_way.names else {}),
                        **({"ExpressionAttributeValues": under_way.values} if under_way.values else {}),
                    }
                },
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": keys.job_key(job.id),
                        # next_run_at: the run's instant, as on an active one-time job until it completes
                        "UpdateExpression": "SET #st = :active, schedule_version = :run, updated_at = :now, "
                        "next_run_at = :run_at, owner_pk = :owner_pk, #rev = if_not_exists(#rev, :zero) + :one"
                        + (", flag = :flag" if flag else "")
                        + " REMOVE paused_version, ran_at, queued_run_at, expires_at"
                        + ("" if flag else ", flag"),
                        "ConditionExpression": paused.expression,
                        "ExpressionAttributeNames": {**paused.names, "#rev": "revision"},
                        "ExpressionAttributeValues": {
                            **paused.values,
                            ":active": JobStatus.ACTIVE.value,
                            ":run": run.schedule_version,
                            ":run_at": to_rfc3339(run.scheduled_at),
                            ":now": to_rfc3339(now),
                            ":owner_pk": keys.owner_pk(job.owner),
                            ":zero": 0,
                            ":one": 1,
                            **({":flag": flag} if flag else {}),
                        },
                    }
                },
            ]
        )
        item = call(lambda: self._table.resource.get_item(Key=keys.job_key(job.id), ConsistentRead=True)).get(
            "Item"
        )
        if item is None:
            raise LostRace(f"job {job.id} is gone")
        return job_from(job_flags.settle(self._table, dict(item)))


def _outcome_status(job: Job) -> ExecutionStatus | None:
    return None if job.outcome is None else job.outcome.status


def complete_with_run(table: Table, execution: Execution) -> int:
    """`JobRepository.complete` for a one-time job's scheduled run that ran to its end, the run stored
    on the job's item in the same one write (`codec.runs.run_map`), instead of on an item of its own: the
    caller has checked that it fits (`codec.runs.run_fits`). Returns the job's consecutive failures.
    LostRace when the job no longer runs that schedule (paused, cancelled, rescheduled), or carries
    a run already (revived after one: that one stays)."""
    assert execution.status.ran_to_end and not execution.manual, "a scheduled run that ran"
    item = _complete(table, execution, execution.status, run=run_map(execution))
    return int(item.get("failures", 0))


def _complete(
    table: Table,
    execution: Execution,
    outcome: ExecutionStatus | None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The write that completes a job (`complete`), with `run` on it if given; the item written."""
    finished = execution.finished_at or execution.scheduled_at
    sets, removes, values = outcome_update(execution) if execution.status.ran_to_end else ([], [], {})
    flag = list_keys.flag_of(JobStatus.COMPLETED, outcome)
    job_flags.set_flag(flag, sets, removes, values)
    if flag is not None:
        # (by_flag holds only jobs with an owner_pk; the plain end of a run writes no index entry)
        job_flags.list_on_own(execution.owner, sets, values)
    condition = lifecycle.condition(JOB_TRANSITIONS["complete"], schedule_version=execution.schedule_version)
    expression, names = condition.expression, dict(condition.names)
    if run is not None:
        sets.append("#run = :run")
        values[":run"] = run
        names["#run"] = RUN
        expression += " AND attribute_not_exists(#run)"
    completing = partial(
        table.resource.update_item,
        Key=keys.job_key(execution.job_id),
        UpdateExpression="SET " + ", ".join(["#st = :done", "expires_at = :exp", *sets]) + " "
        # (and a stale copy of the last execution, which every write to a job drops)
        "REMOVE " + ", ".join([*COMPLETION_REMOVES, *removes]),
        ConditionExpression=expression,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={
            ":done": JobStatus.COMPLETED.value,
            ":exp": table.expiry(finished),
            **condition.values,
            **values,
        },
        ReturnValues="ALL_NEW",
    )
    return job_flags.outlived_entry(table, job_flags.settle(table, call(completing)["Attributes"]))
