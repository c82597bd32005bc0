"""Validation shared by the API's input models."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BeforeValidator


def _not_a_boolean(value: Any) -> Any:
    # pydantic reads JSON true as 1 for a number; a number written 60.0 or "60" stays accepted.
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


# For a numeric field: `Annotated[int, NOT_BOOLEAN]`.
NOT_BOOLEAN = BeforeValidator(_not_a_boolean)


def refuse_constant(name: str) -> Any:
    """For `json.loads(..., parse_constant=)`: NaN, Infinity and -Infinity are not JSON."""
    raise ValueError(f"{name} is not a JSON value")


def json_problem(value: Any, max_depth: int) -> str | None:
    """What makes a parsed JSON value unfit to store and read back, or None: arrays and objects nested
    deeper than `max_depth` (readers stop at some depth: pydantic's JSON parser near 200), a number
    no float holds (`1e400` parses as infinity, stored as null), or a string holding an unpaired
    surrogate (JSON's `\\ud800` escape allows one; UTF-8 cannot encode it)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is out of range (beyond about 1.8e308, or NaN/Infinity)"
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text"
    return None
