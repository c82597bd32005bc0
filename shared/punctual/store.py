"""DynamoDB data access: the only module that knows key formats, attribute names and expressions.

One table holds four kinds of item:
- a job:        pk JOB#<job id>                    sk JOB
- an execution: pk JOB#<job id>                    sk EXEC#<scheduled ms>#<execution id>
- a due marker: pk DUE#<yyyymmddHHMM>#<shard>      sk <scheduled ms>#<execution id>
                (or, due soon, pk DUE#SOON#<shard>: see `DueMarker.soon`)
- bookkeeping:  idempotency keys (pk IDEM#...), the scanner's checkpoints and leases (pk SCANNER),
                and quarantined markers (pk QUARANTINE).
Jobs carry owner_pk/owner_sk so that an owner's jobs list newest first from the by_owner index
without a scan. A list by status reads that index too and filters the jobs it reads: an index keyed by
status would cost two more index writes on every status change (a one-time job's completion).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from punctual import resources
from punctual.concurrency import PartitionPacer, chunks, parallel_map
from punctual.errors import InvalidRequest, LostRace, RetryableStoreError, UnreadableItem
from punctual.models import (
    SCHEDULE_ADAPTER,
    DeadLetter,
    Delivery,
    DeliveryStatus,
    DueMarker,
    Execution,
    ExecutionStatus,
    Job,
    JobPolicy,
    JobStatus,
    NotifyEvent,
    NotifyRule,
    Outcome,
    RetryPolicy,
    TaskRef,
    TaskSpec,
)
from punctual.observability import logger
from punctual.signing import SigningKeys
from punctual.timefmt import from_epoch_ms, parse_rfc3339, to_epoch_ms, to_rfc3339
from punctual.validation import has_tag

# Why a transaction was cancelled, besides a failed condition, that trying again can cure.
_TRANSACTION_RETRYABLE = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
_THROTTLING = {
    "ProvisionedThroughputExceededException",
    # A write to an item that a transaction under way includes (`_transact`): try again shortly.
    "TransactionConflictException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}
_JOB_SK = "JOB"
# An execution's attributes that never change once stored (set by whichever update stores it first).
_EXECUTION_FIXED = (
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
_QUARANTINE_PK = "QUARANTINE"
# A job's timeout when it gives none (the API's default; a job with a named task may take the task's).
DEFAULT_TIMEOUT_SECONDS = 60
# The most jobs one filtered list request reads before it answers (a short page and a cursor).
LIST_READ_BUDGET = 500
# A job's last execution is the newest of its executions to have finished: the newest alone first
# (usually it: a read unit even when executions carry large results), then this many at a time,
# newest first, for at most this many pages in all (executions still under way are passed over).
LAST_EXECUTION_READ = 4
LAST_EXECUTION_PAGES = 6
_T = TypeVar("_T")


def _call(operation: Callable[[], _T]) -> _T:
    """Run one DynamoDB call, turning its ClientErrors into domain errors."""
    try:
        return operation()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ConditionalCheckFailedException":
            raise LostRace(str(exc)) from exc
        if code == "TransactionCanceledException":
            reasons = {r.get("Code") for r in exc.response.get("CancellationReasons", [])}
            if "ConditionalCheckFailed" in reasons:
                raise LostRace(str(exc)) from exc
            if reasons & _TRANSACTION_RETRYABLE:
                raise RetryableStoreError(str(exc)) from exc
        if code in _THROTTLING:
            raise RetryableStoreError(str(exc)) from exc
        raise


def _cursor_key(
    start_key: dict[str, Any], *, equal: dict[str, str], prefixed: dict[str, str]
) -> dict[str, str]:
    """A cursor's key, if it is one the query it continues could have returned: exactly the
    attributes of `equal` and `prefixed`, every one a string, each of `equal` at its value and each of
    `prefixed` starting so. Otherwise InvalidRequest (400): DynamoDB would refuse another key, or
    page through another list. (A cursor's signature says only that this deployment issued it: an
    earlier version, with other keys, may have.)"""
    expected = set(equal) | set(prefixed)
    valid = (
        set(start_key) == expected
        and all(isinstance(value, str) and value for value in start_key.values())
        and all(start_key[name] == value for name, value in equal.items())
        and all(str(start_key[name]).startswith(prefix) for name, prefix in prefixed.items())
    )
    if not valid:
        raise InvalidRequest("cursor: not valid for this list; start again without it", field="cursor")
    return dict(start_key)


def bucket_minute(instant: datetime) -> str:
    return instant.strftime("%Y%m%d%H%M")


def shard_of(execution_id: str, shard_count: int) -> int:
    return zlib.crc32(execution_id.encode()) % shard_count


def _job_pk(job_id: str) -> str:
    return f"JOB#{job_id}"


def owner_digest(owner: str) -> str:
    """An owner as a key part: owners are IAM ARNs, up to 2 KB; a key has room for far less."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def task_ref_key(owner: str, name: str) -> str:
    """The by_task index key of the jobs of `owner` that use its named task `name` (task_store.py)."""
    return f"{owner_digest(owner)}#{name}"


def _exec_sk(scheduled_at: datetime, execution_id: str) -> str:
    return f"EXEC#{to_epoch_ms(scheduled_at):013d}#{execution_id}"


IDEMPOTENCY_KEY_LIFETIME = timedelta(hours=24)


def _idempotency_key(owner: str, key: str) -> dict[str, str]:
    digest = hashlib.sha256(f"{owner}\0{key}".encode()).hexdigest()
    return {"pk": f"IDEM#{digest}", "sk": "IDEM"}


def _start_of(execution: Execution) -> tuple[str, dict[str, Any]]:
    """The SET clauses recording an attempt's start (kept if its claim recorded one), and their values."""
    if execution.started_at is None or execution.lateness_ms is None:
        return "", {}
    clauses = (
        ", started_at = if_not_exists(started_at, :began), lateness_ms = if_not_exists(lateness_ms, :late)"
    )
    return clauses, {":began": to_rfc3339(execution.started_at), ":late": execution.lateness_ms}


@dataclass(frozen=True)
class JobStamp:
    """A job's status, schedule version and time of last change: whether it changed since a read."""

    status: JobStatus
    schedule_version: int
    updated_at: datetime

    @staticmethod
    def of(job: Job) -> JobStamp:
        return JobStamp(job.status, job.schedule_version, job.updated_at)


def _execution_key(execution: Execution) -> dict[str, str]:
    return {"pk": _job_pk(execution.job_id), "sk": _exec_sk(execution.scheduled_at, execution.id)}


def _lease_sk(shard: int) -> str:
    return f"LEASE#{shard:03d}"


def _marker_pk(minute: str, shard: int) -> str:
    return f"DUE#{minute}#{shard:03d}"


def count_bucket(client: Any, table_name: str, minute: datetime, shard: int) -> int:
    """How many markers a minute's bucket of a shard holds (they stay until they expire, so a minute
    already dispatched still counts): COUNT queries on a low-level client, no item read back."""
    kwargs: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": _marker_pk(bucket_minute(minute), shard)}},
        "Select": "COUNT",
    }
    total = 0
    while True:
        page = _call(lambda: client.query(**kwargs))
        total += int(page["Count"])
        if "LastEvaluatedKey" not in page:
            return total
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _soon_pk(shard: int) -> str:
    return f"{_SOON_PK_PREFIX}{shard:03d}"


def _sk_bound(instant: datetime) -> str:
    """A sort key bound between the markers due before `instant` and those due at or after it."""
    return f"{to_epoch_ms(instant):013d}"


# The lowest position in a bucket: every marker's sort key (scheduled ms, 13 digits) is above it.
START_OF_BUCKET = "0"
# Markers in minute buckets are read once and never deleted by the scanner: they expire, this long
# after their instant (a scanner stopped for longer would find them gone; its alarms fire long before).
# Soon markers do not expire: the scanner deletes each once it is sent.
MARKER_TTL = timedelta(days=30)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else to_rfc3339(value)


def _dt(value: Any) -> datetime | None:
    return None if value in (None, "") else parse_rfc3339(str(value))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


_NOTIFY_ADAPTER: TypeAdapter[tuple[NotifyRule, ...]] = TypeAdapter(tuple[NotifyRule, ...])


def _notify_json(rules: Sequence[NotifyRule] | None) -> str | None:
    """A job's notification rules as stored (none: no attribute)."""
    if not rules:
        return None
    return json.dumps(
        [rule.model_dump(mode="json", exclude_none=True) for rule in rules], separators=(",", ":")
    )


