"""When schedules run: at and now, cron in UTC and in time zones (fixed examples), rate, preview.

DST rules are the contract's (docs/api.md): Debian cron's (tests/unit/domain/test_cron.py holds the exact model).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.domain.schedules import (
    AtSchedule,
    NowSchedule,
    RateSchedule,
    next_run,
    occurrences,
    preview,
    rate_anchor,
)
from tests.unit.domain.schedule_helpers import FALL_BACK_SECOND_PASS, cron, first, instants_2026_2027, utc

# --- at and now ---------------------------------------------------------------------------------


@pytest.mark.parametrize("after", [utc(2026, 1, 1), utc(2026, 12, 1, 9), utc(2027, 6, 1)])
def test_at_schedule_yields_its_instant_once_whatever_after_is(after: datetime) -> None:
    schedule = AtSchedule.model_validate({"type": "at", "at": "2026-12-01T10:00:00+01:00"})
    assert list(occurrences(schedule, after)) == [utc(2026, 12, 1, 9)]


def test_now_schedule_yields_after_once() -> None:
    after = utc(2026, 3, 4, 5, 6, 7)
    assert list(occurrences(NowSchedule(type="now"), after)) == [after]


# --- cron: fixed examples -------------------------------------------------------------------------


def test_cron_in_a_zone_runs_at_local_wall_time() -> None:
    # Given 10:00 in Paris in winter (UTC+1) / Then runs are at 09:00Z
    runs = first(cron("0 10 * * *", "Europe/Paris"), utc(2026, 12, 1), 2)
    assert runs == [utc(2026, 12, 1, 9), utc(2026, 12, 2, 9)]


def test_cron_includes_a_run_exactly_at_after_and_excludes_one_a_millisecond_before() -> None:
    schedule = cron("0 9 * * *")
    assert next_run(schedule, utc(2026, 12, 1, 9)) == utc(2026, 12, 1, 9)
    assert next_run(schedule, utc(2026, 12, 1, 9) + timedelta(milliseconds=1)) == utc(2026, 12, 2, 9)


def test_spring_forward_gap_time_runs_at_first_instant_after_the_gap() -> None:
    # Given 02:30 in Paris, which does not exist on 2026-03-29 (02:00 -> 03:00)
    runs = first(cron("30 2 * * *", "Europe/Paris"), utc(2026, 3, 28, 12), 3)

    # Then that day it runs at 03:00 local = 01:00Z, and normally (00:30Z in CEST) after
    assert runs == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30), utc(2026, 3, 31, 0, 30)]


def test_fall_back_fixed_time_runs_once_at_its_first_occurrence() -> None:
    # Given 01:30 in New York, which happens twice on 2026-11-01 (05:30Z EDT, 06:30Z EST)
    runs = first(cron("30 1 * * *", "America/New_York"), utc(2026, 10, 31, 12), 3)

    # Then it runs once, in the first pass, and the next day at 01:30 EST
    assert runs == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30), utc(2026, 11, 3, 6, 30)]


def test_fall_back_fixed_time_started_between_passes_waits_for_next_day() -> None:
    # Given the first pass of 01:30 is over (05:45Z) / Then the second pass is not a new occurrence
    assert next_run(cron("30 1 * * *", "America/New_York"), utc(2026, 11, 1, 5, 45)) == utc(
        2026, 11, 2, 6, 30
    )


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (
            "*/30 1 * * *",
            [utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 30)],
        ),
        (
            "30 * * * *",
            [
                utc(2026, 11, 1, 4, 30),
                utc(2026, 11, 1, 5, 30),
                utc(2026, 11, 1, 6, 30),
                utc(2026, 11, 1, 7, 30),
            ],
        ),
    ],
)
def test_fall_back_wildcard_schedule_runs_in_both_passes(expression: str, expected: list[datetime]) -> None:
    # Given a schedule with * in its minute or hour field, over New York's repeated 01:00 hour
    runs = first(cron(expression, "America/New_York"), utc(2026, 11, 1, 4), 4)

    # Then it runs in both passes: 05:30Z (EDT) and 06:30Z (EST)
    assert runs == expected


def test_restricted_day_of_month_and_day_of_week_match_when_either_matches() -> None:
    # Given "the 13th, or a Friday" over February-March 2026 (Fri 13 Feb and Fri 13 Mar included)
    runs = first(cron("0 0 13 * 5"), utc(2026, 2, 1), 9)

    # Then every Friday and every 13th runs, each once
    assert runs == [
        utc(2026, 2, 6),
        utc(2026, 2, 13),
        utc(2026, 2, 20),
        utc(2026, 2, 27),
        utc(2026, 3, 6),
        utc(2026, 3, 13),
        utc(2026, 3, 20),
        utc(2026, 3, 27),
        utc(2026, 4, 3),
    ]
    # and a 13th that is not a Friday still runs
    assert next_run(cron("0 0 13 * 5"), utc(2026, 4, 4)) == utc(2026, 4, 10)
    assert utc(2026, 4, 13) in first(cron("0 0 13 * 5"), utc(2026, 4, 4), 3)


def test_cron_start_at_later_than_after_delays_the_first_run() -> None:
    schedule = cron("0 9 * * *", start_at="2026-12-05T00:00:00Z")
    assert next_run(schedule, utc(2026, 12, 1)) == utc(2026, 12, 5, 9)


def test_cron_stops_after_end_at() -> None:
    # Given a daily schedule ending mid-day on the 3rd
    schedule = cron("0 9 * * *", end_at="2026-12-03T12:00:00Z")

    # Then it runs on the 1st, 2nd and 3rd, then never again
    assert list(occurrences(schedule, utc(2026, 12, 1))) == [utc(2026, 12, d, 9) for d in (1, 2, 3)]
    assert next_run(schedule, utc(2026, 12, 3, 9, 0, 1)) is None


def test_end_at_is_the_first_instant_without_a_run() -> None:
    # (as 2200-01-01 is for every schedule, and as EventBridge Scheduler's EndDate is)
    daily = cron("0 9 * * *", end_at="2026-12-03T09:00:00Z")
    assert list(occurrences(daily, utc(2026, 12, 1))) == [utc(2026, 12, d, 9) for d in (1, 2)]
    hourly = RateSchedule.model_validate(
        {
            "type": "rate",
            "every_seconds": 3600,
            "start_at": "2026-12-01T09:00:00Z",
            "end_at": "2026-12-01T11:00:00Z",
        }
    )
    anchor = rate_anchor(hourly, utc(2026, 11, 1))
    assert list(occurrences(hourly, utc(2026, 12, 1), anchor)) == [utc(2026, 12, 1, h) for h in (9, 10)]


def test_wildcard_cron_resumed_just_after_a_second_pass_run_keeps_the_following_runs() -> None:
    # Given "*/30 * * * *" in New York, and the 06:00Z run (01:00 EST, second pass) just done
    schedule = cron("*/30 * * * *", "America/New_York")

    # When the next run is asked from a millisecond after it (what models.next_after does)
    runs = first(schedule, FALL_BACK_SECOND_PASS + timedelta(milliseconds=1), 2)

    # Then 06:30Z and 07:00Z are next, not 07:30Z
    assert runs == [utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7)]


# --- rate ---------------------------------------------------------------------------------------


def test_rate_anchor_is_start_at_when_given() -> None:
    schedule = RateSchedule.model_validate(
        {"type": "rate", "every_seconds": 3600, "start_at": "2026-12-01T09:00:00Z"}
    )
    assert rate_anchor(schedule, utc(2026, 11, 1)) == utc(2026, 12, 1, 9)


def test_rate_without_start_at_first_runs_one_period_after_creation() -> None:
    # Given a 5-minute rate created at 09:00:10Z
    schedule = RateSchedule(type="rate", every_seconds=300)
    created = utc(2026, 12, 1, 9, 0, 10)
    anchor = rate_anchor(schedule, created)

    # Then the first run is 09:05:10Z and runs follow every 5 minutes from there
    assert anchor == utc(2026, 12, 1, 9, 5, 10)
    assert first(schedule, created, 3, anchor) == [anchor + timedelta(minutes=5 * k) for k in range(3)]


def test_rate_runs_stay_on_the_anchor_grid_when_asked_late() -> None:
    # Given an hourly rate anchored at 09:00:00Z, asked at 12:34Z
    schedule = RateSchedule.model_validate(
        {"type": "rate", "every_seconds": 3600, "start_at": "2026-12-01T09:00:00Z"}
    )
    anchor = rate_anchor(schedule, utc(2026, 11, 1))

    # Then the next runs are 13:00Z, 14:00Z (not 13:34Z)
    assert first(schedule, utc(2026, 12, 1, 12, 34), 2, anchor) == [
        utc(2026, 12, 1, 13),
        utc(2026, 12, 1, 14),
    ]
    # and a run exactly on the grid is included
    assert next_run(schedule, utc(2026, 12, 1, 12), anchor) == utc(2026, 12, 1, 12)


def test_rate_with_start_at_in_future_first_runs_at_start_at() -> None:
    schedule = RateSchedule.model_validate(
        {"type": "rate", "every_seconds": 600, "start_at": "2026-12-01T09:00:00+01:00"}
    )
    anchor = rate_anchor(schedule, utc(2026, 11, 30))
    assert next_run(schedule, utc(2026, 11, 30), anchor) == utc(2026, 12, 1, 8)


def test_rate_stops_after_end_at() -> None:
    schedule = RateSchedule.model_validate(
        {
            "type": "rate",
            "every_seconds": 3600,
            "start_at": "2026-12-01T09:00:00Z",
            "end_at": "2026-12-01T11:30:00Z",
        }
    )
    anchor = rate_anchor(schedule, utc(2026, 11, 1))
    assert list(occurrences(schedule, utc(2026, 12, 1), anchor)) == [utc(2026, 12, 1, h) for h in (9, 10, 11)]
    assert next_run(schedule, utc(2026, 12, 1, 11) + timedelta(milliseconds=1), anchor) is None


@settings(max_examples=200, deadline=None)
@given(
    every=st.integers(60, 366 * 86_400),
    anchor=instants_2026_2027,
    lag_ms=st.integers(-10 * 86_400_000, 400 * 86_400_000),
)
def test_rate_runs_are_the_anchor_grid_points_from_after(every: int, anchor: datetime, lag_ms: int) -> None:
    # Given a rate anchored somewhere, asked from any instant before or after the anchor
    schedule = RateSchedule(type="rate", every_seconds=every)
    period = timedelta(seconds=every)
    after = anchor + timedelta(milliseconds=lag_ms)

    # When its next runs are listed
    runs = first(schedule, after, 3, anchor)

    # Then they are consecutive anchor + k * period, k >= 0, the first one the earliest at or after `after`
    assert runs[0] >= after and runs[0] >= anchor
    assert runs[0] == anchor or runs[0] - period < after
    assert (runs[0] - anchor) % period == timedelta(0)
    assert runs[1:] == [runs[0] + period, runs[0] + 2 * period]


# --- preview ------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 7, 50])
def test_preview_lists_count_runs(count: int) -> None:
    runs = preview(cron("*/5 * * * *"), utc(2026, 12, 1, 9, 1), count)
    assert runs == [utc(2026, 12, 1, 9, 5) + timedelta(minutes=5 * k) for k in range(count)]


def test_preview_stops_early_when_the_schedule_ends() -> None:
    schedule = cron("0 * * * *", end_at="2026-12-01T12:30:00Z")
    assert preview(schedule, utc(2026, 12, 1, 9, 30), 50) == [utc(2026, 12, 1, h) for h in (10, 11, 12)]


def test_preview_of_a_one_time_schedule_is_its_single_instant() -> None:
    schedule = AtSchedule.model_validate({"type": "at", "at": "2026-12-01T10:00:00Z"})
    assert preview(schedule, utc(2026, 11, 1), 5) == [utc(2026, 12, 1, 10)]
