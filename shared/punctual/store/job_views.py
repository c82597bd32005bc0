"""Jobs as users list and see them: pages of an owner's jobs, and jobs with their last executions.

Reads: an access path of the owner's jobs (list_sources.py: a keys-only index, by_owner, by_flag,
by_name; or a tag's entries), whose page of jobs is read by BatchGetItem, one per entry page, none per
job; a job's partition (the job and its executions, newest first); and the executions the jobs'
outcomes name (one BatchGetItem, eventually consistent, a projection without results). A job's last
execution is the newest of its executions to have run to its end: the newest alone first (usually
it, a read unit even when executions carry large results), then LAST_EXECUTION_READ at a time, for
at most LAST_EXECUTION_PAGES pages in all (executions under way or skipped are passed over).
Writes: only the deletion of tag entries that a list finds stale.
A one-time job's run may be stored on its job's item (`codec.runs.embedded_execution`, read as the job's
`last_execution`): it is one of the job's executions here, read with the job, for no read more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus
from punctual.domain.validation import has_tag
from punctual.platform import resources
from punctual.platform.concurrency import parallel_map
from punctual.ports.jobs import JobsRead
from punctual.ports.pages import PAGE_BYTES, Page, PageFill
from punctual.store import keys, list_keys, list_sources
from punctual.store.batch_ends import BatchEndRepository
from punctual.store.codec.executions import SHOWN_EXECUTION_ATTRIBUTES, execution_from
from punctual.store.codec.jobs import job_from, job_item, listed_jobs
from punctual.store.table import Table, call, cursor_key, delete

# Job ids begin so (jobs/creation.py): a name prefix that does may name a job without a name of its own.
JOB_ID_PREFIX = "job_"
LAST_EXECUTION_READ = 4
LAST_EXECUTION_PAGES = 6


class JobViews:
    def __init__(self, table: Table) -> None:
        self._table = table
        # (a batch's job's run may have ended in its batch's ends item: laid over its item as read)
        self._ends = BatchEndRepository(table)

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True, ends: bool = True) -> JobsRead:
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
        now: datetime | None = None,
        size: Callable[[Job], int] | None = None,
    ) -> Page:
        """A page of the owner's jobs: newest first, but by name with a name prefix, and grouped by
        value with a tag key alone. With `size` (a job's bytes in the answer), the page also ends
        after the job that brings it to PAGE_BYTES (`PageFill`).

        Each filter reads its own access path (`list_sources.source_of`): a tag's entries, the by_name index, the
        by_flag index (a status of PAUSED or CANCELLED, a FAILED outcome: the few flag values that
        include it, merged newest first), or by_owner, without a filter or for a status or outcome no
        index holds (ACTIVE, COMPLETED, SUCCEEDED: most jobs, which write no index entry for it); with
        several, the first of these that applies, and the others are checked on the jobs read. The
        path's entries are read on, their jobs read and checked (an index may lag a write), until the
        page is full or the path ends, but at most `list_read_budget` entries: past that the page may
        be short, even empty, and its `last_key` says where to continue. Each entry page costs one
        Query (one a flag value) and one BatchGetItem, and no read per job. A tag entry that its job
        no longer backs is deleted (with `now`, also one whose job is gone, `STALE_TAG_ENTRY_AGE` after
        its creation). With a name prefix, a job without a name of its own whose id is the prefix
        comes first on the first page (one GetItem): by_name holds only names given.
        """
        source = list_sources.source_of(owner, status, tag, outcome, name_prefix)

        def wanted(job: Job) -> bool:
            return (
                job.owner == owner
                and (status is None or job.status is status)
                and (tag is None or has_tag(job.tags, tag))
                and (outcome is None or (job.outcome is not None and job.outcome.status is outcome))
                and (name_prefix is None or job.name.startswith(name_prefix))
            )

        fill = PageFill(limit, size, PAGE_BYTES)
        if source.flags:
            try:
                return self._merged_page(source, wanted, fill, start_key, limit)
            except ClientError as exc:
                if not list_sources.index_missing(exc, source):
                    raise
                list_sources.log_index_missing(source)
                source = list_sources.source_of(owner, None, None, None, None)
        found: list[Job] = []
        if name_prefix is not None and start_key is None:
            named_by_id = self._named_by_id(name_prefix)
            if named_by_id is not None and wanted(named_by_id):
                found.append(named_by_id)
                if fill.full_with(named_by_id):
                    # (on from where its by_name entry would be: its id is the least name of the prefix)
                    # (with the owner_pk a job listed by its batch's entry does not carry)
                    place = {**job_item(named_by_id), "owner_pk": keys.owner_pk(owner), "name": name_prefix}
                    return Page(found, source.resume_key(place))
        read_budget = self._table.list_read_budget
        stale: list[dict[str, Any]] = []
        read = 0
        chunk = limit
        # A page that ended part way through a batch's list entry goes on with the rest of its jobs.
        rows: list[list_sources.Row] = []
        if start_key is not None and list_sources.MEMBER in start_key:
            start_key, rows = self._rest_of_batch(source, start_key)
        try:
            while True:
                if rows:
                    response: dict[str, Any] = {"LastEvaluatedKey": start_key}
                else:
                    try:
                        response = list_sources.query(
                            self._table, source, min(chunk, read_budget - read), start_key
                        )
                    except ClientError as exc:
                        if not list_sources.index_missing(exc, source):
                            raise
                        # A table still gaining its list indexes (docs/upgrading.md): the owner's jobs,
                        # every filter checked on them, as before the index.
                        list_sources.log_index_missing(source)
                        source = list_sources.source_of(owner, None, None, None, None)
                        continue
                    rows = self._rows(source, response.get("Items", []))
                rest: list[list_sources.Row] = []
                if len(rows) > read_budget - read:
                    # A batch's entry names up to a hundred jobs: the budget may end inside one, and
                    # the page then goes on from the first job not read.
                    cut = max(1, read_budget - read)
                    rows, rest = rows[:cut], rows[cut:]
                    response = {"LastEvaluatedKey": source.resume_key(rows[-1].entry, rest[0])}
                jobs = self.get_many([row.job_id for row in rows]).readable()
                read += len(rows)
                for i, row in enumerate(rows):
                    job = jobs.get(row.job_id)
                    if not source.backed(row.entry, job, now):
                        stale.append(row.entry)
                        continue
                    if job is None or not wanted(job) or not row.lists(job):
                        continue
                    found.append(job)
                    if fill.full_with(job):
                        # Continue after this job; at the path's end only if it was its last entry.
                        last = i == len(rows) - 1 and "LastEvaluatedKey" not in response
                        following = rows[i + 1] if i + 1 < len(rows) else (rest[0] if rest else None)
                        return Page(found, None if last else source.resume_key(row.entry, following))
                rows = []
                start_key = response.get("LastEvaluatedKey")
                if start_key is None or read >= read_budget:
                    return Page(found, start_key)
                chunk = min(chunk * 2, 100)
        finally:
            if stale:
                self._table.batch_write([delete({"pk": e["pk"], "sk": e["sk"]}) for e in stale])

    def _rows(self, source: list_sources.Source, entries: list[dict[str, Any]]) -> list[list_sources.Row]:
        """A path's entries as the jobs they list, in order: a batch's list entry names its jobs (read
        in one BatchGetItem for the page's entries), any other entry one."""
        batches = [keys.batch_id_of(str(e["pk"])) for e in entries if source.lists_batches(e)]
        named: dict[str, list[str]] = {}
        if batches:
            for item in self._table.batch_get([keys.list_entry_key(batch) for batch in batches]):
                named[keys.batch_id_of(str(item["pk"]))] = listed_jobs(item)
        rows: list[list_sources.Row] = []
        owned = source.index is resources.BY_OWNER_INDEX
        for entry in entries:
            if not source.lists_batches(entry):
                rows.append(list_sources.Row(entry, source.job_id(entry), owned=owned))
                continue
            batch = keys.batch_id_of(str(entry["pk"]))
            rows.extend(list_sources.Row(entry, job_id, batch) for job_id in named.get(batch, []))
        return rows

    def _rest_of_batch(
        self, source: list_sources.Source, start_key: dict[str, Any]
    ) -> tuple[dict[str, Any], list[list_sources.Row]]:
        """From a cursor part way through a batch's list entry: the entry's key, to read on after it,
        and the entry's jobs from the one the cursor names."""
        entry_key, member = source.batch_cursor(start_key)
        rows = self._rows(source, [entry_key])
        ids = [r.job_id for r in rows]
        # (an entry expired since, or a job no longer in it: on after the entry)
        return entry_key, rows[ids.index(member) :] if member in ids else []

    def _merged_page(
        self,
        source: list_sources.Source,
        wanted: Callable[[Job], bool],
        fill: PageFill,
        start_key: dict[str, Any] | None,
        limit: int,
    ) -> Page:
        """A page of by_flag's entries under any of `source.flags`, newest first: each flag value's
        entries read newest first (a Query each), merged down to the newest of the last entries read
        of those with more (below it, one not yet read may come first: read again on the next round).
        A cursor is the last job's `owner_sk`, from which every flag value is read on."""
        index = resources.BY_FLAG_INDEX
        # (a cursor names the flag values it reads on: one of another list is refused)
        path = {"flags": ",".join(source.flags)}
        after = None
        if start_key is not None:
            after = cursor_key(start_key, equal=path, prefixed={index.sort_key: ""})[index.sort_key]
        read_budget = self._table.list_read_budget
        found: list[Job] = []
        read = 0
        chunk = limit
        flags = list(source.flags)
        while True:
            each = max(1, min(chunk, read_budget - read) // len(flags))
            read_of: dict[str, list[str]] = {}
            more: set[str] = set()
            for flag in flags:
                items, has_more = list_sources.query_flag(self._table, source.partition[0], flag, each, after)
                read_of[flag] = [str(item[index.sort_key]) for item in items]
                read += len(items)
                if has_more:
                    more.add(flag)
            bound = max((read_of[flag][-1] for flag in more), default="")
            safe = sorted((sk for sks in read_of.values() for sk in sks if sk >= bound), reverse=True)
            # (read on: those with more, and those read past the bound, which come again)
            flags = [flag for flag in flags if flag in more or (read_of[flag] and read_of[flag][-1] < bound)]
            ids = [keys.job_id_of_owner_sk(sk) for sk in safe]
            jobs = self.get_many(ids).readable()
            for i, sk in enumerate(safe):
                job = jobs.get(ids[i])
                if job is None or not wanted(job):
                    continue
                found.append(job)
                if fill.full_with(job):
                    last = i == len(safe) - 1 and not flags
                    return Page(found, None if last else {**path, index.sort_key: sk})
            if not flags:
                return Page(found, None)
            after = bound
            if read >= read_budget:
                return Page(found, {**path, index.sort_key: after})
            chunk = min(chunk * 2, 100)

    def _named_by_id(self, name_prefix: str) -> Job | None:
        """The job whose id is `name_prefix`, if it has no name of its own (named by its id, it has no
        by_name entry); None for a prefix that is no job id (no read)."""
        if not name_prefix.startswith(JOB_ID_PREFIX):
            return None
        response = call(
            partial(self._table.resource.get_item, Key=keys.job_key(name_prefix), ConsistentRead=True)
        )
        item = response.get("Item")
        if item is None or list_keys.stored_name(name_prefix, str(item.get("name") or "")) is not None:
            return None
        try:
            return job_from(self._ends.with_ends([item])[0])
        except (KeyError, ValueError, TypeError):
            return None

    def with_outcome_executions(self, jobs: Sequence[Job]) -> list[Job]:
        """These jobs with the executions their outcomes name as their last executions: one
        BatchGetItem (eventually consistent) for up to 100 jobs, none for a job without an outcome
        (never run to an end, or whose last run ended before outcomes were recorded on jobs)."""
        wanted = [
            keys.execution_key(job.id, job.outcome.scheduled_at, job.outcome.execution_id)
            for job in jobs
            if job.outcome is not None and _on_job(job, job.outcome.execution_id) is None
        ]
        found: dict[str, Execution] = {}
        # (no result, no delivery records: what a job shows of its last execution, and fewer bytes back)
        projection, names = SHOWN_EXECUTION_ATTRIBUTES
        for item in self._table.batch_get(wanted, consistent=False, projection=projection, names=names):
            shown = _shown_execution(item)
            if shown is not None:
                found[shown.id] = shown
        return [
            replace(
                job,
                last_execution=None
                if job.outcome is None
                else found.get(job.outcome.execution_id) or _on_job(job, job.outcome.execution_id),
            )
            for job in jobs
        ]

    def get_with_last_execution(self, job_id: str, owner: str | None = None) -> Job | None:
        """A job as users see it: with its last execution, read from the same partition in the same
        consistent Query (the job item sorts after its executions: newest first, it comes first).

        With `owner`, another owner's job is None by the same single Query that finds no job: the
        Query's filter drops its items (executions carry their job's owner), so that nothing is
        decoded and nothing more read, as for an id that does not exist."""
        filtered: dict[str, Any] = {}
        if owner is not None:
            filtered = {
                "FilterExpression": "#owner = :owner",
                "ExpressionAttributeNames": {"#owner": "owner"},
            }
        response = call(
            partial(
                self._table.resource.query,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={
                    ":pk": keys.job_pk(job_id),
                    **({":owner": owner} if owner is not None else {}),
                },
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=2,  # the job and its newest execution
                **filtered,
            )
        )
        items = response.get("Items", [])
        if not items or items[0]["sk"] != keys.JOB_SK:
            return None
        job = job_from(self._ends.with_ends([items[0]])[0])
        run = _shown(job.last_execution)
        last = _last_final(items[1:])
        # (those past the newest read sort below it: a run on the job's item above that one is newer)
        newest = None if len(items) < 2 else str(items[1]["sk"])
        below = run is not None and (newest is None or _sk(run) > newest)
        if last is None and "LastEvaluatedKey" in response and not below:
            last = self._last_execution(job_id, start_key=response["LastEvaluatedKey"], consistent=True)
        shown = _latest(last, run)
        outcome = job.outcome
        if outcome is not None and (shown is None or _ended_before(shown, outcome.at, outcome.execution_id)):
            # Runs that end out of order (a long one, then a short one scheduled after it): the
            # outcome is the one that ended last, and the job shows that one, as lists do. (A run
            # that ended after the outcome is one whose outcome is being written: models.job_as_seen.)
            named = _on_job(job, outcome.execution_id) or self._shown_one(
                keys.execution_key(job.id, outcome.scheduled_at, outcome.execution_id)
            )
            if named is not None and named.status.ran_to_end:
                shown = named
        return replace(job, last_execution=shown)

    def _shown_one(self, key: dict[str, Any]) -> Execution | None:
        projection, names = SHOWN_EXECUTION_ATTRIBUTES
        for item in self._table.batch_get([key], consistent=True, projection=projection, names=names):
            return _shown_execution(item)
        return None

    def with_last_executions(self, jobs: Sequence[Job]) -> list[Job]:
        """These jobs with their last executions (one Query each, side by side)."""
        lasts = parallel_map(lambda job: self._last_execution(job.id, consistent=False), list(jobs))
        return [
            replace(job, last_execution=_latest(last, _shown(job.last_execution)))
            for job, last in zip(jobs, lasts, strict=True)
        ]

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


def _last_final(items: Iterable[dict[str, Any]]) -> Execution | None:
    for item in items:
        if not keys.is_execution_sk(str(item["sk"])):
            continue
        shown = _shown_execution(item)
        # (one skipped, CANCELLED for its job paused, cancelled or rescheduled, is not shown)
        if shown is not None and shown.status.ran_to_end:
            return shown
    return None


def _ended_before(execution: Execution, at: datetime, execution_id: str) -> bool:
    """Whether this is another run than the one named, that ended at or before `at`."""
    finished = execution.finished_at
    return execution.id != execution_id and finished is not None and finished <= at


def _sk(execution: Execution) -> str:
    return keys.execution_sk(execution.scheduled_at, execution.id)


def _latest(*executions: Execution | None) -> Execution | None:
    """The newest of these (as their keys sort; of one execution found twice, the first given)."""
    found = [e for e in executions if e is not None]
    return max(found, key=_sk, default=None)


def _on_job(job: Job, execution_id: str) -> Execution | None:
    """The job's run stored on its item (as read: `Job.last_execution`), if it is this one, as shown."""
    run = job.last_execution
    return _shown(run) if run is not None and run.id == execution_id else None


def _shown(execution: Execution | None) -> Execution | None:
    if execution is None:
        return None
    error = None if execution.error is None else execution.error[:200]
    return replace(execution, result=None, error=error, deliveries=())


def _shown_execution(item: dict[str, Any]) -> Execution | None:
    """An execution as shown on its job: no result (it stays on the execution), a short error; None
    for one this version cannot read (a status it does not know)."""
    try:
        execution = execution_from(item)
    except (KeyError, ValueError, TypeError):
        return None
    return _shown(execution)
