"""A write that must happen (a run's end, its outcome) rides out throttling for a while, by the clock."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import pairwise

import pytest

from punctual.domain.errors import RetryableStoreError
from punctual.execution.hooks import PERSIST_MAX_BACKOFF_SECONDS, PERSIST_SECONDS, persist
from punctual.platform.clock import ManualClock

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def throttled_for(clock: ManualClock, seconds: float) -> tuple[list[float], Callable[[], str]]:
    """A write refused as throttled until `seconds` have passed; the times it was tried."""
    tried: list[float] = []

    def write() -> str:
        elapsed = (clock.now() - START).total_seconds()
        tried.append(elapsed)
        if elapsed < seconds:
            raise RetryableStoreError("ThrottlingException")
        return "stored"

    return tried, write


def test_a_write_throttled_for_ten_seconds_is_stored_not_given_up() -> None:
    # Given a table throttling the write for 10 s (the ends of a crowded instant queueing for units)
    clock = ManualClock(START)
    tried, write = throttled_for(clock, 10.0)
    # When it is persisted / Then it is stored, tried at most every PERSIST_MAX_BACKOFF_SECONDS once
    # backed off
    assert persist(write, clock, random.Random(1)) == "stored"
    assert 10.0 <= tried[-1] <= 10.0 + PERSIST_MAX_BACKOFF_SECONDS
    assert all(b - a <= PERSIST_MAX_BACKOFF_SECONDS for a, b in pairwise(tried))


def test_a_write_throttled_past_the_budget_gives_the_message_back_in_time() -> None:
    # Given a table throttling the write for longer than the budget
    clock = ManualClock(START)
    tried, write = throttled_for(clock, 10 * PERSIST_SECONDS)
    # When it is persisted / Then it gives up, within the budget (the pack's lease still holds)
    with pytest.raises(RetryableStoreError):
        persist(write, clock, random.Random(1))
    assert PERSIST_SECONDS - PERSIST_MAX_BACKOFF_SECONDS <= tried[-1] <= PERSIST_SECONDS
