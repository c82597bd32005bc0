"""Reads of executions (pk JOB#<job id>, sk EXEC#<scheduled ms>#<execution id>): one by key
(consistent), or many in one call; a job's executions newest first, by a range of instants and a
status filter (`page`, at most the list's read budget a request); those before one (`before`); a
one-time job's scheduled run of a schedule version; the statuses of many (BatchGetItem, a
projection). Nothing here writes.

A one-time job's run that ended under its pack's lease may be stored on its job's item instead
(`codec.runs.embedded_execution`): one by key, a page and a one-time job's scheduled run read it there
too; many in one call (the worker's reads, which read the job beside: `domain.models.ran_on_job`) and the
statuses of many (of markers a dispatch stored, never such a run) do not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from typing import Any

from punctual.domain.errors import UnreadableItem
from punctual.domain.executions import Execution, ExecutionRef, ExecutionStatus, execution_as_seen
from punctual.domain.models import DueMarker, in_flight
from punctual.platform.timefmt import to_rfc3339
from punctual.ports.pages import Page, within_bytes
from punctual.store import keys
from punctual.store.batch_ends import BatchEndRepository
from punctual.store.codec.executions import execution_from
from punctual.store.codec.jobs import job_from
from punctual.store.codec.runs import embedded_execution
from punctual.store.table import Table, call, cursor_key


def _key_of(item: dict[str, Any]) -> tuple[str, str]:
    return str(item["pk"]), str(item["sk"])


def _key_of_execution(execution: Execution) -> dict[str, Any]:
    """A page's continuation after this execution."""
    return keys.execution_key(execution.job_id, execution.scheduled_at, execution.id)


