"""Run independent AWS calls side by side: the scanner's throughput is bounded by call latency."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

DEFAULT_WORKERS = 16


def parallel_map(fn: Callable[[_T], _R], items: Sequence[_T], workers: int = DEFAULT_WORKERS) -> list[_R]:
    """`[fn(x) for x in items]`, in threads when there is more than one item; order is kept."""
    if len(items) <= 1 or workers <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
