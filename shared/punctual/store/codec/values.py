"""Stored values every kind of item shares: times as RFC 3339 text, optional times and numbers, and
an item less its absent attributes. Apart so that each kind's module takes these from here rather
than from another kind's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from punctual.platform.timefmt import parse_stored, to_rfc3339


def iso(value: datetime | None) -> str | None:
    return None if value is None else to_rfc3339(value)


def from_iso(value: Any) -> datetime | None:
    return None if value in (None, "") else parse_stored(str(value))


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def present(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}
