"""Executions: pk JOB#<job id>, sk EXEC#<scheduled ms>#<execution id>, in their job's partition.

Reads: execution_reads.py. Writes: each status change is one conditional UpdateItem through the
lifecycle's table (`lifecycle.EXECUTION_TRANSITIONS`): claim, release_claim, finish_attempt,
retry_later, put_end (a first attempt run under its pack's lease, stored at its end: a one-time
job's on its job's item, with the job's completion), skip (skip_while_paused: a transaction with a
check that the job is still paused), give_up, requeue_dead_lettered. A write whose transition
starts from ABSENT stores the execution, its fixed fields set if not there yet. New executions (with
the markers filed with them) go in batches, unconditionally: only for executions read as absent a
moment ago. (deliveries.py keeps the notifications' deliveries on the execution's item.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus, Waiter
from punctual.domain.models import DueMarker, ran_on_job
from punctual.platform.timefmt import to_epoch_ms, to_rfc3339
from punctual.store import keys, lifecycle
from punctual.store.codec.executions import EXECUTION_FIXED, execution_from, execution_item, waiter_map
from punctual.store.codec.jobs import job_from
from punctual.store.codec.markers import marker_item
from punctual.store.codec.runs import RUN, run_fits, run_map
from punctual.store.execution_reads import ExecutionReads
from punctual.store.jobs import complete_with_run
from punctual.store.lifecycle import EXECUTION_TRANSITIONS as _T
from punctual.store.lifecycle import JOB_TRANSITIONS
from punctual.store.table import call, put


class ExecutionRepository(ExecutionReads):
    # ----------------------------------------------------------------- writes
    def put_new_many(self, executions: Iterable[Execution], markers: Iterable[DueMarker] = ()) -> None:
        """Store executions read as absent a moment ago, and markers, 25 a call side by side.

        BatchWriteItem has no conditions, hence "read as absent": only a dispatch of the same marker
        running at the same moment could have written the execution meanwhile, which is why a scanner
        tick holds a lease on its shards (`ScannerState.acquire_leases`) and leaves markers an API
        request is dispatching alone (`DueMarker.handoff_until`).
        """
        retention, shards = self._table.retention, self._table.shard_count
        self._table.batch_write(
            [put(execution_item(e, retention)) for e in executions]
            + [put(marker_item(m, shards)) for m in markers]
        )

    def put_if_absent(self, execution: Execution) -> None:
        """Store a not-started execution unless it is stored already (by another worker that has
        claimed it since, say: that copy stands)."""
        try:
            call(
                lambda: self._table.resource.put_item(
                    Item=execution_item(execution, self._table.retention),
                    ConditionExpression="attribute_not_exists(pk)",
                )
            )
        except LostRace:
            pass

    def claim(
        self,
        execution: Execution,
        *,
        now: datetime,
        lease_until: datetime,
        lateness_ms: int | None,
        task_version: int | None = None,
        stored: bool = False,
    ) -> Execution:
        """(not stored)/QUEUED/RETRYING (or RUNNING with an expired lease) -> RUNNING, counting one more
        attempt. An execution not stored yet (the scanner stores none) is stored by its first claim.
        Without `lateness_ms` (a claim made before the execution's instant) its start is recorded by
        the write of its attempt's outcome. `task_version`: the version of the job's named task this
        attempt runs, recorded with it. `stored`: the copy was read from the store, so the claim only
        changes the item (a shorter write, and LostRace if the item is gone)."""
        started = (
            ""
            if lateness_ms is None
            else ", started_at = if_not_exists(started_at, :now), lateness_ms = if_not_exists(lateness_ms, :late)"
        )
        values: dict[str, Any] = (
            {":now": to_rfc3339(now), ":late": lateness_ms} if lateness_ms is not None else {}
        )
        if task_version is not None:
            started += ", task_version = :tv"
            values[":tv"] = task_version
        return self._change(
            execution,
            _T["claim"],
            "SET #st = :running, attempts = if_not_exists(attempts, :zero) + :one, lease_until = :lease"
            + started
            + " REMOVE next_attempt_at",
            {
                ":running": ExecutionStatus.RUNNING.value,
                ":zero": 0,
                ":one": 1,
                ":lease": to_epoch_ms(lease_until),
                **values,
            },
            now=now,
            stored=stored,
        )

    def release_claim(self, running: Execution) -> None:
        """Give back a claim its worker will not use (it could not tell whether to run or skip the
        execution): back to waiting, the attempt not counted, so that the message, looked at again,
        is not held back by a lease no one uses. Raises LostRace if the claim is no longer this one."""
        first = running.attempts <= 1
        assert running.lease_until is not None, "a claim has a lease"
        self._change(
            running,
            _T["release_claim"],
            "SET #st = :back, attempts = attempts - :one REMOVE lease_until"
            + (", started_at, lateness_ms" if first else ""),
            {":back": (ExecutionStatus.QUEUED if first else ExecutionStatus.RETRYING).value, ":one": 1},
        )

    def wait_behind(self, busy: Execution, waiter: Execution) -> None:
        """Name `waiter`, a later run held back by its job's overlap rule, on the run it waits for, so
        that `busy`'s end sends it on at once. Raises LostRace when `busy` is no longer under way (it
        ended meanwhile: look again now)."""
        call(
            lambda: self._table.resource.update_item(
                Key=self.key(busy),
                UpdateExpression="SET waiter = :w",
                ConditionExpression="#st IN (:running, :retrying)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":w": waiter_map(Waiter(waiter.id, waiter.scheduled_at, waiter.schedule_version)),
                    ":running": ExecutionStatus.RUNNING.value,
                    ":retrying": ExecutionStatus.RETRYING.value,
                },
            )
        )

    def finish_attempt(
        self,
        execution: Execution,
        *,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str | None,
        result: Any,
    ) -> Execution:
        """RUNNING (this attempt) -> SUCCEEDED or FAILED (and its start, if its claim came before it)."""
        started, values = _start_of(execution)
        return self._change(
            execution,
            _T["finish_attempt"],
            "SET #st = :final, finished_at = :at, #err = :err, #res = :res, expires_at = :exp"
            + started
            + " REMOVE lease_until",
            {
                **values,
                ":final": status.value,
                ":at": to_rfc3339(finished_at),
                ":exp": self._table.expiry(finished_at),
                ":err": error,
                ":res": None if result is None else json.dumps(result),
            },
        )

    def put_end(self, execution: Execution) -> Execution:
        """A first attempt run under its pack's lease (nothing of it stored before) -> its end,
        SUCCEEDED or FAILED, or RETRYING until its `next_attempt_at`: its start, lateness and attempt
        in the same one write. Raises LostRace if it is stored otherwise (another worker claimed or
        ended it: that one stands).

        A one-time job's run that ran to its end is stored on its job's item instead, in the write
        that completes the job (`jobs.complete_with_run`): the one write for its end and its job,
        where the job's item stays within a write unit with it (`codec.runs.run_fits`; the copy returned
        says so: `job_failures`). Where it does not fit, or the job moved on meanwhile (paused,
        cancelled, rescheduled: the pause protocol's, `pausing.complete_job`), on an item of its own.
        A completing write that loses its condition may have lost it to itself (applied, then sent
        again by the client's retry after a timeout) or to another end of the same run (a worker
        whose pack's lease ran out, and the one that took it again): with the job carrying this run,
        nothing more is stored (`_on_job`)."""
        assert execution.started_at is not None and execution.lateness_ms is not None, "it started"
        if run_fits(execution):
            try:
                failures = complete_with_run(self._table, execution)
            except LostRace:
                stored = self._on_job(execution)
                if stored is not None:
                    return stored
            else:
                return replace(execution, lease_until=None, job_failures=failures)
        retrying = execution.status is ExecutionStatus.RETRYING
        ends_at = execution.next_attempt_at if retrying else execution.finished_at
        assert ends_at is not None, "an end has its time"
        update = (
            "SET #st = :end, attempts = :attempts, started_at = :began, lateness_ms = :late, "
            "#err = :err, expires_at = :exp"
        )
        values: dict[str, Any] = {
            ":end": execution.status.value,
            ":attempts": execution.attempts,
            ":began": to_rfc3339(execution.started_at),
            ":late": execution.lateness_ms,
            ":err": execution.error,
            ":exp": self._table.expiry(ends_at),
            ":at": to_rfc3339(ends_at),
        }
        update += ", next_attempt_at = :at" if retrying else ", finished_at = :at, #res = :res"
        if not retrying:
            values[":res"] = None if execution.result is None else json.dumps(execution.result)
        if execution.task_version is not None:
            update += ", task_version = :tv"
            values[":tv"] = execution.task_version
        return self._change(execution, _T["end_leased"], update, values)

    def retry_later(self, execution: Execution, *, next_attempt_at: datetime, error: str) -> Execution:
        """RUNNING (this attempt) -> RETRYING, to be picked up again at `next_attempt_at` (and its start,
        if its claim came before it)."""
        started, values = _start_of(execution)
        return self._change(
            execution,
            _T["retry_later"],
            "SET #st = :retrying, next_attempt_at = :next, #err = :err, expires_at = :exp"
            + started
            + " REMOVE lease_until",
            {
                **values,
                ":retrying": ExecutionStatus.RETRYING.value,
                ":exp": self._table.expiry(next_attempt_at),
                ":next": to_rfc3339(next_attempt_at),
                ":err": error,
            },
        )

    def skip_update(
        self, execution: Execution, *, finished_at: datetime, reason: str, status: ExecutionStatus
    ) -> tuple[str, lifecycle.Condition]:
        """The update and condition of `skip` (a transaction item, for the pause protocol), with the
        condition's names and values holding the update's too."""
        update = (
            "SET #st = :cancelled, finished_at = :at, #err = :err, expires_at = :exp "
            "REMOVE lease_until, next_attempt_at"
        )
        values: dict[str, Any] = {
            ":cancelled": status.value,
            ":at": to_rfc3339(finished_at),
            ":err": reason,
            ":exp": self._table.expiry(finished_at),
        }
        if execution.status is ExecutionStatus.RUNNING and execution.started_at is None:
            # Claimed ahead of its instant and never started: the claim's attempt is given back.
            update = update.replace(" REMOVE ", ", attempts = attempts - :one REMOVE ", 1)
            values[":one"] = 1
        condition = lifecycle.condition(_T["skip"], copy=execution)
        condition.names["#err"] = "error"
        condition.values.update(values)
        return update, condition

    def skip(
        self,
        execution: Execution,
        *,
        finished_at: datetime,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> None:
        """An execution that must not run -> CANCELLED (or SKIPPED, by the job's policy), only if it is
        still as this copy of it has it: a copy read before another worker claimed it must not cancel
        that worker's run (a RUNNING copy names its claim by its lease). Raises LostRace otherwise.
        (A run under way of a paused job is skipped with `skip_while_paused`.)"""
        update, condition = self.skip_update(execution, finished_at=finished_at, reason=reason, status=status)
        self._write(execution, update, condition, stores=_T["skip"].stores_absent(execution))

    def skip_while_paused(
        self,
        execution: Execution,
        *,
        finished_at: datetime,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> None:
        """`skip` for a run under way (RUNNING or RETRYING) of a paused job: in one transaction with a
        check that the job is still paused, so that a resume giving the job back this run's version
        (`JobRepository.resume_with_run`) and this cannot both happen. Raises LostRace otherwise."""
        update, condition = self.skip_update(execution, finished_at=finished_at, reason=reason, status=status)
        paused = lifecycle.condition(JOB_TRANSITIONS["still_paused"])
        self._table.transact(
            [
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": self.key(execution),
                        "UpdateExpression": update,
                        "ConditionExpression": condition.expression,
                        "ExpressionAttributeNames": condition.names,
                        "ExpressionAttributeValues": condition.values,
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": self._table.name,
                        "Key": keys.job_key(execution.job_id),
                        "ConditionExpression": paused.expression,
                        "ExpressionAttributeNames": paused.names,
                        "ExpressionAttributeValues": paused.values,
                    }
                },
            ]
        )

    def give_up(
        self,
        execution: Execution,
        *,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str,
        dead_lettered: bool = False,
    ) -> Execution:
        """(not stored)/any status that is not final -> `status` (FAILED when dead-lettered, which it
        then says)."""
        marked = ", dead_lettered = :dl" if dead_lettered else ""
        values: dict[str, Any] = {
            ":final": status.value,
            ":at": to_rfc3339(finished_at),
            ":exp": self._table.expiry(finished_at),
            ":err": error,
            **({":dl": True} if dead_lettered else {}),
        }
        return self._change(
            execution,
            _T["give_up"],
            f"SET #st = :final, finished_at = :at, #err = :err, expires_at = :exp{marked} "
            "REMOVE lease_until, next_attempt_at",
            values,
        )

    def requeue_dead_lettered(self, execution: Execution, now: datetime) -> Execution:
        """A dead-lettered execution (FAILED by the dead-letter handler) -> QUEUED, to run again once a
        message names it (its attempts so far still count). QUEUED already (a redrive interrupted
        before its message was sent) stays so. Raises LostRace otherwise."""
        return self._change(
            execution,
            _T["requeue_dead_lettered"],
            "SET #st = :queued, expires_at = :exp, redriven_at = :now "
            "REMOVE finished_at, #err, dead_lettered, lease_until, next_attempt_at",
            {
                ":queued": ExecutionStatus.QUEUED.value,
                ":now": to_rfc3339(now),
                ":exp": self._table.expiry(now),
            },
        )

    def key(self, execution: Execution) -> dict[str, str]:
        return keys.execution_key(execution.job_id, execution.scheduled_at, execution.id)

    def _on_job(self, execution: Execution) -> Execution | None:
        """After `complete_with_run` lost: this very end as its job's item carries it (its write had
        applied), or LostRace when the job carries another end of this run (that one stands, as for a
        lone run whose end write loses); None when the job carries none of it (store it apart)."""
        response = call(
            lambda: self._table.resource.get_item(Key=keys.job_key(execution.job_id), ConsistentRead=True)
        )
        item = response.get("Item")
        if item is None or not ran_on_job(job_from(item), execution.id):
            return None
        if item[RUN] != run_map(execution):
            raise LostRace(f"execution {execution.id} ended on its job by another worker")
        return replace(execution, lease_until=None, job_failures=int(item.get("failures", 0)))

    # ---------------------------------------------------------------- helpers
    def _change(
        self,
        execution: Execution,
        transition: lifecycle.Transition,
        update: str,
        values: dict[str, Any],
        *,
        now: datetime | None = None,
        stored: bool = False,
    ) -> Execution:
        condition = lifecycle.condition(transition, copy=execution, now=now, stored=stored)
        condition.values.update(values)
        if "#err" in update:
            condition.names["#err"] = "error"
        if "#res" in update:
            condition.names["#res"] = "result"
        stores = transition.stores_absent(execution) and not stored
        return self._write(execution, update, condition, stores=stores)

    def _write(
        self, execution: Execution, update: str, condition: lifecycle.Condition, *, stores: bool
    ) -> Execution:
        """Apply an update to an execution's item. Where the condition lets an absent item through
        (`stores`), the update stores it: the execution's fixed fields are set if not there yet."""
        names, values = dict(condition.names), dict(condition.values)
        if stores:
            item = execution_item(execution, self._table.retention)
            # (less what this update sets itself: two paths to one attribute are refused)
            fixed = {
                name: item[name] for name in EXECUTION_FIXED if name in item and f"{name} = " not in update
            }
            sets = []
            for i, (name, value) in enumerate(fixed.items()):
                names[f"#f{i}"] = name
                values[f":f{i}"] = value
                sets.append(f"#f{i} = if_not_exists(#f{i}, :f{i})")
            head, _, tail = update.partition(" REMOVE ")
            update = head + ", " + ", ".join(sets) + (f" REMOVE {tail}" if tail else "")
        response = call(
            lambda: self._table.resource.update_item(
                Key=self.key(execution),
                UpdateExpression=update,
                ConditionExpression=condition.expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        )
        return execution_from(response["Attributes"])


def _start_of(execution: Execution) -> tuple[str, dict[str, Any]]:
    """The SET clauses recording an attempt's start (kept if its claim recorded one), and their values;
    with the named task's version it ran, read at its start when its claim came before it."""
    if execution.started_at is None or execution.lateness_ms is None:
        return "", {}
    clauses = (
        ", started_at = if_not_exists(started_at, :began), lateness_ms = if_not_exists(lateness_ms, :late)"
    )
    values: dict[str, Any] = {":began": to_rfc3339(execution.started_at), ":late": execution.lateness_ms}
    if execution.task_version is not None:
        clauses += ", task_version = :tv"
        values[":tv"] = execution.task_version
    return clauses, values
