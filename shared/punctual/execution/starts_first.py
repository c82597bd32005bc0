"""Starts before outcomes: in one Lambda environment, an attempt that ended writes its outcome only
once the executions of its instant starting with it are on their way (or after `limit` seconds).

Executions due at one instant wake together: the members of the packs an invocation took (a batch
of up to ten messages), started side by side in one environment. Each starts its task, then writes
its end. An environment of 512 MB has 0.289 of a vCPU: a webhook's start costs it about 3 ms of CPU
there and an UpdateItem about 6 ms (docs/benchmarks.md, the pack-fire runs). A pack of 500 starts
over about 1.5 s; the ends of its first members, written as their answers came, would take 3 s more
of that CPU before its last starts, past the 2 s promise. The same holds between packs: one pack's
ends take the CPU its neighbour's starts need. An outcome can wait a moment without anyone seeing
it, where a start cannot. The wait is bounded: at worst an outcome is written `limit` seconds later
(the execution stays RUNNING under its lease meanwhile, as it would have anyway while it ran). A
wait is for the starts under way when it began, not for those that come after it: in a pack larger
than its threads members keep starting as others end, and waiting for none would make every wait
its limit.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

# How long an ended attempt waits for the starts of its instant in its environment at most.
LIMIT_SECONDS = 2.0


class StartsFirst:
    def __init__(self, limit_seconds: float = LIMIT_SECONDS) -> None:
        self._limit = limit_seconds
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._entered = -1  # the number of the last to enter
        self._starting: list[int] = []  # a heap of the numbers of those starting, and of some that left
        self._left: set[int] = set()  # those in the heap that left
        # A heap of the waits: the last number each waits for, and what wakes it. Each is woken once,
        # when its last has gone: at a burst's instant hundreds of outcomes wait while a thousand
        # executions start, and waking them all at each start (a condition's notify_all) cost the
        # interpreter the starts need.
        self._waits: list[tuple[int, int, threading.Event]] = []
        self._order = itertools.count()

    @property
    def starting(self) -> int:
        with self._lock:
            return len(self._starting) - len(self._left)

    def enter(self) -> Callable[[], None]:
        """An execution's instant has come: counted as starting until the function returned is called
        (at its task's start, or when it does not start after all; calling it again does nothing)."""
        with self._lock:
            number = self._entered = next(self._numbers)
            heapq.heappush(self._starting, number)
        left = False

        def leave() -> None:
            nonlocal left
            with self._lock:
                if left:
                    return
                left = True
                self._left.add(number)
                if self._starting[0] != number:
                    return  # an earlier one is still starting: no wait can end on this
                while self._starting and self._starting[0] in self._left:
                    self._left.discard(heapq.heappop(self._starting))
                ended = self._ended_waits()
            for wait in ended:
                wait.set()

        return leave

    def wait(self) -> None:
        """Until the executions starting now have started (or left), or the limit it was made with."""
        with self._lock:
            last = self._entered
            if self._started_through(last):
                return
            ended = threading.Event()
            heapq.heappush(self._waits, (last, next(self._order), ended))
        # (a real-time bound: it only orders work, and must never wait on a test's clock)
        ended.wait(self._limit)

    def _started_through(self, last: int) -> bool:
        """Whether every execution numbered up to `last` has left (under the lock)."""
        return not self._starting or self._starting[0] > last

    def _ended_waits(self) -> list[threading.Event]:
        """The waits that have ended, taken off the heap (under the lock). A wait past its limit stays
        until then: its event is set for no one."""
        ended = []
        while self._waits and self._started_through(self._waits[0][0]):
            ended.append(heapq.heappop(self._waits)[2])
        return ended
