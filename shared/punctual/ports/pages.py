"""A page of a list, and how much one filtered list request reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The most items one filtered list request reads before it answers (a short page and a cursor).
LIST_READ_BUDGET = 500


@dataclass(frozen=True)
class Page:
    items: list[Any]
    last_key: dict[str, Any] | None
