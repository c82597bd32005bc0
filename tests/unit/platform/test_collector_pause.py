"""The collector paused while requests parse and check their bodies (platform/collector.py): on again
once none is in one, however their blocks overlap on threads."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from punctual.platform import collector


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_off_in_the_block_and_on_again_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_requests_leave_it_on_whichever_ends_first() -> None:
    # Given a request in its block, and a second coming in while the collector is off
    first = collector.paused()
    second = collector.paused()
    first.__enter__()
    second.__enter__()
    # When the first ends before the second, the collector stays off for the second
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    # Then it is on again once the second ends too
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_off_before_stays_off() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()


def test_requests_overlapping_without_a_gap_still_have_their_young_objects_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a request that stays in, and the clock of the collector's pause
    now = [1000.0]
    monkeypatch.setattr(collector.time, "monotonic", lambda: now[0])
    collected: list[int] = []
    monkeypatch.setattr(collector.gc, "collect", lambda generation=2: collected.append(generation) or 0)
    staying = collector.paused()
    staying.__enter__()
    # When others come and go beside it, the last one past the longest pause
    for seconds in (1.0, 2.0, collector.LONGEST_PAUSE_SECONDS + 1):
        now[0] += seconds
        with collector.paused():
            pass
    # Then the young objects were collected once, the collector still off for the one in
    assert collected == [1] and not gc.isenabled()
    staying.__exit__(None, None, None)
    assert gc.isenabled()
