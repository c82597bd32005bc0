"""DynamoDB item sizes and request units, by DynamoDB's published rules.

Item size (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
the sum over attributes of the UTF-8 length of the name plus the value's size — a string its UTF-8
bytes, a number 1 byte per two significant digits plus 1, binary its raw bytes, null/boolean 1 byte,
a list or map 3 bytes plus its elements plus 1 byte per element, a set the sum of its elements.
A write costs ceil(size / 1 KB) write units (the larger of the old and new images for a put or
update, at least 1); a read ceil(size / 4 KB) read units, halved when eventually consistent, always
the whole item's size whatever the projection; a Query rounds the total it read, not each item.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

KB = 1024
WRITE_UNIT_BYTES = 1 * KB
READ_UNIT_BYTES = 4 * KB


def _number_size(text: str) -> int:
    digits = str(Decimal(text)).lstrip("-").replace(".", "").split("E")[0]
    significant = digits.strip("0") or "0"
    return math.ceil(len(significant) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one wire-format attribute value ({"S": ...}, {"N": ...}, ...), without its name."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw) if isinstance(raw, bytes) else len(base64.b64decode(raw))
    if kind in {"BOOL", "NULL"}:
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in raw)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in raw)
    if kind == "BS":
        return sum(len(b) if isinstance(b, bytes) else len(base64.b64decode(b)) for b in raw)
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(*sizes: int) -> int:
    """A write's units: the largest image involved, rounded up to 1 KB, at least 1."""
    return max(1, math.ceil(max(sizes, default=0) / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool) -> float:
    """A read's units: rounded up to 4 KB, at least one unit; half for an eventually consistent read."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def index_write_units(
    old: Mapping[str, Mapping[str, Any]] | None,
    new: Mapping[str, Mapping[str, Any]] | None,
    index_keys: tuple[str, ...],
    table_keys: tuple[str, str],
    *,
    keys_only: bool,
) -> int:
    """Write units one table write costs in one global secondary index.

    An item is in the index when it has every index key attribute. Entering costs a put, leaving a
    delete, a change of index key a delete and a put; any other change of a projected attribute an
    update (with ALL, every attribute is projected; with KEYS_ONLY, only the keys). Index entries are
    sized like items: the projected attributes.
    """

    def entry(item: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any] | None:
        if item is None or any(k not in item for k in index_keys):
            return None
        if keys_only:
            return {k: item[k] for k in (*table_keys, *index_keys)}
        return dict(item)

    before, after = entry(old), entry(new)
    if before is None and after is None:
        return 0
    if before is None:
        return write_units(item_size(after))
    if after is None:
        return write_units(item_size(before))
    if any(before[k] != after[k] for k in index_keys):
        return write_units(item_size(before)) + write_units(item_size(after))
    if before == after:
        return 0
    return write_units(item_size(before), item_size(after))
