"""An in-memory DynamoDB speaking the wire protocol (JSON, typed attribute values), for the
benchmarks and the store's contract tests.

It implements the operations Punctual's store calls, with DynamoDB's semantics for them: Query on the
table's key or a global secondary index's (sort-key conditions, FilterExpression, Select COUNT,
Limit, ExclusiveStartKey/LastEvaluatedKey, a 1 MB page), GetItem, PutItem, UpdateItem (ReturnValues
NONE, ALL_NEW, UPDATED_NEW) and DeleteItem with condition expressions, TransactWriteItems (all
conditions first, then every write, or none: TransactionCanceledException with its reasons),
BatchGetItem (100 keys) and BatchWriteItem (25 requests, no duplicate keys). Optionally it enforces
DynamoDB's per-partition limit — 1,000 write units and 3,000 read units a second, or a linear
combination of both — on each partition key, answering as DynamoDB does: UnprocessedItems/
UnprocessedKeys in batches, ProvisionedThroughputExceededException otherwise. Scans and anything
else it does not know raise `Unsupported`.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from punctual_testing import expressions
from punctual_testing.expressions import Item, Names, Unsupported, ValidationError
from punctual_testing.units import item_size, read_units, write_units

PAGE_BYTES = 1024 * 1024
PARTITION_WRITE_UNITS = 1000.0
PARTITION_READ_UNITS = 3000.0


class AwsError(Exception):
    def __init__(self, code: str, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.extra = extra or {}  # more of the error's body (a transaction's CancellationReasons)


class _Partition:
    """One partition key's items, with their sort keys kept in order (deletes are lazy)."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.sizes: dict[str, int] = {}  # computed once per write: reads and pages need them
        self.keys: list[str] = []
        self.dead = 0

    def put(self, sort_key: str, item: Item, size: int) -> None:
        if sort_key not in self.items:
            index = bisect.bisect_left(self.keys, sort_key)
            if index < len(self.keys) and self.keys[index] == sort_key:
                self.dead -= 1  # a deleted key comes back
            else:
                self.keys.insert(index, sort_key)
        self.items[sort_key] = item
        self.sizes[sort_key] = size

    def delete(self, sort_key: str) -> None:
        if self.items.pop(sort_key, None) is not None:
            del self.sizes[sort_key]
            self.dead += 1

    def live_keys(self) -> list[str]:
        if self.dead > len(self.items):
            self.keys = [k for k in self.keys if k in self.items]
            self.dead = 0
        return self.keys


