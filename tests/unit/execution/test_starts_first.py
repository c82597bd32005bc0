"""Starts before bookkeeping (punctual.execution.starts_first): an ended attempt's outcome waits for the starts."""

from __future__ import annotations

import threading

from punctual.execution.starts_first import StartsFirst


def waiting(starts: StartsFirst) -> threading.Event:
    """An outcome's wait, in a thread of its own: the event is set when it has gone."""
    written = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), written.set()), daemon=True).start()
    return written


def test_with_nothing_starting_an_outcome_goes_at_once() -> None:
    starts = StartsFirst(limit_seconds=10)
    done = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), done.set())).start()
    assert done.wait(5)


def test_an_outcome_waits_while_an_execution_is_starting_and_goes_when_it_has_started() -> None:
    starts = StartsFirst(limit_seconds=30)
    # Given an execution whose instant has come, not started yet
    leave = starts.enter()
    written = waiting(starts)
    # Then another's outcome waits
    assert not written.wait(0.1)
    # When it starts (its task begins), Then the outcome goes
    leave()
    assert written.wait(5)


def test_an_outcome_waits_no_longer_than_the_limit() -> None:
    starts = StartsFirst(limit_seconds=0.05)
    starts.enter()  # never leaves (a stuck read, say)
    written = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), written.set())).start()
    assert written.wait(5)


def test_leaving_twice_counts_once() -> None:
    starts = StartsFirst()
    first, second = starts.enter(), starts.enter()
    first()
    first()  # (its task started, then its handler's finally leaves again)
    assert starts.starting == 1
    second()
    assert starts.starting == 0


def test_a_wait_is_for_the_starts_under_way_when_it_began_not_for_those_after() -> None:
    starts = StartsFirst(limit_seconds=30)
    # Given an execution starting when an outcome begins to wait
    earlier = starts.enter()
    written = waiting(starts)
    assert not written.wait(0.1)
    # When another comes due meanwhile, and the first starts
    later = starts.enter()
    earlier()
    # Then the outcome goes, though the later one is still starting
    assert written.wait(5)
    assert starts.starting == 1
    later()
    assert starts.starting == 0


def test_a_wait_goes_only_once_every_earlier_start_has_left_in_any_order() -> None:
    starts = StartsFirst(limit_seconds=30)
    first, second, third = starts.enter(), starts.enter(), starts.enter()
    written = waiting(starts)
    # When they leave out of order, Then the wait goes only after the last of them
    third()
    second()
    assert not written.wait(0.1)
    first()
    assert written.wait(5)


def test_each_wait_ends_when_the_starts_it_waits_for_have_left_not_before() -> None:
    starts = StartsFirst(limit_seconds=30)
    # Given a wait begun while one execution was starting, and another begun after a second came due
    first = starts.enter()
    early = waiting(starts)
    second = starts.enter()
    late = waiting(starts)
    assert not early.wait(0.1) and not late.wait(0.01)
    # When the first starts, Then only the wait that was for it alone ends
    first()
    assert early.wait(5)
    assert not late.wait(0.1)
    # And the other ends when the second starts
    second()
    assert late.wait(5)


def test_a_wait_past_its_limit_is_forgotten_once_its_starts_have_left() -> None:
    starts = StartsFirst(limit_seconds=0.05)
    leave = starts.enter()
    starts.wait()  # ends at its limit
    leave()
    assert starts._waits == []
