"""Validation shared by the API's input models."""

from __future__ import annotations

from typing import Any

from pydantic import BeforeValidator


def _not_a_boolean(value: Any) -> Any:
    # pydantic reads JSON true as 1 for a number; a number written 60.0 or "60" stays accepted.
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


# For a numeric field: `Annotated[int, NOT_BOOLEAN]`.
NOT_BOOLEAN = BeforeValidator(_not_a_boolean)
