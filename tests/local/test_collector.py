"""The local stack's processes freeze what survives each full pass of the collector (collector.py), and
its API process pauses it across the threads answering requests."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from punctual_local import collector


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def freezing() -> Iterator[None]:
    collector.freeze_after_full_passes()
    try:
        yield
    finally:
        collector.stop_freezing()
        gc.unfreeze()


def test_what_survives_a_full_pass_is_left_out_of_the_next(freezing: None) -> None:
    # Given objects the process keeps (a table's items, say)
    kept = [{"item": i} for i in range(5_000)]
    gc.unfreeze()
    # When a full pass runs
    gc.collect()
    # Then they are frozen: later passes do not go over them again
    assert gc.get_freeze_count() >= len(kept)
    assert not any(kept[0] is obj for obj in gc.get_objects(2))


def test_a_cycle_made_after_a_pass_is_still_collected(freezing: None) -> None:
    # Given a full pass has frozen what there was
    gc.collect()
    # When a reference cycle made afterwards becomes garbage
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.collect()
    # Then the next full pass reclaims it: passes go over what is new
    assert gone() is None


def test_installing_twice_freezes_once_per_pass(freezing: None) -> None:
    # Given freezing is asked for again (the stack and a test both start it, say)
    collector.freeze_after_full_passes()
    # When it is stopped
    collector.stop_freezing()
    # Then no callback of it is left behind
    assert collector._after_pass not in gc.callbacks


def test_without_it_a_full_pass_freezes_nothing() -> None:
    # Given the collector as CPython leaves it
    gc.unfreeze()
    # When a full pass runs
    gc.collect()
    # Then nothing is frozen: each pass goes over everything the process keeps
    assert gc.get_freeze_count() == 0


@pytest.fixture
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


@pytest.mark.usefixtures("collector_on")
def test_overlapping_requests_leave_it_on_whichever_ends_first() -> None:
    # Given a request in its block, and a second coming in while the collector is off
    first = collector.paused_across_threads()
    second = collector.paused_across_threads()
    first.__enter__()
    second.__enter__()
    # When the first ends before the second, the collector stays off for the second
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    # Then it is on again once the second ends too
    second.__exit__(None, None, None)
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_requests_overlapping_without_a_gap_still_have_their_young_objects_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a request that stays in, and the clock of the collector's pause
    now = [1000.0]
    monkeypatch.setattr(collector.time, "monotonic", lambda: now[0])
    collected: list[int] = []
    monkeypatch.setattr(collector.gc, "collect", lambda generation=2: collected.append(generation) or 0)
    staying = collector.paused_across_threads()
    staying.__enter__()
    # When others come and go beside it, the last one past the longest pause
    for seconds in (1.0, 2.0, collector.LONGEST_PAUSE_SECONDS + 1):
        now[0] += seconds
        with collector.paused_across_threads():
            pass
    # Then the young objects were collected once, the collector still off for the one in
    assert collected == [1] and not gc.isenabled()
    staying.__exit__(None, None, None)
    assert gc.isenabled()
