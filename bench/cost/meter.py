"""Every AWS call of a run counted by operation, and DynamoDB's request units computed from the items'
sizes, index writes included, by DynamoDB's rules.
"""

from __future__ import annotations

import io
import json
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field, replace
from typing import Any

import boto3

from bench.common import logs_to
from punctual.notify import execution_events
from punctual.platform import aws_limits as sizing
from punctual.platform import resources
from punctual.platform.observability import logger
from punctual.store import keys, streams
from punctual_testing.units import index_write_units, item_size, read_units, write_units
from tests.world import World

POLLING = "sqs.ReceiveMessage"


# The owner of the jobs, as API Gateway's IAM authorization names a caller signing with a role's
# credentials (a service on Lambda or ECS): its assumed-role ARN. A job item stores it twice (its
# owner and its by_owner key), so its length decides whether an item crosses 1 KB, where every
# write of it costs two units.
CALLER = "arn:aws:sts::123456789012:assumed-role/punctual-client/orders-service"
# The stored overhead DynamoDB adds to every item (and index entry) for storage billing.
STORAGE_OVERHEAD_BYTES = 100


@dataclass
class Tally:
    """What a stretch of time cost."""

    calls: Counter[str] = field(default_factory=Counter)
    sqs_billed: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    write_units_keys_only: float = 0.0
    index_write_units_keys_only: float = 0.0  # of write_units_keys_only, the indexes'
    read_units: float = 0.0
    log_bytes: int = 0
    emf_bytes: int = 0
    worker_invocations: int = 0
    worker_messages: int = 0
    # Writes that changed an execution's status: each one a change put on the stack's bus (as deployed)
    status_changes: int = 0
    # The details the execution events function makes of those writes, and the bytes they add to
    # their events
    event_details: int = 0
    event_detail_bytes: int = 0
    # The scanner's own state (its shard leases and positions, pk SCANNER): a few units a shard a
    # tick whatever the load, priced in `fixed_monthly` at their most, not per execution
    bookkeeping_write_units: float = 0.0
    bookkeeping_read_units: float = 0.0

    def minus(self, other: Tally) -> Tally:
        return Tally(
            calls=self.calls - other.calls,
            sqs_billed=self.sqs_billed - other.sqs_billed,
            write_units=self.write_units - other.write_units,
            write_units_keys_only=self.write_units_keys_only - other.write_units_keys_only,
            index_write_units_keys_only=self.index_write_units_keys_only - other.index_write_units_keys_only,
            read_units=self.read_units - other.read_units,
            log_bytes=self.log_bytes - other.log_bytes,
            emf_bytes=self.emf_bytes - other.emf_bytes,
            worker_invocations=self.worker_invocations - other.worker_invocations,
            worker_messages=self.worker_messages - other.worker_messages,
            status_changes=self.status_changes - other.status_changes,
            event_details=self.event_details - other.event_details,
            event_detail_bytes=self.event_detail_bytes - other.event_detail_bytes,
            bookkeeping_write_units=self.bookkeeping_write_units - other.bookkeeping_write_units,
            bookkeeping_read_units=self.bookkeeping_read_units - other.bookkeeping_read_units,
        )

    def detail_bytes(self) -> float:
        """The mean bytes a status change adds to its execution event."""
        return self.event_detail_bytes / self.event_details if self.event_details else 0.0

    def per(self, count: int) -> dict[str, Any]:
        def each(value: float) -> float:
            return round(value / count, 3)

        return {
            "calls": {k: each(v) for k, v in sorted(self.calls.items()) if k != POLLING and v},
            "sqs_billed_requests": each(sum(self.sqs_billed.values())),
            "dynamodb_write_units": each(self.write_units),
            "dynamodb_write_units_if_indexes_keys_only": each(self.write_units_keys_only),
            "dynamodb_read_units": each(self.read_units),
            "log_bytes": each(self.log_bytes),
            "emf_metric_bytes": each(self.emf_bytes),
            "worker_invocations": each(self.worker_invocations),
            "execution_status_changes": each(self.status_changes),
            "execution_event_detail_bytes": round(self.detail_bytes(), 1),
            # (not in the units above: priced in fixed_monthly, whatever the load)
            "scanner_bookkeeping_write_units": each(self.bookkeeping_write_units),
            "scanner_bookkeeping_read_units": each(self.bookkeeping_read_units),
        }


