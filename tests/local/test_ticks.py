"""When the local stack's ticker fires (punctual_local.ticker.next_tick_in)."""

from __future__ import annotations

import pytest

from punctual_local.ticker import next_tick_in


@pytest.mark.parametrize(
    ("now", "period", "wait"),
    [
        (120.0, 60, 30.0),  # on a round minute: the next tick is half a minute later
        (149.0, 60, 1.0),
        (150.0, 60, 60.0),  # on a tick: the next is a whole period later
        (150.5, 60, 59.5),
        (1_000_000.0, 10, 5.0),  # a 10 s tick falls on :05, :15, ...
        (1_000_004.0, 1, 0.5),
    ],
)
def test_ticks_fall_halfway_between_round_instants_one_period_apart(
    now: float, period: int, wait: float
) -> None:
    assert next_tick_in(now, period) == pytest.approx(wait)


def test_no_tick_falls_on_a_round_minute_whatever_the_period() -> None:
    for period in (1, 2, 5, 10, 30, 60):
        now = 1_800_000_000.0  # a round minute
        for _ in range(3 * 60 // period):
            now += next_tick_in(now, period)
            assert now % 60 != 0
