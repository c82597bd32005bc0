"""A page of a list, and how much one filtered list request reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The most items one filtered list request reads before it answers (a short page and a cursor).
LIST_READ_BUDGET = 500
# A list page stops once its items take this many bytes in the answer (a short page and a cursor):
# Lambda answers at most 6 MiB. The item that reaches it stays (at most about 1.2 MB: 256 KiB of
# parameters, escaped), and jobs' last executions come on top (a few KB each): the page stays
# within 5,000,000 bytes, the rest of 6 MiB left to the envelope.
PAGE_BYTES = 3_500_000


@dataclass(frozen=True)
class Page:
    items: list[Any]
    last_key: dict[str, Any] | None


class PageFill:
    """When a page is full: it holds `limit` items, or, given `size` (an item's bytes in the answer),
    its items reach `budget` bytes. The item that fills it stays on the page: a page holds one item
    at least, and its cursor goes on after that item."""

    def __init__(self, limit: int, size: Callable[[Any], int] | None = None, budget: int = 0) -> None:
        self._limit = limit
        self._size = size
        self._budget = budget
        self._count = 0
        self._bytes = 0

    def full_with(self, item: Any) -> bool:
        """Count `item` onto the page; whether the page is then full."""
        self._count += 1
        if self._size is not None:
            self._bytes += self._size(item)
            if self._bytes >= self._budget:
                return True
        return self._count >= self._limit


def within_bytes(
    page: Page, size: Callable[[Any], int] | None, key_after: Callable[[Any], dict[str, Any]]
) -> Page:
    """A page read whole, ended after the item whose bytes (`size`: an item's in the answer) bring it
    to PAGE_BYTES, its cursor (`key_after`) going on after that item. As it is without `size`."""
    if size is None:
        return page
    fill = PageFill(len(page.items) + 1, size, PAGE_BYTES)
    for n, item in enumerate(page.items[:-1]):
        if fill.full_with(item):
            return Page(page.items[: n + 1], key_after(item))
    return page
