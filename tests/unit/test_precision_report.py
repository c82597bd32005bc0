"""The precision benchmark's count of creations in each second of its flood (bench.precision)."""

from __future__ import annotations

from bench.precision import Flooded, creation_report


def test_a_flood_second_without_an_answer_counts_as_a_second_of_none() -> None:
    # Given a flood sent from 100 to 106 s whose answers began only in second 103 (a stall at its start)
    answered = [103.1, 103.5, 104.2, 104.4, 104.6, 105.9, 106.2]
    flooded = Flooded(answered, [1.0] * len(answered), 0, (100.0, 106.0))
    flood = creation_report([], flooded, burst_at=103.0)["flood"]
    # Then the whole seconds 100 to 105 are counted, the three without answers included
    assert flood["slowest_second"] == 0
    assert flood["rate_per_s"] == round(6 / 6, 1)
    assert flood["answered_by_second_around_burst"] == {
        "-3": 0,
        "-2": 0,
        "-1": 0,
        "+0": 2,
        "+1": 3,
        "+2": 1,
        "+3": 1,
    }


def test_every_whole_second_of_the_flood_is_counted_and_the_parts_outside_are_not() -> None:
    answered = [10.5, 11.2, 11.7, 12.1, 12.9, 13.3]
    flood = creation_report([], Flooded(answered, [1.0] * 6, 0, (10.5, 13.2)), burst_at=12.0)["flood"]
    # (whole seconds 11 and 12; 10 and 13 are partly outside the window)
    assert (flood["slowest_second"], flood["rate_per_s"]) == (2, 2.0)
