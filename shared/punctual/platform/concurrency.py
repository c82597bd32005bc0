"""Run independent AWS calls side by side: the scanner's throughput is bounded by call latency.

Pools of threads live as long as the process (a Lambda container reuses them across invocations):
starting threads for every batch of calls cost the scanner more CPU than the calls themselves.
A call made from one of the pools' own threads runs inline, so nested use can never wait on itself.

Reads that a caller waits on before it can send anything (a dispatch's BatchGetItem) have a pool of
their own. On the one pool, a pool works first in, first out, and the scanner's lanes each queue
their sends: a lane's reads then waited behind every other lane's sends, all lanes got their reads
back together once that backlog drained, and the pool ran dry while they all worked at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

POOL_THREADS = 32
# Both pools' calls together stay within the SDK's connection pool (platform.aws: 64).
READ_POOL_THREADS = 16

_pools: dict[bool, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()
_inside = threading.local()


def _shared_pool(reads: bool) -> ThreadPoolExecutor:
    with _pool_lock:
        pool = _pools.get(reads)
        if pool is None:
            pool = _pools[reads] = ThreadPoolExecutor(
                max_workers=READ_POOL_THREADS if reads else POOL_THREADS,
                thread_name_prefix="punctual-read" if reads else "punctual-io",
                initializer=_mark_inside,
            )
        return pool


def _mark_inside() -> None:
    _inside.active = True


def parallel_map(fn: Callable[[_T], _R], items: Sequence[_T], *, reads: bool = False) -> list[_R]:
    """`[fn(x) for x in items]`, on a shared pool when there is more than one item; order is kept.
    `reads`: reads the caller waits on before it sends anything, on their own pool (module docstring)."""
    if len(items) <= 1 or getattr(_inside, "active", False):
        return [fn(item) for item in items]
    return list(_shared_pool(reads).map(fn, items))


def chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class PartitionPacer:
    """Keeps this process's writes to each DynamoDB partition key under a rate, so that draining one
    busy bucket never runs into the partition's limit (1,000 write units a second) and relies on
    throttling and retries instead.

    A token bucket per key (the generic cell rate algorithm): a request of `units` waits until the key's
    budget has room for it; up to `burst_seconds` of the rate may go at once. Waits happen outside the
    lock, so writes to other keys (and the same key's, once their turn comes) proceed meanwhile.
    """

    def __init__(
        self,
        units_per_second: float,
        *,
        burst_seconds: float = 0.1,
        monotonic: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.units_per_second = units_per_second
        self._burst = burst_seconds
        self._monotonic = monotonic or time.monotonic
        self._sleep = sleep or time.sleep
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}  # per key: when its budget is spent (theoretical arrival time)

    def wait(self, key: str, units: float) -> float:
        """Block until `units` more may be written to `key`; returns the seconds waited."""
        with self._lock:
            now = self._monotonic()
            due = max(self._due.get(key, now), now) + units / self.units_per_second
            self._due[key] = due
            if len(self._due) > 4096:  # keys of past minutes: forget those whose budget is back
                self._due = {k: t for k, t in self._due.items() if t > now}
        delay = due - now - self._burst
        if delay > 1e-9:
            self._sleep(delay)
            return delay
        return 0.0
