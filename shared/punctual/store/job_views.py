"""Jobs as users list and see them: pages of an owner's jobs, and jobs with their last executions.

Reads only: the by_owner index (keys only; its jobs read by BatchGetItem, one per index page, none
per job), a job's partition (the job and its executions, newest first), and the executions the jobs'
outcomes name (one BatchGetItem, eventually consistent, a projection without results). A job's last
execution is the newest of its executions to have run to its end: the newest alone first (usually
it, a read unit even when executions carry large results), then LAST_EXECUTION_READ at a time, for
at most LAST_EXECUTION_PAGES pages in all (executions under way or skipped are passed over).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from punctual import resources
from punctual.concurrency import parallel_map
from punctual.models import Execution, ExecutionStatus, Job, JobStatus
from punctual.observability import logger
from punctual.store import codec, keys
from punctual.store.table import Page, Table, call, cursor_key
from punctual.validation import has_tag

LAST_EXECUTION_READ = 4
LAST_EXECUTION_PAGES = 6


class JobsRead(NamedTuple):
    """Jobs by id, and apart the ids of items that exist but cannot be read (e.g. a time zone this
    runtime's tzdata no longer has), with the reason."""

    found: dict[str, Job]
    unreadable: dict[str, str]

    def readable(self) -> dict[str, Job]:
        """The jobs found, the unreadable ones logged as errors."""
        for job_id, error in self.unreadable.items():
            logger.error("job item cannot be read", extra={"job_id": job_id, "error": error})
        return self.found


class JobViews:
    def __init__(self, table: Table) -> None:
        self._table = table

    def get_many(self, job_ids: Iterable[str]) -> JobsRead:
        raise NotImplementedError  # JobRepository's

    def page(
        self,
        owner: str,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        tag: tuple[str, str | None] | None = None,
        *,
        outcome: ExecutionStatus | None = None,
        name_prefix: str | None = None,
    ) -> Page:
        """A page of the owner's jobs, newest first, from the by_owner index.

        With a filter (status, tag: `key`, and a value or None for any; outcome; name prefix: all
        must match), the index (which holds keys only) is read on, its jobs filtered, until the page
        is full or the index ends, but at most `list_read_budget` jobs are read: past that the page
        may be short, even empty, and its `last_key` says where to continue. Each index page costs
        one Query and one BatchGetItem, whatever the filter, and no read per job.
        """

        def wanted(job: Job) -> bool:
            return (
                (status is None or job.status is status)
                and (tag is None or has_tag(job.tags, tag))
                and (outcome is None or (job.outcome is not None and job.outcome.status is outcome))
                and (name_prefix is None or job.name.startswith(name_prefix))
            )

        read_budget = self._table.list_read_budget
        if status is None and tag is None and outcome is None and name_prefix is None:
            response = self._query_owner(owner, limit, start_key)
            page = list(self._jobs_of(response.get("Items", [])).values())
            return Page(page, response.get("LastEvaluatedKey"))
        found: list[Job] = []
        read = 0
        chunk = limit
        while True:
            response = self._query_owner(owner, min(chunk, read_budget - read), start_key)
            index_items = response.get("Items", [])
            jobs = self._jobs_of(index_items)
            read += len(index_items)
            for i, entry in enumerate(index_items):
                job = jobs.get(keys.job_id_of(str(entry["pk"])))
                if job is not None and wanted(job):
                    found.append(job)
                    if len(found) == limit:
                        # Continue after this job; at the index's end only if it was its last entry.
                        last = i == len(index_items) - 1 and "LastEvaluatedKey" not in response
                        return Page(found, None if last else _index_key(entry))
            start_key = response.get("LastEvaluatedKey")
            if start_key is None or read >= read_budget:
                return Page(found, start_key)
            chunk = min(chunk * 2, 100)

    def with_outcome_executions(self, jobs: Sequence[Job]) -> list[Job]:
        """These jobs with the executions their outcomes name as their last executions: one
        BatchGetItem (eventually consistent) for up to 100 jobs, none for a job without an outcome
        (never run to an end, or whose last run ended before outcomes were recorded on jobs)."""
        wanted = [
            keys.execution_key(job.id, job.outcome.scheduled_at, job.outcome.execution_id)
            for job in jobs
            if job.outcome is not None
        ]
        found: dict[str, Execution] = {}
        # (no result, no delivery records: what a job shows of its last execution, and fewer bytes back)
        projection, names = codec.SHOWN_EXECUTION_ATTRIBUTES
        for item in self._table.batch_get(wanted, consistent=False, projection=projection, names=names):
            shown = _shown_execution(item)
            if shown is not None:
                found[shown.id] = shown
        return [
            replace(job, last_execution=None if job.outcome is None else found.get(job.outcome.execution_id))
            for job in jobs
        ]

    def get_with_last_execution(self, job_id: str) -> Job | None:
        """A job as users see it: with its last execution, read from the same partition in the same
        consistent Query (the job item sorts after its executions: newest first, it comes first)."""
        response = call(
            lambda: self._table.resource.query(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": keys.job_pk(job_id)},
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=2,  # the job and its newest execution
            )
        )
        items = response.get("Items", [])
        if not items or items[0]["sk"] != keys.JOB_SK:
            return None
        job = codec.job_from(items[0])
        last = _last_final(items[1:])
        if last is None and "LastEvaluatedKey" in response:
            last = self._last_execution(job_id, start_key=response["LastEvaluatedKey"], consistent=True)
        return replace(job, last_execution=last)

    def with_last_executions(self, jobs: Sequence[Job]) -> list[Job]:
        """These jobs with their last executions (one Query each, side by side)."""
        lasts = parallel_map(lambda job: self._last_execution(job.id, consistent=False), list(jobs))
        return [replace(job, last_execution=last) for job, last in zip(jobs, lasts, strict=True)]

    def _last_execution(
        self, job_id: str, *, consistent: bool, start_key: dict[str, Any] | None = None
    ) -> Execution | None:
        """The job's most recent execution to have run to its end (SUCCEEDED or FAILED): newest first,
        past those under way or skipped (a page at a time, at most LAST_EXECUTION_PAGES pages: the
        newest alone, then 20 more; after `get_with_last_execution`'s Query has read the newest, 24 more)."""
        for page in range(LAST_EXECUTION_PAGES):
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {
                    ":pk": keys.job_pk(job_id),
                    ":prefix": keys.EXECUTION_SK_PREFIX,
                },
                "ScanIndexForward": False,
                "ConsistentRead": consistent,
                # (the newest alone first, unless the job's Query has read it)
                "Limit": 1 if page == 0 and start_key is None else LAST_EXECUTION_READ,
            }
            if start_key:
                kwargs["ExclusiveStartKey"] = start_key
            response: dict[str, Any] = call(partial(self._table.resource.query, **kwargs))
            last = _last_final(response.get("Items", []))
            start_key = response.get("LastEvaluatedKey")
            if last is not None or start_key is None:
                return last
        return None

    def _query_owner(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> dict[str, Any]:
        index = resources.BY_OWNER_INDEX
        kwargs: dict[str, Any] = {
            "IndexName": index.name,
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": index.partition_key},
            "ExpressionAttributeValues": {":k": keys.owner_pk(owner)},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            # A cursor signed before the index changed (the by_owner_status index's keys) would make
            # DynamoDB refuse the query: a stale cursor is bad input, not a server error.
            kwargs["ExclusiveStartKey"] = cursor_key(
                start_key,
                equal={index.partition_key: keys.owner_pk(owner), "sk": keys.JOB_SK},
                prefixed={"pk": keys.JOB_PK_PREFIX, index.sort_key: ""},
            )
        response: dict[str, Any] = call(lambda: self._table.resource.query(**kwargs))
        return response

    def _jobs_of(self, index_items: Sequence[dict[str, Any]]) -> dict[str, Job]:
        """The jobs of index entries, in the index's order. The index holds keys only, so the jobs are
        read from the table; an entry whose job has just expired is left out."""
        ids = [keys.job_id_of(str(item["pk"])) for item in index_items]
        jobs = self.get_many(ids).readable()
        return {job_id: jobs[job_id] for job_id in ids if job_id in jobs}


def _index_key(item: dict[str, Any]) -> dict[str, Any]:
    """An index entry's key, as the ExclusiveStartKey to continue after it."""
    index = resources.BY_OWNER_INDEX
    names = (resources.TABLE.partition_key, resources.TABLE.sort_key, index.partition_key, index.sort_key)
    return {name: item[name] for name in names}


def _last_final(items: Iterable[dict[str, Any]]) -> Execution | None:
    for item in items:
        if not keys.is_execution_sk(str(item["sk"])):
            continue
        shown = _shown_execution(item)
        # (one skipped, CANCELLED for its job paused, cancelled or rescheduled, is not shown)
        if shown is not None and shown.status.ran_to_end:
            return shown
    return None


def _shown_execution(item: dict[str, Any]) -> Execution | None:
    """An execution as shown on its job: no result (it stays on the execution), a short error; None
    for one this version cannot read (a status it does not know)."""
    try:
        execution = codec.execution_from(item)
    except (KeyError, ValueError, TypeError):
        return None
    error = None if execution.error is None else execution.error[:200]
    return replace(execution, result=None, error=error, deliveries=())
