"""moto's items as the journal's records, and back.

A record's key is `[table, hash key, range key]` in DynamoDB JSON; its value is the item's
attributes in DynamoDB JSON, or nothing for a deletion. A restore makes millions of moto's objects,
so they are built here without moto's checks (the item was valid when it was written).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from punctual_local.moto.data_files import StoreError


def key_of(table_name: str, item: Any) -> bytes:
    range_key = item.range_key.to_json() if item.range_key is not None else None
    return json.dumps([table_name, item.hash_key.to_json(), range_key], separators=(",", ":")).encode()


def image(item: Any) -> bytes:
    return json.dumps(item.to_json()["Attributes"], separators=(",", ":")).encode()


def all_tables() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends

    found: dict[str, Any] = {}
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            found.update(backend.tables)
    return found


def new_item(hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> Any:
    """moto's Item, without re-validating its size at every attribute (it was valid when written)."""
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    item: Any = Item.__new__(Item)
    item.hash_key, item.range_key = hash_key, range_key
    values = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.__init__(values)
    for name, value in attrs.items():
        # Interned: several hundred thousand items share a few dozen attribute names.
        dict.__setitem__(values, sys.intern(name), dynamo_value(value))
    item.attrs = values
    return item


def dynamo_value(value: dict[str, Any]) -> Any:
    """moto's DynamoType(value), as its __init__ makes it, in a third of the time (a restore makes
    millions of them)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    ((kind, inner),) = value.items()
    made: Any = DynamoType.__new__(DynamoType)
    made.type = kind
    if kind == "L":
        inner = [dynamo_value(v) for v in inner]
    elif kind == "M":
        inner = {k: dynamo_value(v) for k, v in inner.items()}
    made.value = inner
    return made


def put(table: Any, attrs: dict[str, Any]) -> Any:
    hash_key = dynamo_value(attrs[table.hash_key_attr])
    range_key = dynamo_value(attrs[table.range_key_attr]) if table.range_key_attr else None
    item = new_item(hash_key, range_key, attrs)
    if range_key is not None:
        table.items[hash_key][range_key] = item
    else:
        table.items[hash_key] = item
    return item


def apply(tables: dict[str, Any], key: bytes, item: bytes) -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    table_name, hash_json, range_json = json.loads(key)
    table = tables.get(table_name)
    if table is None:
        raise StoreError(f"the data holds table {table_name!r}, which this stack does not have")
    if item:
        put(table, json.loads(item))
        return
    hash_key = DynamoType(hash_json)
    if range_json is None:
        table.items.pop(hash_key, None)
        return
    partition = table.items.get(hash_key)
    if partition is not None:
        partition.pop(DynamoType(range_json), None)
        if not partition:
            del table.items[hash_key]


def all_items(table: Any) -> Iterator[Any]:
    if table.range_key_attr:
        for partition in table.items.values():
            yield from partition.values()
    else:
        yield from table.items.values()


def count(table: Any) -> int:
    return sum(len(p) for p in table.items.values()) if table.range_key_attr else len(table.items)
