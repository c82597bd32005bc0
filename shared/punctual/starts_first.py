"""Starts before bookkeeping: in one process, an attempt that ended writes its outcome only once no
execution whose instant has come is still on its way to its start (or after `limit` seconds).

Executions due at one instant wake together. Each reads whether its job changed, starts its task,
and then writes its end and the job's outcome. Those writes of the first to finish take the store's
time and the process's that the others' reads and starts wait on, and an outcome can wait a moment
without anyone seeing it, where a start cannot. The wait is bounded: at worst an outcome is written
`limit` seconds later (the execution stays RUNNING under its lease meanwhile, as it would have
anyway while it ran).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

# How long an ended attempt waits for the starts of its process at most.
LIMIT_SECONDS = 2.0


class StartsFirst:
    def __init__(self, limit_seconds: float = LIMIT_SECONDS) -> None:
        self._limit = limit_seconds
        self._changed = threading.Condition()
        self._starting = 0

    @property
    def starting(self) -> int:
        with self._changed:
            return self._starting

    def enter(self) -> Callable[[], None]:
        """An execution's instant has come: counted as starting until the function returned is called
        (at its task's start, or when it does not start after all; calling it again does nothing)."""
        with self._changed:
            self._starting += 1
        left = False

        def leave() -> None:
            nonlocal left
            with self._changed:
                if left:
                    return
                left = True
                self._starting -= 1
                if not self._starting:
                    self._changed.notify_all()

        return leave

    def wait(self, limit_seconds: float | None = None) -> None:
        """Until no execution is starting, or `limit_seconds` (by default the limit it was made with)."""
        with self._changed:
            # (a real-time bound: it only orders work, and must never wait on a test's clock)
            self._changed.wait_for(
                lambda: not self._starting, timeout=self._limit if limit_seconds is None else limit_seconds
            )