def _signing_attributes(keys: SigningKeys | None) -> dict[str, Any]:
    """A job's signing secrets as stored: None removes them (the job signs nothing)."""
    if keys is None:
        return {"signing_secret": None, "signing_previous": None, "signing_previous_until": None}
    return {
        "signing_secret": keys.current,
        "signing_previous": keys.previous,
        "signing_previous_until": _iso(keys.previous_until),
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
_OUTCOME_ATTRIBUTES = ("outcome", "outcome_at", "outcome_run", "failures")


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


def _outcome_update(execution: Execution) -> tuple[list[str], list[str], dict[str, Any]]:
    """The SET and REMOVE clauses (and their values) that record a finished execution as its job's
    outcome: a failure adds one to the consecutive failures, a success ends them."""
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


# What a job shows of its last execution (`Store.with_recorded_outcomes`): a projection and its names.
_SHOWN_EXECUTION_ATTRIBUTES = (
    "#id, job_id, #owner, scheduled_at, #st, schedule_version, manual, attempts, started_at, "
    "finished_at, lateness_ms, #err, next_attempt_at, created_at, retry_of, dead_lettered, task_version",
    {"#id": "id", "#owner": "owner", "#st": "status", "#err": "error"},
)


# A delivery's record on its execution's item: one attribute per rule and event, so that deliveries
# of one execution never write the same attribute.
_DELIVERY_PREFIX = "delivery#"


def _delivery_attribute(event: NotifyEvent, rule: int) -> str:
    return f"{_DELIVERY_PREFIX}{rule}#{event.value}"


def _deliveries_from(item: dict[str, Any]) -> tuple[Delivery, ...]:
    found = []
    for name, value in item.items():
        if not name.startswith(_DELIVERY_PREFIX) or not isinstance(value, dict):
            continue
        try:
            _, rule, event = name.split("#", 2)
            found.append(
                Delivery(
                    event=NotifyEvent(event),
                    rule=int(rule),
                    to=str(value["to"]),
                    status=DeliveryStatus(value["status"]),
                    attempts=int(value["attempts"]),
                    at=from_epoch_ms(int(value["at"])),
                    error=value.get("error"),
                    next_attempt_at=None if value.get("next") is None else from_epoch_ms(int(value["next"])),
                )
            )
        except (KeyError, ValueError):
            continue  # a newer version's record
    return tuple(sorted(found, key=lambda d: (d.rule, d.event.value)))


def _dead_letter_pk(owner: str) -> str:
    return f"DEADLETTER#{owner}"


def _dead_letter_from(owner: str, item: dict[str, Any]) -> DeadLetter:
    version = item.get("schedule_version")
    return DeadLetter(
        owner=owner,
        job_id=str(item["job_id"]),
        execution_id=str(item["execution_id"]),
        scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
        schedule_version=None if version is None else int(version),
        manual=bool(item.get("manual", False)),
        dead_lettered_at=parse_rfc3339(str(item["dead_lettered_at"])),
        error=str(item.get("error", "")),
    )


# Batched writes to one bucket (a due-marker partition) from this process stay under 90 % of a
# partition's 1,000 write units a second (a marker is under 1 KB: one unit), leaving the rest to
# markers filed into it meanwhile: a scanner draining a minute of a million executions (15,625 markers
# a bucket at the deployed 64 shards) keeps under the limit instead of being throttled into retries.
MARKER_PARTITION_WRITES_PER_SECOND = 900.0
_MARKER_PK_PREFIX = "DUE#"
_SOON_PK_PREFIX = "DUE#SOON#"

# Unprocessed items are DynamoDB's throttling signal for batches (a hot bucket partition takes 1,000
# writes a second): back off with jitter, for about ten seconds in all, before giving up.
BATCH_ATTEMPTS = 14


def _backoff(attempt: int) -> float:
    return min(0.05 * 2**attempt, 1.0) * (0.5 + random.random())


_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


def _wire(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value (the common types inline, the rest by boto3)."""
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | Decimal):
        return {"N": str(value)}
    if isinstance(value, dict):
        return {"M": {k: _wire(v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"L": [_wire(v) for v in value]}
    return dict(_SERIALIZER.serialize(value))


def _unwire(value: dict[str, Any]) -> Any:
    kind, data = next(iter(value.items()))
    if kind == "S":
        return data
    if kind == "N":
        return Decimal(data)
    if kind == "BOOL":
        return data
    if kind == "M":
        return {k: _unwire(v) for k, v in data.items()}
    if kind == "L":
        return [_unwire(v) for v in data]
    return _DESERIALIZER.deserialize(cast(Any, value))


def _to_wire(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _wire(value) for name, value in item.items()}


def _from_wire(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _unwire(value) for name, value in item.items()}


def _wire_request(request: dict[str, Any]) -> dict[str, Any]:
    if "PutRequest" in request:
        return {"PutRequest": {"Item": _to_wire(request["PutRequest"]["Item"])}}
    return {"DeleteRequest": {"Key": _to_wire(request["DeleteRequest"]["Key"])}}


@dataclass(frozen=True)
class Page:
    items: list[Any]
    last_key: dict[str, Any] | None


class Store:
    """Jobs, executions and due markers in the one Punctual table."""

    def __init__(
        self, dynamodb: Any, client: Any, table_name: str, *, shard_count: int, retention_days: int
    ) -> None:
        """`dynamodb` is a boto3 resource; `client` a plain DynamoDB client, for the scanner's hot path:
        the resource's client converts every value through boto3's type layer, which cost the scanner a
        third of its CPU (bench/scanner_throughput), so batch calls and marker queries go through the
        plain client with the small converters below."""
        self._dynamodb = dynamodb
        self._client = client
        self._table = dynamodb.Table(table_name)
        self.clients = (dynamodb.meta.client, client)  # every client it calls (to watch or count calls)
        self._table_name = table_name
        self.shard_count = shard_count
        self.retention = timedelta(days=retention_days)
        self.list_read_budget = LIST_READ_BUDGET
        self.marker_pacer = PartitionPacer(MARKER_PARTITION_WRITES_PER_SECOND)

    # ----------------------------------------------------------------- jobs
    def put_new_job(self, job: Job) -> None:
        _call(
            lambda: self._table.put_item(
                Item=self._job_item(job), ConditionExpression="attribute_not_exists(pk)"
            )
        )

    def get_job(self, job_id: str) -> Job | None:
        response = _call(
            lambda: self._table.get_item(Key={"pk": _job_pk(job_id), "sk": _JOB_SK}, ConsistentRead=True)
        )
        item = response.get("Item")
        return None if item is None else self._job_from(item)

    def get_jobs(self, job_ids: Iterable[str]) -> dict[str, Job]:
        """Jobs by id (those that exist and can be read), read consistently."""
        jobs, unreadable = self.read_jobs(job_ids)
        for job_id, error in unreadable.items():
            logger.error("job item cannot be read", extra={"job_id": job_id, "error": error})
        return jobs

    def read_jobs(self, job_ids: Iterable[str]) -> tuple[dict[str, Job], dict[str, str]]:
        """Jobs by id, read consistently, and apart the ids of items that exist but cannot be read
        (e.g. a time zone this runtime's tzdata no longer has), with the reason."""
        keys = [{"pk": _job_pk(job_id), "sk": _JOB_SK} for job_id in dict.fromkeys(job_ids)]
        jobs: dict[str, Job] = {}
        unreadable: dict[str, str] = {}
        for item in self._batch_get(keys):
            job_id = str(item["pk"]).removeprefix("JOB#")
            try:
                jobs[job_id] = self._job_from(item)
            except Exception as exc:
                unreadable[job_id] = f"{type(exc).__name__}: {exc}"[:500]
        return jobs, unreadable

    def job_stamps(self, job_ids: Iterable[str]) -> tuple[dict[str, JobStamp], dict[str, str]]:
        """What tells whether each job changed since it was read (its status, schedule version and
        time of last change), read consistently; apart the ids of items that cannot be read."""
        keys = [{"pk": _job_pk(job_id), "sk": _JOB_SK} for job_id in dict.fromkeys(job_ids)]
        stamps: dict[str, JobStamp] = {}
        unreadable: dict[str, str] = {}
        names = {"#pk": "pk", "#st": "status", "#sv": "schedule_version", "#up": "updated_at"}
        for item in self._batch_get(keys, "#pk, #st, #sv, #up", names):
            job_id = str(item["pk"]).removeprefix("JOB#")
            try:
                stamps[job_id] = JobStamp(
                    JobStatus(item["status"]),
                    int(item.get("schedule_version", 1)),
                    parse_rfc3339(item["updated_at"]),
                )
            except Exception as exc:
                unreadable[job_id] = f"{type(exc).__name__}: {exc}"[:500]
        return stamps, unreadable

    def _batch_get(
        self,
        keys: Sequence[dict[str, str]],
        projection: str | None = None,
        names: dict[str, str] | None = None,
        *,
        consistent: bool = True,
    ) -> list[dict[str, Any]]:
        """Read items by key (consistently, unless told), 100 a call side by side, retrying
        unprocessed keys."""

        def read(batch: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            spec: dict[str, Any] = {"ConsistentRead": consistent}
            if projection:
                spec["ProjectionExpression"] = projection
            if names:
                spec["ExpressionAttributeNames"] = names
            spec["Keys"] = [_to_wire(key) for key in batch]
            request: dict[str, Any] = {self._table_name: spec}
            for attempt in range(BATCH_ATTEMPTS):
                response = _call(partial(self._client.batch_get_item, RequestItems=request))
                found.extend(
                    _from_wire(item) for item in response.get("Responses", {}).get(self._table_name, [])
                )
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    return found
                time.sleep(_backoff(attempt))
            raise RetryableStoreError("BatchGetItem left keys unprocessed")

        return [item for items in parallel_map(read, chunks(keys, 100)) for item in items]

    def put_new_jobs(self, jobs: Sequence[Job]) -> None:
        """Store new jobs with BatchWriteItem, retrying unprocessed ones. Unconditional: only for jobs
        whose ids were just drawn (an idempotent retry of a batch uses put_new_job for the rest)."""
        self._batch_write([{"PutRequest": {"Item": self._job_item(job)}} for job in jobs])

    def list_jobs(
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

        read_budget = self.list_read_budget
        if status is None and tag is None and outcome is None and name_prefix is None:
            response = self._query_owner(owner, limit, start_key)
            page = list(self._jobs_of(response.get("Items", [])).values())
            return Page(page, response.get("LastEvaluatedKey"))
        found: list[Job] = []
        read = 0
        chunk = limit
        while True:
            response = self._query_owner(owner, min(chunk, read_budget - read), start_key)
            keys = response.get("Items", [])
            jobs = self._jobs_of(keys)
            read += len(keys)
            for i, key in enumerate(keys):
                job = jobs.get(str(key["pk"]).removeprefix("JOB#"))
                if job is not None and wanted(job):
                    found.append(job)
                    if len(found) == limit:
                        # Continue after this job; at the index's end only if it was its last entry.
                        last = i == len(keys) - 1 and "LastEvaluatedKey" not in response
                        return Page(found, None if last else self._index_key(key))
            start_key = response.get("LastEvaluatedKey")
            if start_key is None or read >= read_budget:
                return Page(found, start_key)
            chunk = min(chunk * 2, 100)

    def with_recorded_outcomes(self, jobs: Sequence[Job]) -> list[Job]:
        """These jobs with the executions their outcomes name as their last executions: one
        BatchGetItem (eventually consistent) for up to 100 jobs, none for a job without an outcome
        (never run to an end, or whose last run ended before outcomes were recorded on jobs)."""
        keys = [
            {"pk": _job_pk(job.id), "sk": _exec_sk(job.outcome.scheduled_at, job.outcome.execution_id)}
            for job in jobs
            if job.outcome is not None
        ]
        found: dict[str, Execution] = {}
        # (no result, no delivery records: what a job shows of its last execution, and fewer bytes back)
        projection, names = _SHOWN_EXECUTION_ATTRIBUTES
        for item in self._batch_get(keys, consistent=False, projection=projection, names=names):
            shown = self._shown_execution(item)
            if shown is not None:
                found[shown.id] = shown
        return [
            replace(job, last_execution=None if job.outcome is None else found.get(job.outcome.execution_id))
            for job in jobs
        ]

    def _query_owner(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "IndexName": resources.BY_OWNER_INDEX.name,
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": resources.BY_OWNER_INDEX.partition_key},
            "ExpressionAttributeValues": {":k": self._owner_pk(owner)},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            # A cursor signed before the index changed (the by_owner_status index's keys) would make
            # DynamoDB refuse the query: a stale cursor is bad input, not a server error.
            index = resources.BY_OWNER_INDEX
            kwargs["ExclusiveStartKey"] = _cursor_key(
                start_key,
                equal={index.partition_key: self._owner_pk(owner), "sk": _JOB_SK},
                prefixed={"pk": "JOB#", index.sort_key: ""},
            )
        response: dict[str, Any] = _call(lambda: self._table.query(**kwargs))
        return response

    def _jobs_of(self, index_items: Sequence[dict[str, Any]]) -> dict[str, Job]:
        """The jobs of index entries, in the index's order. The index holds keys only, so the jobs are
        read from the table; an entry whose job has just expired is left out."""
        ids = [str(item["pk"]).removeprefix("JOB#") for item in index_items]
        jobs = self.get_jobs(ids)
        return {job_id: jobs[job_id] for job_id in ids if job_id in jobs}

    @staticmethod
    def _index_key(item: dict[str, Any]) -> dict[str, Any]:
        """An index entry's key, as the ExclusiveStartKey to continue after it."""
        index = resources.BY_OWNER_INDEX
        names = (resources.TABLE.partition_key, resources.TABLE.sort_key, index.partition_key, index.sort_key)
        return {name: item[name] for name in names}

    def update_job(
        self,
        job: Job,
        changes: dict[str, Any],
        *,
        allowed_statuses: Iterable[JobStatus] | None = None,
        schedule_version: int | None = None,
        next_run_before: datetime | None = None,
    ) -> Job:
        """Set some of a job's fields if it is in one of `allowed_statuses` (and at `schedule_version`,
        and, with `next_run_before`, if its next_run_at is missing or earlier: never moved back).

        Raises LostRace when the job is missing or its state no longer matches.
        """
        names: dict[str, str] = {"#pk": "pk"}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        attributes = self._job_attributes(changes)
        if "task" in changes or "status" in changes:
            # The by_task index holds the jobs that keep a named task in use (task_store.py).
            attributes["task_ref"] = self._task_ref(
                job.owner, changes.get("task", job.task), changes.get("status", job.status)
            )
        if "status" in changes:
            status = changes["status"]
            # A finished job expires with its history; a revived one is kept again.
            final = status in (JobStatus.CANCELLED, JobStatus.COMPLETED)
            attributes["expires_at"] = (
                self._expiry(changes.get("updated_at") or job.updated_at) if final else None
            )
        for i, (name, value) in enumerate(attributes.items()):
            names[f"#a{i}"] = name
            if value is None:
                removes.append(f"#a{i}")
            else:
                values[f":a{i}"] = value
                sets.append(f"#a{i} = :a{i}")
        sets.append("#rev = if_not_exists(#rev, :zero) + :one")
        names["#rev"] = "revision"
        values.update({":zero": 0, ":one": 1})
        # A job item may hold a stale copy of its last execution (docs/upgrading.md): any write drops it.
        removes += ["last_execution", "last_execution_ms"]
        expression = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        conditions = ["attribute_exists(#pk)"]
        if allowed_statuses is not None:
            names["#st"] = "status"
            placeholders = []
            for i, status in enumerate(allowed_statuses):
                values[f":s{i}"] = status.value
                placeholders.append(f":s{i}")
            conditions.append(f"#st IN ({', '.join(placeholders)})")
        if schedule_version is not None:
            names["#sv"] = "schedule_version"
            values[":sv"] = schedule_version
            conditions.append("#sv = :sv")
        if next_run_before is not None:
            names["#next"] = "next_run_at"
            values[":next"] = to_rfc3339(next_run_before)
            conditions.append("(attribute_not_exists(#next) OR #next < :next)")
        response = _call(
            lambda: self._table.update_item(
                Key={"pk": _job_pk(job.id), "sk": _JOB_SK},
                UpdateExpression=expression,
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        )
        return self._job_from(response["Attributes"])

    def complete_job(self, job: Job, execution: Execution) -> int | None:
        """Complete a job whose last execution this was (a one-time job's, or a recurring job's last
        occurrence), recording it as the job's outcome in the same write (`record_outcome`: its
        consecutive failures returned). A completed job expires with its history, `retention_days`
        after it.

        The job keeps no copy of its last execution, only its outcome, a few bytes (`_outcome_update`):
        readers take the execution from the job's partition (`get_job_shown`), or by the key the
        outcome names (`with_recorded_outcomes`). (A copy's bytes pushed job items over 1 KB, where
        every write of them costs two units.)
        """
        finished = execution.finished_at or execution.scheduled_at
        # The execution is the job's outcome too, in the same write (a skipped run changes none).
        sets, removes, values = _outcome_update(execution) if execution.status.ran_to_end else ([], [], {})
        completing = partial(
            self._table.update_item,
            Key={"pk": _job_pk(job.id), "sk": _JOB_SK},
            UpdateExpression="SET " + ", ".join(["#st = :done", "expires_at = :exp", *sets]) + " "
            # (and a stale copy of the last execution, which every write to a job drops)
            "REMOVE "
            + ", ".join(
                ["next_run_at", "queued_run_at", "last_execution", "last_execution_ms", "task_ref", *removes]
            ),
            # Only if the job still runs the schedule this execution belonged to: a job
            # rescheduled meanwhile has a new run to come, one paused or cancelled keeps that status.
            ConditionExpression="attribute_exists(#pk) AND #st = :active AND schedule_version = :sv",
            ExpressionAttributeNames={"#pk": "pk", "#st": "status"},
            ExpressionAttributeValues={
                ":done": JobStatus.COMPLETED.value,
                ":active": JobStatus.ACTIVE.value,
                ":exp": self._expiry(finished),
                ":sv": execution.schedule_version,
                **values,
            },
            ReturnValues="UPDATED_NEW",
        )
        try:
            response = _call(completing)
        except LostRace:
            # Paused, cancelled or rescheduled meanwhile, or gone. A one-time job paused while this,
            # its run, was under way keeps a note that it ran: resuming it must not run it again.
            if not job.recurring and not execution.manual:
                self._note_ran_while_paused(job, execution, finished)
            return self.record_outcome(execution) if execution.status.ran_to_end else None
        if not execution.status.ran_to_end:
            return None
        return int(response.get("Attributes", {}).get("failures", 0))

    def record_outcome(self, execution: Execution) -> int | None:
        """Record a finished execution (SUCCEEDED or FAILED) as its job's outcome, unless the job has
        recorded this one already or one that finished after it (a redelivered message, runs ending
        out of order). Returns the job's consecutive failures with it, or None when not recorded (or
        the job is gone)."""
        sets, removes, values = _outcome_update(execution)
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            response = _call(
                partial(
                    self._table.update_item,
                    Key={"pk": _job_pk(execution.job_id), "sk": _JOB_SK},
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(outcome_at) "
                    "OR outcome_at < :oat OR (outcome_at = :oat AND outcome_run < :orun))",
                    ExpressionAttributeValues=values,
                    ReturnValues="UPDATED_NEW",
                )
            )
        except LostRace:
            return None
        return int(response.get("Attributes", {}).get("failures", 0))

    def _note_ran_while_paused(self, job: Job, execution: Execution, finished: datetime) -> None:
        noting = partial(
            self._table.update_item,
            Key={"pk": _job_pk(job.id), "sk": _JOB_SK},
            UpdateExpression="SET ran_at = :at",
            # The pause replaced this execution's version: a job rescheduled before it was paused has
            # a new run to come, which this one does not stand for.
            ConditionExpression="attribute_exists(#pk) AND #st = :paused AND paused_version = :sv",
            ExpressionAttributeNames={"#pk": "pk", "#st": "status"},
            ExpressionAttributeValues={
                ":paused": JobStatus.PAUSED.value,
                ":sv": execution.schedule_version,
                ":at": to_rfc3339(finished),
            },
        )
        try:
            _call(noting)
        except LostRace:
            pass  # not paused from this execution's version: nothing to note

    def get_job_shown(self, job_id: str) -> Job | None:
        """A job as users see it: with its last execution, read from the same partition in the same
        consistent Query (the job item sorts after its executions: newest first, it comes first)."""
        response = _call(
            lambda: self._table.query(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": _job_pk(job_id)},
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=2,  # the job and its newest execution
            )
        )
        items = response.get("Items", [])
        if not items or items[0]["sk"] != _JOB_SK:
            return None
        job = self._job_from(items[0])
        last = self._last_final(items[1:])
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
        newest alone, then 20 more; after `get_job_shown`'s Query has read the newest, 24 more)."""
        for page in range(LAST_EXECUTION_PAGES):
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {":pk": _job_pk(job_id), ":prefix": "EXEC#"},
                "ScanIndexForward": False,
                "ConsistentRead": consistent,
                # (the newest alone first, unless the job's Query has read it)
                "Limit": 1 if page == 0 and start_key is None else LAST_EXECUTION_READ,
            }
            if start_key:
                kwargs["ExclusiveStartKey"] = start_key
            response: dict[str, Any] = _call(partial(self._table.query, **kwargs))
            last = self._last_final(response.get("Items", []))
            start_key = response.get("LastEvaluatedKey")
            if last is not None or start_key is None:
                return last
        return None

    def _last_final(self, items: Iterable[dict[str, Any]]) -> Execution | None:
        for item in items:
            if not str(item["sk"]).startswith("EXEC#"):
                continue
            shown = self._shown_execution(item)
            # (one skipped, CANCELLED for its job paused, cancelled or rescheduled, is not shown)
            if shown is not None and shown.status.ran_to_end:
                return shown
        return None

    def _shown_execution(self, item: dict[str, Any]) -> Execution | None:
        """An execution as shown on its job: no result (it stays on the execution), a short error; None
        for one this version cannot read (a status it does not know)."""
        try:
            execution = self._execution_from(item)
        except (KeyError, ValueError, TypeError):
            return None
        error = None if execution.error is None else execution.error[:200]
        return replace(execution, result=None, error=error, deliveries=())

    def _expiry(self, instant: datetime) -> int:
        return int((instant + self.retention).timestamp())

    # ------------------------------------------------------------ executions
    def execution_statuses(self, executions: Iterable[DueMarker]) -> dict[str, ExecutionStatus | None]:
        """The status of each of these markers' executions that exists, by execution id (consistent);
        None for a status this code does not know (one written by a newer version, say): it exists,
        and is left as it is."""
        keys = [
            {"pk": _job_pk(m.job_id), "sk": _exec_sk(m.scheduled_at, m.execution_id)}
            for m in {m.execution_id: m for m in executions}.values()
        ]
        items = self._batch_get(keys, projection="id, #st", names={"#st": "status"})
        known = {status.value: status for status in ExecutionStatus}
        return {str(item["id"]): known.get(str(item.get("status"))) for item in items}

    def put_new_executions(self, executions: Iterable[Execution], markers: Iterable[DueMarker] = ()) -> None:
        """Store executions read as absent a moment ago, and markers, 25 a call side by side.

        BatchWriteItem has no conditions, hence "read as absent": only a dispatch of the same marker
        running at the same moment could have written the execution meanwhile, which is why a scanner
        tick holds a lease on its shards (`acquire_scan_lease`) and leaves markers an API request is
        dispatching alone (`DueMarker.handoff_until`).
        """
        self._batch_write(
            [{"PutRequest": {"Item": self._execution_item(e)}} for e in executions]
            + [{"PutRequest": {"Item": self._marker_item(m)}} for m in markers]
        )

    def put_execution_if_absent(self, execution: Execution) -> None:
        """Store a not-started execution unless it is stored already (by another worker that has
        claimed it since, say: that copy stands)."""
        try:
            _call(
                lambda: self._table.put_item(
                    Item=self._execution_item(execution), ConditionExpression="attribute_not_exists(pk)"
                )
            )
        except LostRace:
            pass

    def get_execution(self, job_id: str, scheduled_at: datetime, execution_id: str) -> Execution | None:
        key = {"pk": _job_pk(job_id), "sk": _exec_sk(scheduled_at, execution_id)}
        item = _call(lambda: self._table.get_item(Key=key, ConsistentRead=True)).get("Item")
        if item is None:
            return None
        try:
            return self._execution_from(item)
        except (KeyError, ValueError, TypeError) as exc:
            raise UnreadableItem(f"execution {execution_id}: {type(exc).__name__}: {exc}") from exc

    def list_executions(
        self,
        job_id: str,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        status: ExecutionStatus | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Page:
        """A page of the job's executions, newest first: those scheduled at or after `since` and
        before `until` (a range of the sort key: nothing else is read), and with `status` (a filter:
        the executions in the range are read on until the page is full, at most `list_read_budget` a
        request, past which the page may be short, even empty, with a `last_key` to continue from)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": _job_pk(job_id), ":prefix": "EXEC#"},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if since is not None or until is not None:
            low = "EXEC#" if since is None else f"EXEC#{to_epoch_ms(since):013d}"
            # (every id sorts below U+FFFF: the bound takes in all executions of the ms before `until`)
            high = "EXEC#\uffff" if until is None else f"EXEC#{to_epoch_ms(until) - 1:013d}#\uffff"
            kwargs["KeyConditionExpression"] = "pk = :pk AND sk BETWEEN :low AND :high"
            kwargs["ExpressionAttributeValues"] = {":pk": _job_pk(job_id), ":low": low, ":high": high}
        if start_key:
            kwargs["ExclusiveStartKey"] = _cursor_key(
                start_key, equal={"pk": _job_pk(job_id)}, prefixed={"sk": "EXEC#"}
            )
        if status is None:
            response = _call(lambda: self._table.query(**kwargs))
            items = [self._execution_from(i) for i in response.get("Items", [])]
            return Page(items, response.get("LastEvaluatedKey"))
        kwargs["FilterExpression"] = "#st = :st"
        kwargs["ExpressionAttributeNames"] = {"#st": "status"}
        kwargs["ExpressionAttributeValues"][":st"] = status.value
        found: list[dict[str, Any]] = []
        read = 0
        while True:
            kwargs["Limit"] = min(100, self.list_read_budget - read)
            response = _call(partial(self._table.query, **kwargs))
            read += int(response.get("ScannedCount", 0))
            found += response.get("Items", [])
            last_key = response.get("LastEvaluatedKey")
            if len(found) >= limit:
                # Continue after the page's last execution (the query may have read past it).
                more = len(found) > limit or last_key is not None
                page = found[:limit]
                key = {"pk": page[-1]["pk"], "sk": page[-1]["sk"]}
                return Page([self._execution_from(i) for i in page], key if more else None)
            if last_key is None or read >= self.list_read_budget:
                return Page([self._execution_from(i) for i in found], last_key)
            kwargs["ExclusiveStartKey"] = last_key

    def executions_before(self, execution: Execution, limit: int = 10) -> list[Execution]:
        """The job's executions scheduled before this one, newest first (at most `limit`; consistent:
        a run that has just started shows)."""
        response = _call(
            lambda: self._table.query(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :this",
                ExpressionAttributeValues={
                    ":pk": _job_pk(execution.job_id),
                    ":first": "EXEC#",
                    ":this": _exec_sk(execution.scheduled_at, execution.id),
                },
                ScanIndexForward=False,
                Limit=limit + 1,
                ConsistentRead=True,
            )
        )
        found = [self._execution_from(i) for i in response.get("Items", [])]
        return [e for e in found if e.id != execution.id][:limit]

    def scheduled_run(self, job_id: str, schedule_version: int) -> Execution | None:
        """The scheduled (not extra) execution of a one-time job's schedule version, if stored — there
        is one per version: its id comes from the job, its instant and the version (consistent)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "schedule_version = :sv",
            "ExpressionAttributeValues": {
                ":pk": _job_pk(job_id),
                ":prefix": "EXEC#",
                ":sv": schedule_version,
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        while True:
            response: dict[str, Any] = _call(partial(self._table.query, **kwargs))
            for item in response.get("Items", []):
                if not item.get("manual", False):
                    return self._execution_from(item)
            if "LastEvaluatedKey" not in response:
                return None
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def resume_with_run(self, job: Job, run: Execution, now: datetime) -> Job:
        """Resume a paused one-time job at the version of its run under way, so that the run goes on
        and completes it: one transaction, which holds only while the run is still RUNNING or
        RETRYING (a worker cancelling it for the pause checks the job in one too:
        `skip_execution` with `job_paused`). Raises LostRace when either changed."""
        self._transact(
            [
                {
                    "ConditionCheck": {
                        "TableName": self._table.name,
                        "Key": _execution_key(run),
                        "ConditionExpression": "#st IN (:running, :retrying)",
                        "ExpressionAttributeNames": {"#st": "status"},
                        "ExpressionAttributeValues": {
                            ":running": ExecutionStatus.RUNNING.value,
                            ":retrying": ExecutionStatus.RETRYING.value,
                        },
                    }
                },
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": {"pk": _job_pk(job.id), "sk": _JOB_SK},
                        # next_run_at: the run's instant, as on an active one-time job until it completes
                        "UpdateExpression": "SET #st = :active, schedule_version = :run, updated_at = :now, "
                        "next_run_at = :run_at, #rev = if_not_exists(#rev, :zero) + :one "
                        "REMOVE paused_version, ran_at, queued_run_at, expires_at",
                        "ConditionExpression": "attribute_exists(pk) AND #st = :paused AND schedule_version = :sv",
                        "ExpressionAttributeNames": {"#st": "status", "#rev": "revision"},
                        "ExpressionAttributeValues": {
                            ":active": JobStatus.ACTIVE.value,
                            ":paused": JobStatus.PAUSED.value,
                            ":run": run.schedule_version,
                            ":run_at": to_rfc3339(run.scheduled_at),
                            ":sv": job.schedule_version,
                            ":now": to_rfc3339(now),
                            ":zero": 0,
                            ":one": 1,
                        },
                    }
                },
            ]
        )
        resumed = self.get_job(job.id)
        if resumed is None:
            raise LostRace(f"job {job.id} is gone")
        return resumed

    def skip_execution(
        self,
        execution: Execution,
        *,
        finished_at: datetime,
        reason: str,
        job_paused: bool = False,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> None:
        """An execution that must not run -> CANCELLED (or SKIPPED, by the job's policy), only if it is
        still as this copy of it has it:
        a copy read before another worker claimed it must not cancel that worker's run (a RUNNING
        copy names its claim by its lease). With `job_paused`, a run under way (RUNNING or RETRYING)
        is cancelled in one transaction with a check that its job is still paused, so that a resume
        giving the job back this run's version (`resume_with_run`) and this cannot both happen.
        Raises LostRace otherwise."""
        update = (
            "SET #st = :cancelled, finished_at = :at, #err = :err, expires_at = :exp "
            "REMOVE lease_until, next_attempt_at"
        )
        values: dict[str, Any] = {
            ":cancelled": status.value,
            ":read": execution.status.value,
            ":at": to_rfc3339(finished_at),
            ":err": reason,
            ":exp": self._expiry(finished_at),
        }
        if execution.status is ExecutionStatus.RUNNING and execution.started_at is None:
            # Claimed ahead of its instant and never started: the claim's attempt is given back.
            update = update.replace(" REMOVE ", ", attempts = attempts - :one REMOVE ", 1)
            values[":one"] = 1
        if execution.status is ExecutionStatus.RUNNING:
            if execution.lease_until is None:
                condition = "#st = :read AND attribute_not_exists(lease_until)"
            else:
                condition = "#st = :read AND lease_until = :lease"
                values[":lease"] = to_epoch_ms(execution.lease_until)
        elif execution.status is ExecutionStatus.RETRYING:
            condition = "#st = :read AND attempts = :attempts"
            values[":attempts"] = execution.attempts
        else:  # not started: QUEUED, stored or not (the scanner stores none)
            condition = "attribute_not_exists(pk) OR #st = :read"
        if not (job_paused and execution.status.under_way):
            self._update_execution(execution, update, condition, values)
            return
        self._transact(
            [
                {
                    "Update": {
                        "TableName": self._table.name,
                        "Key": _execution_key(execution),
                        "UpdateExpression": update,
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": {"#st": "status", "#err": "error"},
                        "ExpressionAttributeValues": values,
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": self._table.name,
                        "Key": {"pk": _job_pk(execution.job_id), "sk": _JOB_SK},
                        "ConditionExpression": "#st = :paused",
                        "ExpressionAttributeNames": {"#st": "status"},
                        "ExpressionAttributeValues": {":paused": JobStatus.PAUSED.value},
                    }
                },
            ]
        )

    def _transact(self, items: list[dict[str, Any]]) -> None:
        """A TransactWriteItems: twice the write units of its items, and moto (the local stack) copies
        the whole table for one: kept to rare paths."""
        _call(lambda: self._table.meta.client.transact_write_items(TransactItems=items))

    def claim_execution(
        self,
        execution: Execution,
        *,
        now: datetime,
        lease_until: datetime,
        lateness_ms: int | None,
        task_version: int | None = None,
    ) -> Execution:
        """(not stored)/QUEUED/RETRYING (or RUNNING with an expired lease) -> RUNNING, counting one more
        attempt. An execution not stored yet (the scanner stores none) is stored by its first claim.
        Without `lateness_ms` (a claim made before the execution's instant) its start is recorded by
        the write of its attempt's outcome. `task_version`: the version of the job's named task this
        attempt runs, recorded with it."""
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
        return self._update_execution(
            execution,
            "SET #st = :running, attempts = if_not_exists(attempts, :zero) + :one, lease_until = :lease"
            + started
            + " REMOVE next_attempt_at",
            "attribute_not_exists(pk) OR #st IN (:queued, :retrying) "
            # (a RUNNING item without a lease: none is written, but one would otherwise stay stuck)
            "OR (#st = :running AND (lease_until < :now_ms OR attribute_not_exists(lease_until)))",
            {
                ":running": ExecutionStatus.RUNNING.value,
                ":queued": ExecutionStatus.QUEUED.value,
                ":retrying": ExecutionStatus.RETRYING.value,
                ":zero": 0,
                ":one": 1,
                ":lease": to_epoch_ms(lease_until),
                ":now_ms": to_epoch_ms(now),
                **values,
            },
        )

    def release_claim(self, running: Execution) -> None:
        """Give back a claim its worker will not use (it could not tell whether to run or skip the
        execution): back to waiting, the attempt not counted, so that the message, looked at again,
        is not held back by a lease no one uses. Raises LostRace if the claim is no longer this one."""
        first = running.attempts <= 1
        assert running.lease_until is not None, "a claim has a lease"
        self._update_execution(
            running,
            "SET #st = :back, attempts = attempts - :one REMOVE lease_until"
            + (", started_at, lateness_ms" if first else ""),
            "#st = :running AND lease_until = :lease",
            {
                ":back": (ExecutionStatus.QUEUED if first else ExecutionStatus.RETRYING).value,
                ":running": ExecutionStatus.RUNNING.value,
                ":one": 1,
                ":lease": to_epoch_ms(running.lease_until),
            },
        )

    def finish_execution(
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
        return self._update_execution(
            execution,
            "SET #st = :final, finished_at = :at, #err = :err, #res = :res, expires_at = :exp"
            + started
            + " REMOVE lease_until",
            "#st = :running AND attempts = :attempts",
            {
                **values,
                ":final": status.value,
                ":at": to_rfc3339(finished_at),
                ":exp": self._expiry(finished_at),
                ":err": error,
                ":res": None if result is None else json.dumps(result),
                ":running": ExecutionStatus.RUNNING.value,
                ":attempts": execution.attempts,
            },
        )

    def retry_execution(self, execution: Execution, *, next_attempt_at: datetime, error: str) -> Execution:
        """RUNNING (this attempt) -> RETRYING, to be picked up again at `next_attempt_at` (and its start,
        if its claim came before it)."""
        started, values = _start_of(execution)
        return self._update_execution(
            execution,
            "SET #st = :retrying, next_attempt_at = :next, #err = :err, expires_at = :exp"
            + started
            + " REMOVE lease_until",
            "#st = :running AND attempts = :attempts",
            {
                **values,
                ":retrying": ExecutionStatus.RETRYING.value,
                ":exp": self._expiry(next_attempt_at),
                ":next": to_rfc3339(next_attempt_at),
                ":err": error,
                ":running": ExecutionStatus.RUNNING.value,
                ":attempts": execution.attempts,
            },
        )

    def end_execution(
        self,
        execution: Execution,
        *,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str,
        dead_lettered: bool = False,
    ) -> Execution:
        """(not stored)/any status that is not final -> `status` (CANCELLED when skipped, FAILED when
        dead-lettered, which it then says)."""
        values: dict[str, Any] = {
            ":final": status.value,
            ":at": to_rfc3339(finished_at),
            ":exp": self._expiry(finished_at),
            ":err": error,
            ":s": ExecutionStatus.SUCCEEDED.value,
            ":f": ExecutionStatus.FAILED.value,
            ":c": ExecutionStatus.CANCELLED.value,
        }
        marked = ""
        if dead_lettered:
            marked, values[":dl"] = ", dead_lettered = :dl", True
        return self._update_execution(
            execution,
            f"SET #st = :final, finished_at = :at, #err = :err, expires_at = :exp{marked} "
            "REMOVE lease_until, next_attempt_at",
            "attribute_not_exists(pk) OR NOT (#st IN (:s, :f, :c))",
            values,
        )

    def requeue_dead_lettered(self, execution: Execution, now: datetime) -> Execution:
        """A dead-lettered execution (FAILED by the dead-letter handler) -> QUEUED, to run again once a
        message names it (its attempts so far still count). QUEUED already (a redrive interrupted
        before its message was sent) stays so. Raises LostRace otherwise."""
        return self._update_execution(
            execution,
            "SET #st = :queued, expires_at = :exp, redriven_at = :now "
            "REMOVE finished_at, #err, dead_lettered, lease_until, next_attempt_at",
            "(#st = :failed AND dead_lettered = :yes) OR #st = :queued",
            {
                ":queued": ExecutionStatus.QUEUED.value,
                ":failed": ExecutionStatus.FAILED.value,
                ":yes": True,
                ":now": to_rfc3339(now),
                ":exp": self._expiry(now),
            },
        )

    def record_delivery(
        self, job_id: str, scheduled_at: datetime, execution_id: str, delivery: Delivery
    ) -> None:
        """Keep a notification's delivery on its execution's item, unless a record of a later attempt
        is there already (or the execution has expired): one attribute per rule and event."""
        record: dict[str, Any] = {
            "to": delivery.to,
            "status": delivery.status.value,
            "attempts": delivery.attempts,
            "at": to_epoch_ms(delivery.at),
        }
        if delivery.error is not None:
            record["error"] = delivery.error
        if delivery.next_attempt_at is not None:
            record["next"] = to_epoch_ms(delivery.next_attempt_at)
        try:
            _call(
                partial(
                    self._table.update_item,
                    Key={"pk": _job_pk(job_id), "sk": _exec_sk(scheduled_at, execution_id)},
                    UpdateExpression="SET #d = :d",
                    ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(#d) OR #d.#n <= :n)",
                    ExpressionAttributeNames={
                        "#d": _delivery_attribute(delivery.event, delivery.rule),
                        "#n": "attempts",
                    },
                    ExpressionAttributeValues={":d": record, ":n": delivery.attempts},
                )
            )
        except LostRace:
            pass  # expired from the history, or a later attempt's record stands

    # ---------------------------------------------------------- dead letters
    def put_dead_letter(self, letter: DeadLetter) -> None:
        """Keep a dead-lettered execution for its owner (idempotent: one item an execution), for as
        long as its history is kept."""
        item = {
            "pk": _dead_letter_pk(letter.owner),
            "sk": letter.execution_id,
            "job_id": letter.job_id,
            "execution_id": letter.execution_id,
            "scheduled_ms": to_epoch_ms(letter.scheduled_at),
            "schedule_version": letter.schedule_version,
            "manual": letter.manual,
            "dead_lettered_at": to_rfc3339(letter.dead_lettered_at),
            "error": letter.error,
            "expires_at": self._expiry(letter.dead_lettered_at),
        }
        _call(lambda: self._table.put_item(Item={k: v for k, v in item.items() if v is not None}))

    def dead_letters(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the owner's dead letters, by execution id."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _dead_letter_pk(owner)},
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _cursor_key(
                start_key, equal={"pk": _dead_letter_pk(owner)}, prefixed={"sk": ""}
            )
        response = _call(lambda: self._table.query(**kwargs))
        return Page(
            [_dead_letter_from(owner, i) for i in response.get("Items", [])], response.get("LastEvaluatedKey")
        )

    def get_dead_letter(self, owner: str, execution_id: str) -> DeadLetter | None:
        key = {"pk": _dead_letter_pk(owner), "sk": execution_id}
        item = _call(lambda: self._table.get_item(Key=key, ConsistentRead=True)).get("Item")
        return None if item is None else _dead_letter_from(owner, item)

    def delete_dead_letter(self, owner: str, execution_id: str) -> None:
        _call(lambda: self._table.delete_item(Key={"pk": _dead_letter_pk(owner), "sk": execution_id}))

    def _update_execution(
        self, execution: Execution, update: str, condition: str, values: dict[str, Any]
    ) -> Execution:
        """Apply an update to an execution's item. Where the condition lets an absent item through, the
        update stores it: the execution's fixed fields are set if not there yet."""
        names = {"#st": "status"}
        if "#err" in update:
            names["#err"] = "error"
        if "#res" in update:
            names["#res"] = "result"
        if "attribute_not_exists(pk)" in condition:
            item = self._execution_item(execution)
            # (less what this update sets itself: two paths to one attribute are refused)
            fixed = {
                name: item[name] for name in _EXECUTION_FIXED if name in item and f"{name} = " not in update
            }
            sets = []
            for i, (name, value) in enumerate(fixed.items()):
                names[f"#f{i}"] = name
                values = {**values, f":f{i}": value}
                sets.append(f"#f{i} = if_not_exists(#f{i}, :f{i})")
            head, _, tail = update.partition(" REMOVE ")
            update = head + ", " + ", ".join(sets) + (f" REMOVE {tail}" if tail else "")
        response = _call(
            lambda: self._table.update_item(
                Key=_execution_key(execution),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        )
        return self._execution_from(response["Attributes"])

    # ---------------------------------------------------------- due markers
    def put_marker(self, marker: DueMarker) -> None:
        """File the intent to enqueue an execution. Idempotent: the key is derived from the execution."""
        _call(lambda: self._table.put_item(Item=self._marker_item(marker)))

    def due_markers(
        self, minute: str, shard: int, before: datetime, after: str = START_OF_BUCKET
    ) -> Iterator[DueMarker]:
        """Markers in one minute's bucket from position `after` (inclusive: a sort key, or a bound from
        `_sk_bound`) to those due before `before`, oldest first (strongly consistent)."""
        upper = _sk_bound(before)
        if after >= upper:
            return iter(())
        return self._query_markers(
            "pk = :pk AND sk BETWEEN :after AND :before",
            {":pk": {"S": _marker_pk(minute, shard)}, ":after": {"S": after}, ":before": {"S": upper}},
        )

    def soon_markers(self, shard: int, before: datetime, limit: int | None = None) -> Iterator[DueMarker]:
        """The shard's markers filed as due soon, those due before `before`, oldest first (at most
        `limit` of them)."""
        return self._query_markers(
            "pk = :pk AND sk < :before",
            {":pk": {"S": _soon_pk(shard)}, ":before": {"S": _sk_bound(before)}},
            limit,
        )

    def _query_markers(
        self, condition: str, values: dict[str, Any], limit: int | None = None
    ) -> Iterator[DueMarker]:
        kwargs: dict[str, Any] = {
            "TableName": self._table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        left = limit
        while True:
            if left is not None:
                kwargs["Limit"] = left
            response = _call(lambda: self._client.query(**kwargs))
            items = response.get("Items", [])
            for item in items:
                yield self._marker_from(_from_wire(item))
            if left is not None:
                left -= len(items)
            if "LastEvaluatedKey" not in response or (left is not None and left <= 0):
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    @staticmethod
    def marker_position(marker: DueMarker) -> str:
        """A marker's place in its bucket, as a position for `due_markers`."""
        return f"{to_epoch_ms(marker.scheduled_at):013d}#{marker.execution_id}"

    @staticmethod
    def bound_position(instant: datetime) -> str:
        """The position in a bucket after every marker due before `instant`."""
        return _sk_bound(instant)

    def delete_markers(self, markers: Iterable[DueMarker]) -> None:
        requests = [{"DeleteRequest": {"Key": self._marker_key(m)}} for m in markers]
        self._batch_write(requests)

    def quarantine_markers(
        self, markers: Iterable[DueMarker], reasons: dict[str, str], now: datetime
    ) -> None:
        """Set markers whose job cannot be read aside (pk QUARANTINE), with the reason, so that they
        stop holding up their bucket (`punctual.dispatch.release_quarantined` sends them once the job
        is fixed). They are kept until released: no expiry."""
        self._batch_write(
            [
                {
                    "PutRequest": {
                        "Item": {
                            **{k: v for k, v in self._marker_item(m).items() if k != "expires_at"},
                            "pk": _QUARANTINE_PK,
                            "sk": f"{m.job_id}#{to_epoch_ms(m.scheduled_at):013d}#{m.execution_id}",
                            "reason": reasons.get(m.job_id, "unknown"),
                            "quarantined_at": to_rfc3339(now),
                        }
                    }
                }
                for m in markers
            ]
        )

    def quarantined(self, job_id: str | None = None) -> list[tuple[DueMarker, str]]:
        """Quarantined markers (all, or one job's), with why each was set aside."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _QUARANTINE_PK},
            "ConsistentRead": True,
        }
        if job_id is not None:
            kwargs["KeyConditionExpression"] += " AND begins_with(sk, :prefix)"
            kwargs["ExpressionAttributeValues"][":prefix"] = f"{job_id}#"
        found: list[tuple[DueMarker, str]] = []
        while True:
            response = _call(lambda: self._table.query(**kwargs))
            for item in response.get("Items", []):
                marker = DueMarker(
                    job_id=str(item["job_id"]),
                    execution_id=str(item["execution_id"]),
                    scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
                    schedule_version=int(item["schedule_version"]),
                    manual=bool(item.get("manual", False)),
                )
                found.append((marker, str(item.get("reason", ""))))
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def drop_quarantined(self, markers: Iterable[DueMarker]) -> None:
        self._batch_write(
            [
                {
                    "DeleteRequest": {
                        "Key": {
                            "pk": _QUARANTINE_PK,
                            "sk": f"{m.job_id}#{to_epoch_ms(m.scheduled_at):013d}#{m.execution_id}",
                        }
                    }
                }
                for m in markers
            ]
        )

    def put_markers(self, markers: Iterable[DueMarker]) -> None:
        """File markers in batches (idempotent: a marker's key derives from its execution)."""
        self._batch_write([{"PutRequest": {"Item": self._marker_item(m)}} for m in markers])

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        def write(batch: Sequence[dict[str, Any]]) -> None:
            self._pace(batch)
            pending: dict[str, Any] = {self._table_name: [_wire_request(r) for r in batch]}
            for attempt in range(BATCH_ATTEMPTS):
                response = _call(partial(self._client.batch_write_item, RequestItems=pending))
                pending = response.get("UnprocessedItems") or {}
                if not pending:
                    return
                time.sleep(_backoff(attempt))
            raise RetryableStoreError("BatchWriteItem left items unprocessed")

        parallel_map(write, chunks(requests, 25))

    # ------------------------------------------------------------ bookkeeping
    def claim_idempotency_key(
        self, owner: str, key: str, fingerprint: str, job_ids: Sequence[str], now: datetime
    ) -> tuple[str, list[str]] | None:
        """Record that `key` creates `job_ids`; if the key was seen (within its 24 hours), return its
        (fingerprint, job ids). An expired key's item, which DynamoDB's TTL may keep for days, is
        taken over: a key is remembered for 24 hours, no longer."""
        # One job (POST /jobs) as `job_id`, which every deployed version reads; a batch's as the list `job_ids`.
        ids: dict[str, Any] = {"job_id": job_ids[0]} if len(job_ids) == 1 else {"job_ids": list(job_ids)}
        item = {
            **_idempotency_key(owner, key),
            "fingerprint": fingerprint,
            **ids,
            "expires_at": int((now + IDEMPOTENCY_KEY_LIFETIME).timestamp()),
        }
        try:
            _call(
                lambda: self._table.put_item(
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                    ExpressionAttributeValues={":now": int(now.timestamp())},
                )
            )
        except LostRace:
            seen = self.idempotency_key(owner, key, now)
            if seen is None:  # expired between the two calls: claim it afresh
                return self.claim_idempotency_key(owner, key, fingerprint, job_ids, now)
            return seen[0], seen[1]
        return None

    def idempotency_key(self, owner: str, key: str, now: datetime) -> tuple[str, list[str], datetime] | None:
        """The (fingerprint, job ids, when it was claimed) a key was used with, or None if it was not
        (or has expired)."""
        found = _call(
            lambda: self._table.get_item(Key=_idempotency_key(owner, key), ConsistentRead=True)
        ).get("Item")
        if found is None or int(found.get("expires_at", 0)) <= int(now.timestamp()):
            return None
        seen = found["job_ids"] if "job_ids" in found else [found["job_id"]]
        claimed = datetime.fromtimestamp(int(found["expires_at"]), UTC) - IDEMPOTENCY_KEY_LIFETIME
        return str(found["fingerprint"]), [str(job_id) for job_id in seen], claimed

    def acquire_scan_lease(self, shards: Sequence[int], holder: str, now: datetime, until: datetime) -> bool:
        """Take the shards for one scanner tick, unless another tick holds any of them (its lease not
        yet run out): all or nothing. One conditional PutItem a shard, side by side — not a
        transaction, which costs twice the writes (and which moto answers by copying the table)."""

        def take(shard: int) -> bool:
            try:
                _call(
                    partial(
                        self._table.put_item,
                        Item={
                            "pk": "SCANNER",
                            "sk": _lease_sk(shard),
                            "holder": holder,
                            "until_ms": to_epoch_ms(until),
                        },
                        ConditionExpression="attribute_not_exists(pk) OR until_ms < :now",
                        ExpressionAttributeValues={":now": to_epoch_ms(now)},
                    )
                )
            except LostRace:
                return False
            return True

        wanted = sorted(shards)
        taken = [shard for shard, ok in zip(wanted, parallel_map(take, wanted), strict=True) if ok]
        if len(taken) == len(wanted):
            return True
        self.release_scan_lease(taken, holder)
        return False

    def release_scan_lease(self, shards: Sequence[int], holder: str) -> None:
        """Give the shards back (those this holder still holds); a lease left behind runs out anyway."""

        def give_back(shard: int) -> None:
            try:
                _call(
                    partial(
                        self._table.delete_item,
                        Key={"pk": "SCANNER", "sk": _lease_sk(shard)},
                        ConditionExpression="holder = :me",
                        ExpressionAttributeValues={":me": holder},
                    )
                )
            except (LostRace, RetryableStoreError):
                logger.warning("scanner lease not released; it runs out on its own", extra={"shard": shard})

        parallel_map(give_back, list(shards))

    def get_positions(self, shards: Iterable[int]) -> dict[int, tuple[datetime, str] | None]:
        """Per shard, where the scanner reads on: the minute and the position in its bucket (None: never
        scanned). A checkpoint holding only a minute (from before an upgrade) reads as that minute's start."""
        wanted = list(shards)
        found: dict[int, tuple[datetime, str] | None] = dict.fromkeys(wanted)
        keys = [{"pk": "SCANNER", "sk": f"CHECKPOINT#{shard:03d}"} for shard in wanted]
        for item in self._batch_get(keys):
            minute = from_epoch_ms(int(item["minute_ms"]))
            found[int(str(item["sk"]).split("#")[1])] = (minute, str(item.get("after", START_OF_BUCKET)))
        return found

    def set_positions(self, positions: dict[int, tuple[datetime, str]]) -> None:
        """Record where the scanner reads on, per shard. Unconditional: a tick holds a lease on its
        shards, and a position set back only makes a tick read (and send) some markers again, which
        the worker recognises; one set too far would skip markers, which nothing here does."""

        def put(entry: tuple[int, tuple[datetime, str]]) -> None:
            shard, (minute, after) = entry
            _call(
                partial(
                    self._table.put_item,
                    Item={
                        "pk": "SCANNER",
                        "sk": f"CHECKPOINT#{shard:03d}",
                        "minute_ms": to_epoch_ms(minute),
                        "after": after,
                    },
                )
            )

        parallel_map(put, list(positions.items()))

    # ------------------------------------------------------------- mapping
    @staticmethod
    def _owner_pk(owner: str) -> str:
        return f"OWNER#{owner}"

    def _job_attributes(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Domain field values -> stored attributes (None removes the attribute)."""
        stored: dict[str, Any] = {}
        for name, value in changes.items():
            if name in {"task", "retry", "policy"}:
                stored[name] = None if value is None else value.model_dump_json()
            elif name == "tags":
                stored[name] = dict(value) if value else None
            elif name == "schedule":
                stored[name] = SCHEDULE_ADAPTER.dump_json(value).decode()
            elif name in {
                "next_run_at",
                "anchor_at",
                "created_at",
                "updated_at",
                "queued_run_at",
                "ran_at",
                "paused_at",
            }:
                stored[name] = _iso(value)
            elif name == "status":
                stored[name] = value.value
            elif name == "notify":
                stored[name] = _notify_json(value)
            elif name == "signing":
                stored.update(_signing_attributes(value))
            else:
                stored[name] = value
        return stored

    def _job_item(self, job: Job) -> dict[str, Any]:
        item = {
            "pk": _job_pk(job.id),
            "sk": _JOB_SK,
            "id": job.id,
            "owner": job.owner,
            "owner_pk": self._owner_pk(job.owner),
            "owner_sk": f"{to_epoch_ms(job.created_at):013d}#{job.id}",
            "name": job.name,
            "status": job.status.value,
            # (absent while a job with a named task takes the task's: `Job.inherits`)
            "timeout_seconds": None if "timeout_seconds" in job.inherits else job.timeout_seconds,
            "schedule_version": job.schedule_version,
            "final_execution_id": job.final_execution_id,
            "revision": 1,
            **self._job_attributes(
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
            "task_ref": self._task_ref(job.owner, job.task, job.status),
        }
        return {k: v for k, v in item.items() if v is not None}

    @staticmethod
    def _task_ref(owner: str, task: TaskSpec | TaskRef, status: JobStatus) -> str | None:
        """A job's by_task key: only while it keeps its named task in use (ACTIVE or PAUSED)."""
        if isinstance(task, TaskRef) and status in (JobStatus.ACTIVE, JobStatus.PAUSED):
            return task_ref_key(owner, task.name)
        return None

    def _job_from(self, item: dict[str, Any]) -> Job:
        task = json.loads(item["task"])
        inherits = frozenset(name for name in ("retry", "timeout_seconds") if name not in item)
        return Job(
            id=str(item["id"]),
            owner=str(item["owner"]),
            name=str(item.get("name", "")),
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
            paused_version=None if item.get("paused_version") is None else int(item["paused_version"]),
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
        )

    def _execution_item(self, execution: Execution) -> dict[str, Any]:
        created = execution.created_at or execution.scheduled_at
        item = {
            "pk": _job_pk(execution.job_id),
            "sk": _exec_sk(execution.scheduled_at, execution.id),
            "id": execution.id,
            "job_id": execution.job_id,
            "owner": execution.owner,
            "scheduled_at": to_rfc3339(execution.scheduled_at),
            "status": execution.status.value,
            "schedule_version": execution.schedule_version,
            "manual": execution.manual,
            "attempts": execution.attempts,
            "started_at": _iso(execution.started_at),
            "finished_at": _iso(execution.finished_at),
            "lateness_ms": execution.lateness_ms,
            "error": execution.error,
            "result": None if execution.result is None else json.dumps(execution.result),
            "lease_until": None if execution.lease_until is None else to_epoch_ms(execution.lease_until),
            "next_attempt_at": _iso(execution.next_attempt_at),
            "task_version": execution.task_version,
            "created_at": to_rfc3339(created),
            "expires_at": int((max(created, execution.scheduled_at) + self.retention).timestamp()),
            "retry_of": execution.retry_of,
            "dead_lettered": execution.dead_lettered or None,
        }
        return {k: v for k, v in item.items() if v is not None}

    @staticmethod
    def _execution_from(item: dict[str, Any]) -> Execution:
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
            deliveries=_deliveries_from(item),
        )

    def _pace(self, batch: Sequence[dict[str, Any]]) -> None:
        """Wait for room in the marker partitions this batch writes to (`MARKER_PARTITION_WRITES_PER_SECOND`)."""
        per_partition: dict[str, int] = {}
        for request in batch:
            item = (
                request["PutRequest"]["Item"] if "PutRequest" in request else request["DeleteRequest"]["Key"]
            )
            pk = str(item["pk"])
            if pk.startswith(_MARKER_PK_PREFIX):
                per_partition[pk] = per_partition.get(pk, 0) + 1
        for pk, units in per_partition.items():
            self.marker_pacer.wait(pk, units)

    def _marker_key(self, marker: DueMarker) -> dict[str, str]:
        # A marker read back keeps the shard it was filed under, even if the shard count changed since.
        shard = marker.shard if marker.shard is not None else shard_of(marker.execution_id, self.shard_count)
        return {
            "pk": _soon_pk(shard) if marker.soon else _marker_pk(bucket_minute(marker.scheduled_at), shard),
            "sk": f"{to_epoch_ms(marker.scheduled_at):013d}#{marker.execution_id}",
        }

    def _marker_item(self, marker: DueMarker) -> dict[str, Any]:
        return {
            **self._marker_key(marker),
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
        }

    @staticmethod
    def _marker_from(item: dict[str, Any]) -> DueMarker:
        handoff = item.get("handoff_until_ms")
        return DueMarker(
            job_id=str(item["job_id"]),
            execution_id=str(item["execution_id"]),
            scheduled_at=from_epoch_ms(int(item["scheduled_ms"])),
            schedule_version=int(item["schedule_version"]),
            manual=bool(item.get("manual", False)),
            shard=int(str(item["pk"]).rsplit("#", 1)[1]),
            handoff_until=None if handoff is None else from_epoch_ms(int(handoff)),
            soon=str(item["pk"]).startswith(_SOON_PK_PREFIX),
        )