class ExecutionReads:
    def __init__(self, table: Table) -> None:
        self._table = table
        # (a batch's job's run may have ended in its batch's ends item: laid over its item as read)
        self._ends = BatchEndRepository(table)

    def get(self, job_id: str, scheduled_at: datetime, execution_id: str) -> Execution | None:
        """Raises UnreadableItem for an item this version cannot read (a newer version's status). A
        scheduled run not stored on an item of its own is looked for on its job's item (a read more)."""
        stored = self._stored(job_id, scheduled_at, execution_id)
        if stored is not None or not _scheduled_id(execution_id):
            return stored
        run = _on_job(self._job_item(job_id))
        return run if run is not None and run.id == execution_id else None

    def _job_item(self, job_id: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = call(
            lambda: self._table.resource.get_item(Key=keys.job_key(job_id), ConsistentRead=True)
        ).get("Item")
        return self._ends.with_end(item)

    def _stored(self, job_id: str, scheduled_at: datetime, execution_id: str) -> Execution | None:
        key = keys.execution_key(job_id, scheduled_at, execution_id)
        item = call(lambda: self._table.resource.get_item(Key=key, ConsistentRead=True)).get("Item")
        if item is None:
            return None
        try:
            return execution_from(item)
        except (KeyError, ValueError, TypeError) as exc:
            raise UnreadableItem(f"execution {execution_id}: {type(exc).__name__}: {exc}") from exc

    def get_many(
        self, refs: Iterable[ExecutionRef]
    ) -> tuple[dict[ExecutionRef, Execution], dict[ExecutionRef, str]]:
        """Executions by (job id, instant, execution id), read consistently (one BatchGetItem a
        hundred); apart, with why, those this version cannot read. One not stored is in neither, nor
        one stored on its job's item (no job is read here: `domain.models.ran_on_job` on the job read)."""
        by_key = {_key_of(keys.execution_key(*ref)): ref for ref in refs}
        found: dict[ExecutionRef, Execution] = {}
        unreadable: dict[ExecutionRef, str] = {}
        for item in self._table.batch_get([{"pk": pk, "sk": sk} for pk, sk in by_key]):
            ref = by_key[_key_of(item)]
            try:
                found[ref] = execution_from(item)
            except (KeyError, ValueError, TypeError) as exc:
                unreadable[ref] = f"{type(exc).__name__}: {exc}"[:500]
        return found, unreadable

    def statuses(self, markers: Iterable[DueMarker]) -> dict[str, ExecutionStatus | None]:
        """The status of each of these markers' executions that exists, by execution id (consistent);
        None for a status this code does not know (one written by a newer version, say): it exists,
        and is left as it is."""
        wanted = [
            keys.execution_key(m.job_id, m.scheduled_at, m.execution_id)
            for m in {m.execution_id: m for m in markers}.values()
        ]
        items = self._table.batch_get(wanted, projection="id, #st", names={"#st": "status"})
        known = {status.value: status for status in ExecutionStatus}
        return {str(item["id"]): known.get(str(item.get("status"))) for item in items}

    def page(
        self,
        job_id: str,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        status: ExecutionStatus | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
        size: Callable[[Execution], int] | None = None,
    ) -> Page:
        """A page of the job's executions, newest first: those scheduled at or after `since` and
        before `until` (a range of the sort key: nothing else is read), and with `status` (a filter:
        the executions in the range are read on until the page is full, at most `list_read_budget` a
        request, past which the page may be short, even empty, with a `last_key` to continue from).
        With `now`, as users see them then (`executions.execution_as_seen`), the status filter too, and on
        a first page the job's run under way that is not stored yet (`models.in_flight`). The job's
        run stored on its item (`codec.runs.embedded_execution`) is in its place, filters applied to it as
        to the others: a read of the job a page. With `size` (an execution's bytes in the answer), the
        page ends after the execution that brings it to PAGE_BYTES, its cursor after that one."""
        page = self._page(job_id, limit, start_key, status=status, since=since, until=until, now=now)
        item = self._job_item(job_id)
        run = _on_job(item)
        if run is not None and (status is None or run.status is status) and _between(run, since, until):
            page = _merged(page, run, limit, start_key)
        if (
            item is not None
            and now is not None
            and not start_key
            and status in (None, ExecutionStatus.RUNNING)
        ):
            page = self._with_in_flight(item, page, limit, now, since, until)
        # (a receiver's answers, each within its bounds, can still add up past what Lambda answers)
        return within_bytes(page, size, _key_of_execution)

    def _with_in_flight(
        self,
        item: dict[str, Any],
        page: Page,
        limit: int,
        now: datetime,
        since: datetime | None,
        until: datetime | None,
    ) -> Page:
        """The page with the job's run under way, unstored, in its place (newest first): a pack's
        member is stored only at its end. Costs a read of that execution unless the page shows it."""
        running = in_flight(job_from(item), now)
        if running is None or any(e.id == running.id for e in page.items):
            return page
        at = running.scheduled_at
        if (since is not None and at < since) or (until is not None and at >= until):
            return page
        items = list(page.items)
        place = sum(1 for e in items if (e.scheduled_at, e.id) > (at, running.id))
        if place >= limit or (place == len(items) and page.last_key is not None):
            return page  # past this page
        if self._stored(running.job_id, at, running.id) is not None:
            return page  # stored: shown as it is where it belongs
        items.insert(place, running)
        if len(items) > limit:
            last = items.pop()
            return Page(items, _key_of_execution(last))
        return Page(items, page.last_key)

    def _page(
        self,
        job_id: str,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        status: ExecutionStatus | None,
        since: datetime | None,
        until: datetime | None,
        now: datetime | None,
    ) -> Page:
        pk = keys.job_pk(job_id)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": pk, ":prefix": keys.EXECUTION_SK_PREFIX},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if since is not None or until is not None:
            low, high = keys.executions_between(since, until)
            kwargs["KeyConditionExpression"] = "pk = :pk AND sk BETWEEN :low AND :high"
            kwargs["ExpressionAttributeValues"] = {":pk": pk, ":low": low, ":high": high}
        if start_key:
            kwargs["ExclusiveStartKey"] = cursor_key(
                start_key, equal={"pk": pk}, prefixed={"sk": keys.EXECUTION_SK_PREFIX}
            )

        def shown(items: list[dict[str, Any]]) -> list[Execution]:
            executions = [execution_from(i) for i in items]
            return executions if now is None else [execution_as_seen(e, now) for e in executions]

        if status is None:
            response = call(lambda: self._table.resource.query(**kwargs))
            return Page(shown(response.get("Items", [])), response.get("LastEvaluatedKey"))
        kwargs["FilterExpression"] = "#st = :st"
        kwargs["ExpressionAttributeNames"] = {"#st": "status"}
        kwargs["ExpressionAttributeValues"][":st"] = status.value
        if now is not None and status in (ExecutionStatus.QUEUED, ExecutionStatus.RUNNING):
            # A claim made ahead of its instant (RUNNING, no start recorded) shows as QUEUED until then.
            ahead = "#st = :running AND attribute_not_exists(started_at) AND scheduled_at > :now"
            kwargs["FilterExpression"] = (
                f"#st = :st OR ({ahead})"
                if status is ExecutionStatus.QUEUED
                else "#st = :st AND (attribute_exists(started_at) OR scheduled_at <= :now)"
            )
            kwargs["ExpressionAttributeValues"][":now"] = to_rfc3339(now)
            if status is ExecutionStatus.QUEUED:
                kwargs["ExpressionAttributeValues"][":running"] = ExecutionStatus.RUNNING.value
        budget = self._table.list_read_budget
        found: list[dict[str, Any]] = []
        read = 0
        while True:
            kwargs["Limit"] = min(100, budget - read)
            response = call(partial(self._table.resource.query, **kwargs))
            read += int(response.get("ScannedCount", 0))
            found += response.get("Items", [])
            last_key = response.get("LastEvaluatedKey")
            if len(found) >= limit:
                # Continue after the page's last execution (the query may have read past it).
                more = len(found) > limit or last_key is not None
                page = found[:limit]
                key = {"pk": page[-1]["pk"], "sk": page[-1]["sk"]}
                return Page(shown(page), key if more else None)
            if last_key is None or read >= budget:
                return Page(shown(found), last_key)
            kwargs["ExclusiveStartKey"] = last_key

    def before(self, execution: Execution, limit: int = 10) -> list[Execution]:
        """The job's executions scheduled before this one, newest first (at most `limit`; consistent:
        a run that has just started shows). Not a run stored on its job's item: one that ended (what
        this is read for is a run under way or waiting), of a one-time job (whose overlap rule is never
        read)."""
        response = call(
            lambda: self._table.resource.query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :this",
                ExpressionAttributeValues={
                    ":pk": keys.job_pk(execution.job_id),
                    ":first": keys.EXECUTION_SK_PREFIX,
                    ":this": keys.execution_sk(execution.scheduled_at, execution.id),
                },
                ScanIndexForward=False,
                Limit=limit + 1,
                ConsistentRead=True,
            )
        )
        found = [execution_from(i) for i in response.get("Items", [])]
        return [e for e in found if e.id != execution.id][:limit]

    def scheduled_run(self, job_id: str, schedule_version: int) -> Execution | None:
        """The scheduled (not extra) execution of a one-time job's schedule version, if stored — there
        is one per version: its id comes from the job, its instant and the version (consistent). On
        its job's item too (read by the same Query: it sorts first)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "FilterExpression": "(begins_with(sk, :prefix) AND schedule_version = :sv) OR sk = :job",
            "ExpressionAttributeValues": {
                ":pk": keys.job_pk(job_id),
                ":prefix": keys.EXECUTION_SK_PREFIX,
                ":sv": schedule_version,
                ":job": keys.JOB_SK,
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        while True:
            response: dict[str, Any] = call(partial(self._table.resource.query, **kwargs))
            for item in response.get("Items", []):
                if item["sk"] == keys.JOB_SK:
                    run = _on_job(self._ends.with_end(item))
                    if run is not None and run.schedule_version == schedule_version:
                        return run
                elif not item.get("manual", False):
                    return execution_from(item)
            if "LastEvaluatedKey" not in response:
                return None
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _scheduled_id(execution_id: str) -> bool:
    """Whether an execution id is a scheduled run's (`execution_id_for`: it ends in its version), not
    one by hand's."""
    return execution_id.rpartition(".")[2].isdigit()


