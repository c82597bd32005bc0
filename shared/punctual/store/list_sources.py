"""The access paths a list of an owner's jobs reads, and their Queries: a partition of a keys-only
index (by_owner, by_name; by_flag, one partition a flag value) or a tag's entries in the table, which
of them a list's filters pick, and how an entry names its job, resumes a page and is found stale.
What reads them into pages of jobs: job_views.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from punctual.domain.errors import InvalidRequest
from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import Job, JobStatus
from punctual.platform import resources
from punctual.platform.observability import logger
from punctual.platform.timefmt import from_epoch_ms
from punctual.store import keys, list_keys
from punctual.store.table import Table, call, cursor_key

# A tag entry whose job is not found is deleted by the list that reads it only this long after the
# job's creation: a job's entries are written just before the job.
STALE_TAG_ENTRY_AGE = timedelta(hours=1)


# A cursor's field naming the job a page goes on from, part way through a batch's list entry.
MEMBER = "member"


@dataclass(frozen=True)
class Row:
    """A job an entry lists: a job's own entry, or one of the jobs a batch's list entry names (`batch`).
    In by_owner (`owned`) exactly one of them lists a job: the batch's while the job is listed in it
    (`Job.listed_in`), its own otherwise. Other paths list every job their entries name."""

    entry: dict[str, Any]
    job_id: str
    batch: str | None = None
    owned: bool = False

    def lists(self, job: Job) -> bool:
        if self.batch is not None:
            return job.listed_in == self.batch
        return not self.owned or job.listed_in is None


@dataclass(frozen=True)
class Source:
    """An access path of the owner's jobs, in a list's order: a partition of an index (or of the tag
    entries, in the table, `index` None), from a prefix of its first sort attribute; or, with `flags`,
    by_flag's partitions of those flag values, merged."""

    index: resources.Index | None
    partition: tuple[str, ...]  # the values of its partition attributes, in order
    prefix: str = ""
    forward: bool = False
    flags: tuple[str, ...] = ()

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return (resources.TABLE.partition_key,) if self.index is None else self.index.partition_keys

    @property
    def sort_keys(self) -> tuple[str, ...]:
        return (resources.TABLE.sort_key,) if self.index is None else self.index.sort_keys

    def job_id(self, entry: dict[str, Any]) -> str:
        if self.index is None:
            return keys.job_id_of_tag_sk(str(entry["sk"]))
        return keys.job_id_of(str(entry["pk"]))

    def lists_batches(self, entry: dict[str, Any]) -> bool:
        """Whether `entry` is a batch's list entry (by_owner holds them beside the jobs' own)."""
        return self.index is resources.BY_OWNER_INDEX and keys.is_list_entry_pk(str(entry["pk"]))

    def resume_key(self, entry: dict[str, Any], following: Row | None = None) -> dict[str, Any]:
        """An entry's key, as the ExclusiveStartKey to continue after it; or, when the next job to
        list (`following`) is another of the same batch's entry, that key and the job to go on from."""
        names = {
            resources.TABLE.partition_key,
            resources.TABLE.sort_key,
            *self.partition_keys,
            *self.sort_keys,
        }
        key = {name: entry[name] for name in names}
        if following is not None and following.batch is not None and following.entry is entry:
            key[MEMBER] = following.job_id
        return key

    def cursor_key(self, start_key: dict[str, Any]) -> dict[str, str]:
        equal = dict(zip(self.partition_keys, self.partition, strict=True))
        prefixed = {name: "" for name in self.sort_keys} | {self.sort_keys[0]: self.prefix}
        if self.index is not None:
            batch = self.index is resources.BY_OWNER_INDEX and start_key.get("sk") == keys.LIST_SK
            equal["sk"] = keys.LIST_SK if batch else keys.JOB_SK
            prefixed["pk"] = keys.LIST_PK_PREFIX if batch else keys.JOB_PK_PREFIX
        return cursor_key(start_key, equal=equal, prefixed=prefixed)

    def batch_cursor(self, start_key: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """A cursor part way through a batch's list entry: the entry's key (checked as any cursor) and
        the job to go on from."""
        rest = {name: value for name, value in start_key.items() if name != MEMBER}
        member = start_key[MEMBER]
        if not isinstance(member, str) or rest.get("sk") != keys.LIST_SK:
            raise InvalidRequest("cursor: not valid for this list; start again without it", field="cursor")
        return self.cursor_key(rest), member

    def backed(self, entry: dict[str, Any], job: Job | None, now: datetime | None) -> bool:
        """False for a tag entry to delete: its job no longer has that tag at that value, is not the
        job it was written for (an idempotent retry's draft, created later, that lost the race), or is
        gone (known only `STALE_TAG_ENTRY_AGE` after its creation, its entries being written first)."""
        if self.index is not None:
            return True
        key = self.partition[0].rsplit("#", 1)[1]
        value_prefix, _, written_for = str(entry["sk"]).partition("#")
        if job is None:
            created = from_epoch_ms(int(written_for.split("#", 1)[0]))
            return now is None or now - created < STALE_TAG_ENTRY_AGE
        return (
            key in job.tags
            and f"{value_prefix}#" == keys.tag_value_prefix(job.tags[key])
            and written_for == keys.owner_sk(job.created_at, job.id)
        )


def index_missing(exc: ClientError, source: Source) -> bool:
    """Whether DynamoDB refused a list's Query because the table lacks the index it reads."""
    error = exc.response.get("Error", {})
    return (
        source.index is not None
        and source.index is not resources.BY_OWNER_INDEX
        # (DynamoDB answers ValidationException, "The table does not have the specified index"; moto
        # ResourceNotFoundException)
        and error.get("Code") in {"ValidationException", "ResourceNotFoundException"}
        and source.index.name in str(error.get("Message", ""))
    )


def source_of(
    owner: str,
    status: JobStatus | None,
    tag: tuple[str, str | None] | None,
    outcome: ExecutionStatus | None,
    name_prefix: str | None,
) -> Source:
    """The access path a list reads: the first that applies of a name prefix (whose list comes by
    name, whatever else filters it), a tag at a value, a flagged outcome (FAILED), a flagged status
    (PAUSED, CANCELLED), a tag key (any value), and otherwise the owner's jobs (every filter checked
    on them)."""
    owner_pk = keys.owner_pk(owner)
    if name_prefix is not None:
        return Source(resources.BY_NAME_INDEX, (owner_pk,), name_prefix, forward=True)
    if tag is not None and tag[1] is not None:
        return Source(None, (keys.tag_pk(owner, tag[0]),), keys.tag_value_prefix(tag[1]))
    flags = (
        (None if outcome is None else list_keys.flags_of_outcome(outcome))
        or (None if status is None else list_keys.flags_of_status(status))
        or ()
    )
    if flags:
        return Source(resources.BY_FLAG_INDEX, (owner_pk,), flags=flags)
    if tag is not None:
        return Source(None, (keys.tag_pk(owner, tag[0]),))
    return Source(resources.BY_OWNER_INDEX, (owner_pk,))


def log_index_missing(source: Source) -> None:
    logger.warning(
        "list index missing: filtering by_owner",
        extra={"index": source.index.name if source.index else None},
    )


def query(table: Table, source: Source, limit: int, start_key: dict[str, Any] | None) -> dict[str, Any]:
    """A page of the path's entries, from after `start_key` (a cursor it gave out)."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    conditions = []
    for i, (name, value) in enumerate(zip(source.partition_keys, source.partition, strict=True)):
        names[f"#k{i}"] = name
        values[f":k{i}"] = value
        conditions.append(f"#k{i} = :k{i}")
    if source.prefix:
        names["#s"] = source.sort_keys[0]
        values[":p"] = source.prefix
        conditions.append("begins_with(#s, :p)")
    kwargs: dict[str, Any] = {
        "KeyConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": source.forward,
        "Limit": limit,
    }
    if source.index is not None:
        kwargs["IndexName"] = source.index.name
    if start_key:
        # A cursor given out by another access path (before an upgrade changed the one a filter
        # reads) would make DynamoDB refuse the query: a stale cursor is bad input, not a server error.
        kwargs["ExclusiveStartKey"] = source.cursor_key(start_key)
    response: dict[str, Any] = call(lambda: table.resource.query(**kwargs))
    return response


def query_flag(
    table: Table, owner_pk: str, flag: str, limit: int, after: str | None
) -> tuple[list[dict[str, Any]], bool]:
    """Up to `limit` of by_flag's entries of `flag`, newest first from before `after`; and
    whether there are more."""
    index = resources.BY_FLAG_INDEX
    condition = "#o = :o AND #f = :f" + (" AND #s < :after" if after else "")
    values: dict[str, Any] = {":o": owner_pk, ":f": flag, **({":after": after} if after else {})}
    response: dict[str, Any] = call(
        partial(
            table.resource.query,
            IndexName=index.name,
            KeyConditionExpression=condition,
            ExpressionAttributeNames={
                "#o": index.partition_keys[0],
                "#f": index.partition_keys[1],
                **({"#s": index.sort_key} if after else {}),
            },
            ExpressionAttributeValues=values,
            ScanIndexForward=False,
            Limit=limit,
        )
    )
    return list(response.get("Items", [])), "LastEvaluatedKey" in response
