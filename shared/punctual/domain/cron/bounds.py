"""The limits every cron computation spends against, so that no expression or zone can make it run
unbounded: the last year a schedule reaches, how far a search looks, and a budget of work steps and
seconds per call."""

from __future__ import annotations

import time
from collections.abc import Callable

# The largest year any schedule reaches; later runs are treated as the schedule's end.
LAST_YEAR = 9998
SEARCH_YEARS = 400
# Work steps (days looked at, offsets probed) one call may spend, and wall-clock seconds.
BUDGET = 100_000
DEADLINE = 0.5


class CronBoundExceeded(RuntimeError):
    """A computation reached its bound of work or time before it found an answer."""


class Budget:
    """Work steps and a deadline for one computation; `spend` raises CronBoundExceeded past either."""

    def __init__(
        self, steps: int = BUDGET, seconds: float = DEADLINE, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._left = steps
        self._monotonic = monotonic
        self._deadline = monotonic() + seconds
        self._checks = 0

    def spend(self, steps: int = 1) -> None:
        self._left -= steps
        if self._left < 0:
            raise CronBoundExceeded("the schedule needs more work than allowed to find its next run")
        self._checks += 1
        if self._checks % 64 == 0 and self._monotonic() > self._deadline:
            raise CronBoundExceeded("the schedule took too long to find its next run")
