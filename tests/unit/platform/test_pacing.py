"""PartitionPacer: a token bucket per partition key, keeping writes under a partition's limit."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from punctual.platform.concurrency import PartitionPacer


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def pacer(rate: float, clock: FakeTime, burst: float = 0.1) -> PartitionPacer:
    return PartitionPacer(rate, burst_seconds=burst, monotonic=clock.monotonic, sleep=clock.sleep)


def test_writes_within_the_burst_do_not_wait() -> None:
    # Given a pacer at 1,000 units/s with a tenth of a second of burst
    clock = FakeTime()
    paced = pacer(1000, clock)
    # When 100 units are written at once / Then nobody waits
    assert [paced.wait("DUE#a", 25) for _ in range(4)] == [0.0] * 4
    # and the next 25 wait for their share of the rate
    assert paced.wait("DUE#a", 25) == pytest.approx(0.025)


def test_a_long_drain_keeps_to_the_rate() -> None:
    # Given a pacer at 900 units/s
    clock = FakeTime()
    paced = pacer(900, clock)
    # When 15,625 markers are deleted 25 at a time as fast as the pacer lets them
    for _ in range(625):
        paced.wait("DUE#202612010900#000", 25)
    # Then it took 15,625 / 900 s, less the burst allowance, and never went faster
    assert abs(clock.now - (15_625 / 900 - 0.1)) < 1e-6


def test_keys_are_paced_apart() -> None:
    clock = FakeTime()
    paced = pacer(100, clock)
    paced.wait("DUE#a", 10)
    assert paced.wait("DUE#a", 10) > 0
    # another partition has its own budget
    assert paced.wait("DUE#b", 10) == 0.0


def test_an_idle_key_does_not_bank_more_than_its_burst() -> None:
    clock = FakeTime()
    paced = pacer(100, clock)
    clock.now = 3600.0  # an hour idle
    assert paced.wait("DUE#a", 10) == 0.0
    assert paced.wait("DUE#a", 10) == pytest.approx(0.1)  # the burst (10 units) is all it saved up


@given(st.lists(st.integers(1, 25), min_size=1, max_size=200), st.floats(50, 2000))
def test_over_any_sequence_the_rate_holds(sizes: list[int], rate: float) -> None:
    clock = FakeTime()
    paced = pacer(rate, clock)
    for size in sizes:
        paced.wait("DUE#k", size)
    # units written by time t never exceed rate x t + the burst
    assert sum(sizes) <= rate * clock.now + rate * 0.1 + 25 + 1e-6


def test_threads_share_one_budget() -> None:
    # Given real time and four threads writing 40 units each to one key at 1,000 units/s
    paced = PartitionPacer(1000, burst_seconds=0.0)

    def writer() -> None:
        for _ in range(4):
            paced.wait("DUE#a", 10)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then together they took the 160 units' time: 0.16 s, not a quarter of it
    assert time.monotonic() - started >= 0.15