class _Throughput:
    """Token buckets per partition key: a second's worth of DynamoDB's per-partition limit."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (fraction of a second used, at)
        self.throttled = 0

    def take(self, partition: str, *, write_units: float = 0.0, read_units: float = 0.0) -> bool:
        now = self._clock()
        used, at = self._buckets.get(partition, (0.0, now))
        used = max(0.0, used - (now - at))
        cost = write_units / PARTITION_WRITE_UNITS + read_units / PARTITION_READ_UNITS
        if used + cost > 1.0:
            self._buckets[partition] = (used, now)
            self.throttled += 1
            return False
        self._buckets[partition] = (used + cost, now)
        return True


@dataclass
class Table:
    name: str
    partition_key: str
    sort_key: str
    partitions: dict[str, _Partition] = field(default_factory=dict)
    # Global secondary indexes, by name: (partition attributes, sort attributes); they project keys only.
    indexes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    def key_of(self, item: Item) -> tuple[str, str]:
        try:
            return str(item[self.partition_key]["S"]), str(item[self.sort_key]["S"])
        except KeyError as exc:
            raise ValidationError(f"the item or key lacks {exc.args[0]} (string keys only)") from None

    def get(self, key: Item) -> Item | None:
        return self.get_sized(key)[0]

    def get_sized(self, key: Item) -> tuple[Item | None, int]:
        """The item with this key (None if there is none) and its size in bytes."""
        if set(key) != {self.partition_key, self.sort_key}:
            raise ValidationError(f"the key must be exactly {self.partition_key} and {self.sort_key}")
        pk, sk = self.key_of(key)
        partition = self.partitions.get(pk)
        if partition is None or sk not in partition.items:
            return None, 0
        return partition.items[sk], partition.sizes[sk]

    def put(self, item: Item, size: int | None = None) -> None:
        pk, sk = self.key_of(item)
        self.partitions.setdefault(pk, _Partition()).put(sk, item, item_size(item) if size is None else size)

    def delete(self, key: Item) -> None:
        pk, sk = self.key_of(key)
        partition = self.partitions.get(pk)
        if partition is not None:
            partition.delete(sk)

    def count(self, prefix: str = "") -> int:
        return sum(len(p.items) for pk, p in self.partitions.items() if pk.startswith(prefix))


class FakeDynamoDB:
    """Tables in memory, served by operation name and wire-format request, thread-safe."""

    def __init__(self, *, partition_limits: bool = True, page_items: int | None = None) -> None:
        self.tables: dict[str, Table] = {}
        self.page_items = page_items
        self.throughput = _Throughput() if partition_limits else None
        self._lock = threading.RLock()
        self._operations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "Query": self._query,
            "GetItem": self._get_item,
            "PutItem": self._put_item,
            "UpdateItem": self._update_item,
            "DeleteItem": self._delete_item,
            "BatchGetItem": self._batch_get_item,
            "BatchWriteItem": self._batch_write_item,
            "TransactWriteItems": self._transact_write_items,
        }

    def create_table(
        self,
        name: str,
        partition_key: str,
        sort_key: str,
        indexes: dict[str, tuple[str | tuple[str, ...], str | tuple[str, ...]]] | None = None,
    ) -> Table:
        """`indexes`: by name, the partition and sort attributes of each (one, or a tuple of several:
        multi-attribute keys)."""
        table = Table(
            name,
            partition_key,
            sort_key,
            indexes={
                index: (_attributes(partition), _attributes(sort))
                for index, (partition, sort) in (indexes or {}).items()
            },
        )
        self.tables[name] = table
        return table

    def handle(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        handler = self._operations.get(operation)
        if handler is None:
            raise Unsupported(f"DynamoDB {operation} is not implemented by the benchmark's fake")
        with self._lock:
            try:
                return handler(request)
            except ValidationError as exc:
                raise AwsError("ValidationException", str(exc)) from exc

    # ----------------------------------------------------------- helpers
    def _table(self, request: dict[str, Any], name: str | None = None) -> Table:
        table_name = name or request.get("TableName", "")
        if table_name not in self.tables:
            raise AwsError("ResourceNotFoundException", f"no table {table_name}")
        return self.tables[table_name]

    @staticmethod
    def _names(request: dict[str, Any]) -> Names:
        return Names(
            request.get("ExpressionAttributeNames", {}), request.get("ExpressionAttributeValues", {})
        )

    @staticmethod
    def _refuse(request: dict[str, Any], *keys: str) -> None:
        for key in keys:
            if request.get(key):
                raise Unsupported(f"{key} is not implemented by the benchmark's fake")

    def _charge(self, partition: str, *, write: float = 0.0, read: float = 0.0) -> bool:
        return self.throughput is None or self.throughput.take(partition, write_units=write, read_units=read)

    def _throttle(self, partition: str, *, write: float = 0.0, read: float = 0.0) -> None:
        if not self._charge(partition, write=write, read=read):
            raise AwsError(
                "ProvisionedThroughputExceededException",
                f"partition {partition} is over its per-partition throughput",
            )

    def _conditional(self, request: dict[str, Any], current: Item | None) -> None:
        expression = request.get("ConditionExpression")
        if expression and not expressions.condition(expression, self._names(request))(current or {}):
            raise AwsError("ConditionalCheckFailedException", "The conditional request failed")

    # -------------------------------------------------------- operations
    def _query(self, request: dict[str, Any]) -> dict[str, Any]:
        self._refuse(request, "QueryFilter", "KeyConditions")
        if request.get("IndexName"):
            return self._query_index(request)
        if request.get("Select", "ALL_ATTRIBUTES") not in {"ALL_ATTRIBUTES", "COUNT"}:
            raise Unsupported(f"Select={request['Select']}")
        table = self._table(request)
        names = self._names(request)
        keep = self._filter(request, names)
        key = expressions.key_condition(
            request["KeyConditionExpression"], names, table.partition_key, table.sort_key
        )
        project = expressions.projection(request.get("ProjectionExpression"), names)
        partition = table.partitions.get(key.partition_value)
        keys = partition.live_keys() if partition is not None else []
        low, high = _sort_range(keys, key)
        forward = request.get("ScanIndexForward", True)
        start = request.get("ExclusiveStartKey")
        if start is not None:
            _, start_sk = table.key_of(start)
            if forward:
                low = max(low, bisect.bisect_right(keys, start_sk))
            else:
                high = min(high, bisect.bisect_left(keys, start_sk))
        limit = int(request.get("Limit") or 0) or None
        if self.page_items is not None:
            limit = min(limit or self.page_items, self.page_items)
        indexes = range(low, high) if forward else range(high - 1, low - 1, -1)
        found: list[Item] = []
        scanned = 0
        read_bytes = 0
        last: Item | None = None
        for index in indexes:
            sort_key = keys[index]
            item = partition.items.get(sort_key) if partition is not None else None
            if item is None or partition is None:
                continue  # deleted
            scanned += 1
            if keep(item):
                found.append(project(item))
            read_bytes += partition.sizes[sort_key]
            if (limit is not None and scanned >= limit) or read_bytes >= PAGE_BYTES:
                last = {table.partition_key: {"S": key.partition_value}, table.sort_key: {"S": sort_key}}
                break
        units = read_units(read_bytes, consistent=bool(request.get("ConsistentRead")))
        self._throttle(key.partition_value, read=units)
        return _query_response(request, found, scanned, last)

    def _query_index(self, request: dict[str, Any]) -> dict[str, Any]:
        """A Query on a global secondary index: keys only, eventually consistent (as DynamoDB, which
        refuses a consistent read of one). Its keys may span attributes (multi-attribute keys): an
        item is in the index only if it has every one."""
        table = self._table(request)
        if request["IndexName"] not in table.indexes:
            raise AwsError("ValidationException", f"no index {request['IndexName']}")
        if request.get("ConsistentRead"):
            raise AwsError(
                "ValidationException", "Consistent reads are not supported on global secondary indexes"
            )
        partition_keys, sort_keys = table.indexes[request["IndexName"]]
        names = self._names(request)
        key = expressions.index_key_condition(
            request["KeyConditionExpression"], names, partition_keys, sort_keys
        )
        keep = self._filter(request, names)
        key_names = (table.partition_key, table.sort_key, *partition_keys, *sort_keys)
        wanted = [{"S": value} for value in key.partition_values]
        entries = sorted(
            (
                (
                    tuple(str(item[name]["S"]) for name in sort_keys),
                    *table.key_of(item),
                    {k: item[k] for k in key_names},
                )
                for partition in table.partitions.values()
                for item in partition.items.values()
                if [item.get(name) for name in partition_keys] == wanted
                and all(name in item for name in sort_keys)
            ),
            key=lambda entry: entry[:3],
        )
        selected = [entry for entry in entries if key.matches(entry[0])]
        if not request.get("ScanIndexForward", True):
            selected.reverse()
        start = request.get("ExclusiveStartKey")
        if start is not None:
            marker = (tuple(str(start[name]["S"]) for name in sort_keys), *table.key_of(start))
            position = next((i for i, entry in enumerate(selected) if entry[:3] == marker), None)
            selected = selected[position + 1 :] if position is not None else []
        limit = int(request.get("Limit") or 0) or None
        page = selected[:limit] if limit is not None else selected
        found = [entry[3] for entry in page if keep(entry[3])]
        last = page[-1][3] if limit is not None and len(selected) > limit else None
        return _query_response(request, found, len(page), last)

    def _filter(self, request: dict[str, Any], names: Names) -> Callable[[Item], bool]:
        expression = request.get("FilterExpression")
        return expressions.condition(expression, names) if expression else lambda item: True

    def _get_item(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self._table(request)
        item, size = table.get_sized(request["Key"])
        pk, _ = table.key_of(request["Key"])
        self._throttle(pk, read=read_units(size, consistent=bool(request.get("ConsistentRead"))))
        if item is None:
            return {}
        return {
            "Item": expressions.projection(request.get("ProjectionExpression"), self._names(request))(item)
        }

    def _put_item(self, request: dict[str, Any]) -> dict[str, Any]:
        self._refuse(request, "Expected", "ConditionalOperator")
        returns = request.get("ReturnValues", "NONE")
        if returns not in ("NONE", "ALL_OLD"):
            raise Unsupported(f"PutItem ReturnValues {returns}")
        table = self._table(request)
        item = request["Item"]
        current, current_size = table.get_sized(_key_dict(table, item))
        pk, _ = table.key_of(item)
        size = item_size(item)
        self._throttle(pk, write=write_units(size, current_size))
        self._conditional(request, current)
        table.put(item, size)
        return {"Attributes": current} if returns == "ALL_OLD" and current else {}

    def _update_item(self, request: dict[str, Any]) -> dict[str, Any]:
        self._refuse(request, "AttributeUpdates", "Expected", "ConditionalOperator")
        table = self._table(request)
        key = request["Key"]
        current, current_size = table.get_sized(key)
        names = self._names(request)
        updated = expressions.update(request.get("UpdateExpression", ""), names)(current or dict(key))
        pk, _ = table.key_of(key)
        size = item_size(updated)
        self._throttle(pk, write=write_units(size, current_size))
        self._conditional(request, current)
        if table.key_of(updated) != table.key_of(key):
            raise AwsError("ValidationException", "an update cannot change the key")
        table.put(updated, size)
        returns = request.get("ReturnValues", "NONE")
        if returns == "ALL_NEW":
            return {"Attributes": updated}
        if returns == "UPDATED_NEW":
            targets = expressions.update_targets(request.get("UpdateExpression", ""), names)
            return {"Attributes": {k: updated[k] for k in targets if k in updated}}
        if returns != "NONE":
            raise Unsupported(f"UpdateItem ReturnValues={returns}")
        return {}

    def _delete_item(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("ReturnValues", "NONE") != "NONE":
            raise Unsupported("DeleteItem ReturnValues")
        table = self._table(request)
        current, current_size = table.get_sized(request["Key"])
        pk, _ = table.key_of(request["Key"])
        self._throttle(pk, write=write_units(current_size))
        self._conditional(request, current)
        table.delete(request["Key"])
        return {}

    def _batch_get_item(self, request: dict[str, Any]) -> dict[str, Any]:
        wanted = request["RequestItems"]
        if sum(len(spec["Keys"]) for spec in wanted.values()) > 100:
            raise AwsError("ValidationException", "too many items requested for the BatchGetItem call")
        responses: dict[str, list[Item]] = {}
        unprocessed: dict[str, Any] = {}
        for name, spec in wanted.items():
            table = self._table(request, name)
            names = Names(spec.get("ExpressionAttributeNames", {}), {})
            project = expressions.projection(spec.get("ProjectionExpression"), names)
            consistent = bool(spec.get("ConsistentRead"))
            left: list[Item] = []
            for key in spec["Keys"]:
                item, size = table.get_sized(key)
                pk, _ = table.key_of(key)
                if not self._charge(pk, read=read_units(size, consistent=consistent)):
                    left.append(key)
                elif item is not None:
                    responses.setdefault(name, []).append(project(item))
            if left:
                unprocessed[name] = {**spec, "Keys": left}
        return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def _batch_write_item(self, request: dict[str, Any]) -> dict[str, Any]:
        wanted = request["RequestItems"]
        if sum(len(r) for r in wanted.values()) > 25:
            raise AwsError("ValidationException", "too many items in the BatchWriteItem call (max 25)")
        unprocessed: dict[str, list[Any]] = {}
        for name, requests in wanted.items():
            table = self._table(request, name)
            seen: set[tuple[str, str]] = set()
            for entry in requests:
                body = entry.get("PutRequest", {}).get("Item") or entry.get("DeleteRequest", {}).get("Key")
                if body is None:
                    raise AwsError("ValidationException", "a request is neither a put nor a delete")
                key = table.key_of(body)
                if key in seen:
                    raise AwsError("ValidationException", "Provided list of item keys contains duplicates")
                seen.add(key)
            for entry in requests:
                if "PutRequest" in entry:
                    item = entry["PutRequest"]["Item"]
                    _, current_size = table.get_sized(_key_dict(table, item))
                    size = item_size(item)
                    if self._charge(table.key_of(item)[0], write=write_units(size, current_size)):
                        table.put(item, size)
                    else:
                        unprocessed.setdefault(name, []).append(entry)
                else:
                    key = entry["DeleteRequest"]["Key"]
                    _, current_size = table.get_sized(key)
                    if self._charge(table.key_of(key)[0], write=write_units(current_size)):
                        table.delete(key)
                    else:
                        unprocessed.setdefault(name, []).append(entry)
        return {"UnprocessedItems": unprocessed}

    def _transact_write_items(self, request: dict[str, Any]) -> dict[str, Any]:
        """Every item's condition is checked first, against the table as it is; only if all hold are
        the writes made (the fake serialises every request, so nothing comes between)."""
        entries = request["TransactItems"]
        if not 1 <= len(entries) <= 100:
            raise AwsError("ValidationException", "a transaction holds 1 to 100 items")
        writes: list[tuple[Table, Item, Item | None]] = []  # (table, key, new item or None: delete)
        reasons: list[dict[str, str]] = []
        seen: set[tuple[str, str, str]] = set()
        for entry in entries:
            ((kind, spec),) = entry.items()
            if kind not in {"ConditionCheck", "Update", "Put", "Delete"}:
                raise Unsupported(f"TransactWriteItems {kind}")
            table = self._table(spec)
            key = _key_dict(table, spec["Item"]) if kind == "Put" else spec["Key"]
            identity = (table.name, *table.key_of(key))
            if identity in seen:
                raise AwsError(
                    "ValidationException",
                    "Transaction request cannot include multiple operations on one item",
                )
            seen.add(identity)
            current = table.get(key)
            names = self._names(spec)
            expression = spec.get("ConditionExpression")
            holds = not expression or expressions.condition(expression, names)(current or {})
            reasons.append({"Code": "None"} if holds else {"Code": "ConditionalCheckFailed"})
            if kind == "Update":
                writes.append(
                    (table, key, expressions.update(spec["UpdateExpression"], names)(current or dict(key)))
                )
            elif kind == "Put":
                writes.append((table, key, spec["Item"]))
            elif kind == "Delete":
                writes.append((table, key, None))
        if any(reason["Code"] != "None" for reason in reasons):
            raise AwsError(
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons",
                {"CancellationReasons": reasons},
            )
        for table, key, item in writes:
            if item is None:
                table.delete(key)
            else:
                table.put(item)
        return {}


def _query_response(
    request: dict[str, Any], found: list[Item], scanned: int, last: Item | None
) -> dict[str, Any]:
    response: dict[str, Any] = {"Count": len(found), "ScannedCount": scanned}
    if request.get("Select") != "COUNT":
        response["Items"] = found
    if last is not None:
        response["LastEvaluatedKey"] = last
    return response


def _key_dict(table: Table, item: Item) -> Item:
    return {table.partition_key: item[table.partition_key], table.sort_key: item[table.sort_key]}


def _sort_range(keys: list[str], key: expressions.KeyCondition) -> tuple[int, int]:
    """The [low, high) slice of the ordered sort keys that the sort-key condition selects."""
    op, values = key.sort_op, key.sort_values
    if op is None:
        return 0, len(keys)
    if op == "=":
        return bisect.bisect_left(keys, values[0]), bisect.bisect_right(keys, values[0])
    if op == "<":
        return 0, bisect.bisect_left(keys, values[0])
    if op == "<=":
        return 0, bisect.bisect_right(keys, values[0])
    if op == ">":
        return bisect.bisect_right(keys, values[0]), len(keys)
    if op == ">=":
        return bisect.bisect_left(keys, values[0]), len(keys)
    if op == "between":
        return bisect.bisect_left(keys, values[0]), bisect.bisect_right(keys, values[1])
    if op == "begins_with":
        # Every string that starts with the prefix sorts before prefix + the last code point.
        return bisect.bisect_left(keys, values[0]), bisect.bisect_left(keys, values[0] + chr(0x10FFFF))
    raise Unsupported(f"sort key condition {op}")


def _attributes(names: str | tuple[str, ...]) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else tuple(names)