class _CountingStream(io.StringIO):
    """Counts the bytes written to it, and keeps none of them."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


class Meter:
    """Counts the world's AWS calls, their request units and its log bytes."""

    def __init__(self, world: World) -> None:
        self.tally = Tally()
        self._lock = threading.Lock()
        self._reader = boto3.client("dynamodb", region_name="us-east-1")  # not counted
        self._table_keys = (resources.TABLE.partition_key, resources.TABLE.sort_key)
        self._indexes = [i.key_attributes for i in resources.TABLE.indexes]
        self._logs = _CountingStream()
        self._emf = _CountingStream()
        self._world = world
        handler = world.work._handler

        def counted_handler(event: dict[str, Any], context: Any) -> Any:
            with self._lock:
                self.tally.worker_invocations += 1
                self.tally.worker_messages += len(event.get("Records", []))
            # On Lambda the worker has its own process: no keys another function's handler appended
            # to the shared logger (the API's and scanner's Lambda context) reach its lines.
            logger.clear_state()
            return handler(event, context)

        self._counted_handler = counted_handler

    def __enter__(self) -> Meter:
        """Count from here; the world's clients (which outlive it) are left as they were at the end."""
        for dynamodb in self._world.punctual.store.clients:
            dynamodb.meta.events.register("before-call.dynamodb", self._before_dynamodb)
            dynamodb.meta.events.register("after-call.dynamodb", self._after_dynamodb)
        self._world.sqs.meta.events.register("before-call.sqs", self._before_sqs)
        self._handler, self._world.work._handler = self._world.work._handler, self._counted_handler
        return self

    def __exit__(self, *_: object) -> None:
        for dynamodb in self._world.punctual.store.clients:
            dynamodb.meta.events.unregister("before-call.dynamodb", self._before_dynamodb)
            dynamodb.meta.events.unregister("after-call.dynamodb", self._after_dynamodb)
        self._world.sqs.meta.events.unregister("before-call.sqs", self._before_sqs)
        self._world.work._handler = self._handler

    @contextmanager
    def logging(self) -> Iterator[None]:
        """Capture Punctual's logs at the deployed level (INFO) and the EMF metrics it prints."""
        level = logger.log_level
        logger.setLevel("INFO")
        try:
            with logs_to(self._logs), redirect_stdout(self._emf):
                yield
        finally:
            logger.setLevel(level)

    def snapshot(self) -> Tally:
        with self._lock:
            copy = replace(
                self.tally, calls=Counter(self.tally.calls), sqs_billed=Counter(self.tally.sqs_billed)
            )
        copy.log_bytes, copy.emf_bytes = self._logs.bytes, self._emf.bytes
        return copy

    def during(self, action: Callable[[], Any]) -> Tally:
        before = self.snapshot()
        action()
        return self.snapshot().minus(before)

    # ---------------------------------------------------------------- hooks
    def _read(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item = self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return None if item is None else dict(item)

    def _key(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self._table_keys}

    def _before_dynamodb(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        operation, body = model.name, json.loads(params["body"])
        with self._lock:
            self.tally.calls[f"dynamodb.{operation}"] += 1
        writes: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = []
        if operation == "PutItem":
            writes.append((body["TableName"], self._key(body["Item"]), body["Item"], "put"))
        elif operation in {"UpdateItem", "DeleteItem"}:
            writes.append((body["TableName"], body["Key"], None, operation))
        elif operation == "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for r in requests:
                    if "PutRequest" in r:
                        item = r["PutRequest"]["Item"]
                        writes.append((table, self._key(item), item, "put"))
                    else:
                        writes.append((table, r["DeleteRequest"]["Key"], None, "DeleteItem"))
        # The images before the write; the ones after are read back once it is done.
        context["bench_call"] = (
            operation,
            body,
            [(t, k, self._read(t, k), new, kind) for t, k, new, kind in writes],
        )

    def _after_dynamodb(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        operation, body, writes = context.pop("bench_call")
        failed = http_response.status_code >= 300
        write = write_keys_only = index_keys_only = changes = details = detail_bytes = 0
        bookkeeping = 0.0
        for table, key, old, new, kind in writes:
            if _bookkeeping(key):
                # (one unit an item under 1 KB: a lease or a position)
                bookkeeping += write_units(item_size(old), item_size(new)) if not failed else 1
                continue
            if failed:  # a failed condition still costs the existing item's size (or one unit)
                write += write_units(item_size(old))
                write_keys_only += write_units(item_size(old))
                continue
            if kind == "UpdateItem":
                new = self._read(table, key)
            changes += _status_changed(key, old, new)
            for detail in _event_details(key, old, new):
                details += 1
                detail_bytes += execution_events.detail_bytes(detail)
            table_units = write_units(item_size(old), item_size(new))
            write += table_units + sum(
                index_write_units(old, new, ix, self._table_keys, keys_only=False) for ix in self._indexes
            )
            index_units = sum(
                index_write_units(old, new, ix, self._table_keys, keys_only=True) for ix in self._indexes
            )
            write_keys_only += table_units + index_units
            index_keys_only += index_units
        reads, bookkeeping_reads = (0.0, 0.0) if failed else self._read_units(operation, body)
        with self._lock:
            self.tally.bookkeeping_write_units += bookkeeping
            self.tally.bookkeeping_read_units += bookkeeping_reads
            self.tally.write_units += write
            self.tally.write_units_keys_only += write_keys_only
            self.tally.index_write_units_keys_only += index_keys_only
            self.tally.read_units += reads
            self.tally.status_changes += changes
            self.tally.event_details += details
            self.tally.event_detail_bytes += detail_bytes

    def _read_units(self, operation: str, body: dict[str, Any]) -> tuple[float, float]:
        """Reads cost the whole items' sizes, whatever the projection: read them again, whole. The
        read units, and apart the scanner's bookkeeping's."""
        if operation == "GetItem":
            item = self._read(body["TableName"], body["Key"])
            units = read_units(item_size(item), consistent=bool(body.get("ConsistentRead")))
            return (0.0, units) if _bookkeeping(body["Key"]) else (units, 0.0)
        if operation == "BatchGetItem":
            split = [0.0, 0.0]
            for table, spec in body["RequestItems"].items():
                for key in spec["Keys"]:
                    units = read_units(
                        item_size(self._read(table, key)), consistent=bool(spec.get("ConsistentRead"))
                    )
                    split[_bookkeeping(key)] += units
            return split[0], split[1]
        return self._query_units(operation, body), 0.0

    def _query_units(self, operation: str, body: dict[str, Any]) -> float:
        if operation == "Query":
            if "ProjectionExpression" in body:
                raise NotImplementedError("a projected Query: count its whole items before relying on this")
            items = self._reader.query(**body).get("Items", [])
            # A Query rounds up the total it read, not each item; an index is read eventually consistent.
            return read_units(sum(item_size(i) for i in items), consistent=bool(body.get("ConsistentRead")))
        return 0.0

    def _before_sqs(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        operation, body = model.name, json.loads(params["body"] or b"{}")
        billed = 1
        if operation == "SendMessageBatch":
            payload = sum(len(e["MessageBody"].encode()) for e in body["Entries"])
            billed = max(1, math.ceil(payload / sizing.SQS_BILLING_CHUNK_BYTES))
        with self._lock:
            self.tally.calls[f"sqs.{operation}"] += 1
            if operation != "ReceiveMessage":
                self.tally.sqs_billed[operation] += billed


def _bookkeeping(key: dict[str, Any]) -> bool:
    """Whether an item is the scanner's own state (pk SCANNER: its leases and positions)."""
    pk = key.get("pk")
    return (pk.get("S") if isinstance(pk, dict) else pk) == keys.SCANNER_PK


def _record(key: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A write as the table's stream carries it (new and old images)."""
    return {"dynamodb": {"Keys": key, "NewImage": new, "OldImage": old or {}}}


def _event_details(
    key: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The details the execution events function puts for a write (execution_events "all")."""
    if new is None:
        return []
    return execution_events.details_of(_record(key, old, new), streams.execution_change)


def _status_changed(key: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any] | None) -> int:
    """Whether a write changed an execution's status, read as the execution events read the table's
    stream (store.streams): an execution's item, or a run stored on its job's item."""
    if new is None:
        return 0
    change = streams.execution_change(_record(key, old, new))
    if change is None:
        return 0
    if isinstance(change, tuple):
        after, before = change
        return int(after.get("status") != before.get("status"))
    # (a batch's ends item's write: a change a run it adds)
    return len(change) if isinstance(change, list) else 1
