"""The one DynamoDB table, as every repository of this package calls it.

What it does for them: turns ClientErrors into domain errors (a failed condition: LostRace;
throttling and retryable transaction cancellations: RetryableStoreError); reads and writes in
batches, side by side, retrying what DynamoDB leaves unprocessed and pacing writes to marker
partitions; runs transactions; checks that a cursor's key fits the query it continues. Batch calls go
through a plain client with the small wire converters below: the resource's client converts every
value through boto3's type layer, which cost the scanner a third of its CPU (bench/scanner_throughput).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from punctual.domain.errors import InvalidRequest, LostRace, RetryableStoreError
from punctual.platform.clock import Clock, SystemClock
from punctual.platform.concurrency import PartitionPacer, chunks, parallel_map
from punctual.ports.pages import LIST_READ_BUDGET
from punctual.store import keys
from punctual.store.responses import parse_item_responses_as_json

# Why a transaction was cancelled, besides a failed condition, that trying again can cure.
_TRANSACTION_RETRYABLE = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
_THROTTLING = {
    "ProvisionedThroughputExceededException",
    # A write to an item that a transaction under way includes (`Table.transact`): try again shortly.
    "TransactionConflictException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}
# Unprocessed items are DynamoDB's throttling signal for batches (a hot bucket partition takes 1,000
# writes a second): back off with jitter, for about ten seconds in all, before giving up.
BATCH_ATTEMPTS = 14
# Batched writes to one bucket (a due-marker partition) from this process stay under 90 % of a
# partition's 1,000 write units a second (a marker is under 1 KB: one unit), leaving the rest to
# markers filed into it meanwhile: a scanner draining a minute of a million executions (15,625 markers
# a bucket at the deployed 64 shards) keeps under the limit instead of being throttled into retries.
MARKER_PARTITION_WRITES_PER_SECOND = 900.0

_T = TypeVar("_T")
# A call that got no answer (a connection refused, reset or timed out) after botocore's own retries.
# Not retried by `call`: a conditional write may have been applied, and tried again it would fail its
# condition, read as another worker's doing; the raw error gives the message back instead.
NO_ANSWER = (HTTPClientError, BotocoreConnectionError)


def call(operation: Callable[[], _T]) -> _T:
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


def cursor_key(
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


def to_wire(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _wire(value) for name, value in item.items()}


def from_wire(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _unwire(value) for name, value in item.items()}


def _wire_request(request: dict[str, Any]) -> dict[str, Any]:
    if "PutRequest" in request:
        return {"PutRequest": {"Item": to_wire(request["PutRequest"]["Item"])}}
    return {"DeleteRequest": {"Key": to_wire(request["DeleteRequest"]["Key"])}}


def put(item: dict[str, Any]) -> dict[str, Any]:
    """A BatchWriteItem request storing `item`."""
    return {"PutRequest": {"Item": item}}


def delete(key: dict[str, Any]) -> dict[str, Any]:
    """A BatchWriteItem request deleting the item with `key`."""
    return {"DeleteRequest": {"Key": key}}


class Table:
    """The table and the settings its repositories share (a history's retention, the shard count)."""

    def __init__(
        self,
        dynamodb: Any,
        client: Any,
        table_name: str,
        *,
        shard_count: int,
        retention_days: int,
        clock: Clock | None = None,
    ) -> None:
        """`dynamodb` is a boto3 resource; `client` a plain DynamoDB client (the batches and the
        scanner's marker queries). `clock`: what says whether a run's instant has come (the readers of
        a batch's ends item look for a run's end only then)."""
        self.clock = clock or SystemClock()
        self.resource = dynamodb.Table(table_name)
        self.client = client
        for each in (dynamodb.meta.client, client):
            parse_item_responses_as_json(each)
        self.name = table_name
        self.shard_count = shard_count
        self.retention = timedelta(days=retention_days)
        self.list_read_budget = LIST_READ_BUDGET
        self.marker_pacer = PartitionPacer(MARKER_PARTITION_WRITES_PER_SECOND)

    def expiry(self, instant: datetime) -> int:
        """When an item of a history that ends at `instant` expires (epoch seconds, the TTL)."""
        return int((instant + self.retention).timestamp())

    def query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        """Every item a (resource) Query selects, page after page."""
        found: list[dict[str, Any]] = []
        while True:
            response = call(partial(self.resource.query, **kwargs))
            found += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def transact(self, items: list[dict[str, Any]]) -> None:
        """A TransactWriteItems: twice the write units of its items, and moto (the local stack) copies
        the whole table for one: kept to rare paths."""
        call(lambda: self.resource.meta.client.transact_write_items(TransactItems=items))

    def batch_get(
        self,
        keys_: Sequence[dict[str, str]],
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
            spec["Keys"] = [to_wire(key) for key in batch]
            request: dict[str, Any] = {self.name: spec}
            for attempt in range(BATCH_ATTEMPTS):
                response = call(partial(self.client.batch_get_item, RequestItems=request))
                found.extend(from_wire(item) for item in response.get("Responses", {}).get(self.name, []))
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    return found
                time.sleep(_backoff(attempt))
            raise RetryableStoreError("BatchGetItem left keys unprocessed")

        return [item for items in parallel_map(read, chunks(keys_, 100), reads=True) for item in items]

    def batch_write(self, requests: list[dict[str, Any]]) -> None:
        """Puts and deletes (`put`, `delete`), 25 a call side by side, retrying unprocessed ones."""

        def write(batch: Sequence[dict[str, Any]]) -> None:
            self._pace(batch)
            pending: dict[str, Any] = {self.name: [_wire_request(r) for r in batch]}
            for attempt in range(BATCH_ATTEMPTS):
                response = call(partial(self.client.batch_write_item, RequestItems=pending))
                pending = response.get("UnprocessedItems") or {}
                if not pending:
                    return
                time.sleep(_backoff(attempt))
            raise RetryableStoreError("BatchWriteItem left items unprocessed")

        parallel_map(write, chunks(requests, 25))

    def query_wire(self, limit: int | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """The items a Query on the plain client selects, as plain values, page after page (at most
        `limit`), lazily."""
        kwargs = {"TableName": self.name, **kwargs}
        left = limit
        while True:
            if left is not None:
                kwargs["Limit"] = left
            response = call(partial(self.client.query, **kwargs))
            items = response.get("Items", [])
            for item in items:
                yield from_wire(item)
            if left is not None:
                left -= len(items)
            if "LastEvaluatedKey" not in response or (left is not None and left <= 0):
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _pace(self, batch: Sequence[dict[str, Any]]) -> None:
        """Wait for room in the marker partitions this batch writes to (`MARKER_PARTITION_WRITES_PER_SECOND`)."""
        per_partition: dict[str, int] = {}
        for request in batch:
            item = (
                request["PutRequest"]["Item"] if "PutRequest" in request else request["DeleteRequest"]["Key"]
            )
            pk = str(item["pk"])
            if keys.is_marker_pk(pk):
                # (a group item of many markers, about 30 bytes each, is a write unit a kilobyte)
                units = 1 + len(str(item.get("members", ""))) // 1024
                per_partition[pk] = per_partition.get(pk, 0) + units
        for pk, units in per_partition.items():
            self.marker_pacer.wait(pk, units)
