"""The precision benchmark's count of creations in each second of its flood, its watch on its own
process's stalls, and its young stack's shape (bench.precision)."""

from __future__ import annotations

import argparse

from bench.precision.creation import Flooded
from bench.precision.machine import StallWatch
from bench.precision.main import build_parser
from bench.precision.receiver import Delivery
from bench.precision.report import analyse, creation_report
from bench.precision.shapes import BURST, YOUNG_START_SECONDS, Created, Planned, plan_shape, young_burst_at


def test_a_flood_second_without_an_answer_counts_as_a_second_of_none() -> None:
    # Given a flood sent from 100 to 106 s whose answers began only in second 103 (a stall at its start)
    answered = [103.1, 103.5, 104.2, 104.4, 104.6, 105.9, 106.2]
    sent = [103.0, 103.4, 104.1, 104.3, 104.5, 105.8, 106.0]
    flooded = Flooded(answered, sent, [1.0] * len(answered), 0, (100.0, 106.0))
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
    # And the seconds with none answered are seconds with none sent: the clients' stall, not the API's
    assert [flood["sent_by_second_around_burst"][second] for second in ("-3", "-2", "-1", "+0")] == [
        0,
        0,
        0,
        2,
    ]


def test_every_whole_second_of_the_flood_is_counted_and_the_parts_outside_are_not() -> None:
    answered = [10.5, 11.2, 11.7, 12.1, 12.9, 13.3]
    flood = creation_report([], Flooded(answered, answered, [1.0] * 6, 0, (10.5, 13.2)), burst_at=12.0)[
        "flood"
    ]
    # (whole seconds 11 and 12; 10 and 13 are partly outside the window)
    assert (flood["slowest_second"], flood["rate_per_s"]) == (2, 2.0)


def test_the_stall_watch_notes_each_wake_up_later_than_its_threshold_and_when_it_began() -> None:
    now = [1000.0]
    watch = StallWatch(interval=0.05, threshold=0.25, clock=lambda: now[0])
    # Given wake-ups on time, 0.2 s late and 4 s late (the last ending at 1000 s)
    for slept in (0.05, 0.06, 0.25):
        watch.note(slept)
    watch.note(4.05)
    # Then only the 4 s one is a stall, from when it should have woken (996 s), 6 s after the burst
    report = watch.report(burst_at=990.0)
    assert (report["count"], report["seconds"]) == (1, 4.0)
    assert report["longest"] == [[6.0, 4000]]


def test_the_stall_watch_thread_stops_when_asked() -> None:
    watch = StallWatch(interval=0.01)
    watch.start()
    watch.stop()
    assert not watch._thread.is_alive()


def _young_args(**changes: object) -> argparse.Namespace:
    shape = "--burst 100 --burst-scanned-share 0 --burst-handoff-leads 5:170 --stack-age 30"
    args = build_parser().parse_args(shape.split())
    return argparse.Namespace(**{**vars(args), **changes})


def test_a_young_stacks_burst_is_first_created_its_age_after_the_start() -> None:
    # Given a stack to start now, 30 s before the burst's first creation, leads up to 170 s
    args = _young_args()
    now = 1_800_000_007.0
    # When the burst's instant is planned
    burst_at = young_burst_at(args, now)
    # Then it is the first minute boundary that leaves the start, the age and the longest lead
    assert burst_at % 60 == 0
    assert now + YOUNG_START_SECONDS + 30 + 170 <= burst_at < now + YOUNG_START_SECONDS + 30 + 170 + 60


def test_a_young_stacks_shape_spreads_the_burst_over_its_leads_and_drops_steady_jobs_before_it() -> None:
    # Given a young stack ready now, its burst planned 200 s ahead
    args = _young_args(rate=15.0, around=90.0, handoff_window=(2.0, 75.0))
    now = 1_800_000_000.0
    # When the creations are planned
    shape = plan_shape(args, 180, now, burst_at=now + 200.0)
    # Then the burst is due at that instant, each created within the leads given
    burst = shape.plans["handoff burst"]
    assert len(burst) == 100
    assert {p.due for p in burst} == {now + 200.0}
    assert all(5.0 <= p.due - p.create_at <= 170.0 for p in burst)
    assert max(p.due - p.create_at for p in burst) > 150  # spread, not one lead
    # And no steady job is to be created before the stack was ready
    steady = shape.plans["steady"]
    assert steady and min(p.create_at for p in steady) >= now
    assert len(steady) < round(15.0 * 2 * 90.0)


def test_the_bursts_lateness_is_also_given_for_the_jobs_created_before_their_instant() -> None:
    # Given a burst at 1000 s: one job answered 4 s ahead and run 50 ms late, one answered 1 s
    # after its instant (a slow API) and so run 1.2 s late
    burst_at = 1000.0
    on_time = Created(Planned(0, BURST, 995.0, burst_at), "job_a", 995.0, 1.0)
    answered_late = Created(Planned(1, BURST, 998.0, burst_at), "job_b", 998.0, 3.0)
    deliveries = [
        Delivery(burst_at + 0.05, "job_a", "job_a.1", burst_at, 1, burst_at + 0.05),
        Delivery(burst_at + 1.2, "job_b", "job_b.1", burst_at, 1, burst_at + 1.2),
    ]
    # When the run is analysed
    report = analyse([on_time, answered_late], deliveries, burst_at, burst_at).report
    # Then the burst as a whole counts both, and the part created in time only the first
    assert report["lateness_ms_by_class"]["burst"]["all"]["max"] == 1200.0
    assert report["burst_answered_before_instant"]["count"] == 1
    assert report["burst_answered_before_instant"]["max"] == 50.0
