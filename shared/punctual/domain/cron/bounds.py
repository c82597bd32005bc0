"""The limits every cron computation spends against, so that no expression or zone can make it run
unbounded: the last year a schedule reaches, how far a search looks, and a budget of work steps per
call.

The budget counts work, not time: the same schedule gets the same answer on an idle machine and a
busy one, and whatever a cache holds (a zone's changes of offset are charged as if computed)."""

from __future__ import annotations

# The largest year any schedule reaches; later runs are treated as the schedule's end.
LAST_YEAR = 9998
SEARCH_YEARS = 400
# Work steps one call may spend: a day looked at is one, a year of a zone's offsets probed
# ZONE_YEAR_STEPS (about 0.5 ms of CPU, some 250 days' looks). 100,000 steps are about 0.1-0.3 s of
# CPU here.
BUDGET = 100_000
ZONE_YEAR_STEPS = 250
# The steps a job's next run may take once the job is stored (the scheduler chaining its runs): a
# request's schedule was checked within BUDGET for its first run, but a later gap between runs can
# take more. The longest gap a schedule can have is about 40 years (a fifth weekday of February), and
# the most a zone changes its offset in coming years is four times a year (Asia/Gaza, until 2086);
# the costliest such gap found (the fifth Monday of February in Gaza, 2072 to 2112) took 113,382
# steps, 0.1-0.2 s of CPU. This is about six times that.
CHAIN_BUDGET = SEARCH_YEARS * (366 + 5 * ZONE_YEAR_STEPS)


class CronBoundExceeded(RuntimeError):
    """A computation reached its bound of work before it found an answer."""


class Budget:
    """Work steps for one computation; `spend` raises CronBoundExceeded past them."""

    def __init__(self, steps: int = BUDGET) -> None:
        self._left = steps

    def spend(self, steps: int = 1) -> None:
        self._left -= steps
        if self._left < 0:
            raise CronBoundExceeded("the schedule needs more work than allowed to find its next run")