def _on_job(item: dict[str, Any] | None) -> Execution | None:
    return None if item is None else embedded_execution(item)


def _between(execution: Execution, since: datetime | None, until: datetime | None) -> bool:
    low, high = keys.executions_between(since, until)
    return low <= keys.execution_sk(execution.scheduled_at, execution.id) <= high


def _merged(page: Page, run: Execution, limit: int, start_key: dict[str, Any] | None) -> Page:
    """The page with the job's run stored on its item in its place (newest first, as its key would
    sort), if its place is on this page: after the page it continues from (`start_key`), and before
    where the page stops (its `last_key`). One stored on an item of its own as well (a duplicate's
    run) is shown as that item."""
    items = list(page.items)
    if any(e.id == run.id for e in items):
        return page
    sk = keys.execution_sk(run.scheduled_at, run.id)
    if start_key and sk >= str(start_key.get("sk", "")):
        return page  # on a page before
    if page.last_key is not None and sk <= str(page.last_key.get("sk", "")):
        return page  # on a page after
    place = sum(1 for e in items if keys.execution_sk(e.scheduled_at, e.id) > sk)
    items.insert(place, run)
    if len(items) > limit:
        items.pop()
        return Page(items, _key_of_execution(items[-1]))
    return Page(items, page.last_key)
