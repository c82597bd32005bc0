"""Run independent AWS calls side by side: the scanner's throughput is bounded by call latency.

One pool of threads lives as long as the process (a Lambda container reuses it across invocations):
starting threads for every batch of calls cost the scanner more CPU than the calls themselves.
A call made from one of the pool's own threads runs inline, so nested use can never wait on itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

POOL_THREADS = 32

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_inside = threading.local()


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=POOL_THREADS, thread_name_prefix="punctual-io", initializer=_mark_inside
            )
        return _pool


def _mark_inside() -> None:
    _inside.active = True


def parallel_map(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """`[fn(x) for x in items]`, on the shared pool when there is more than one item; order is kept."""
    if len(items) <= 1 or getattr(_inside, "active", False):
        return [fn(item) for item in items]
    return list(_shared_pool().map(fn, items))


def chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
