"""The local stack's processes freeze what survives each full pass of the collector (collector.py)."""

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
