"""Schedules: validation, cron (UTC, time zones, daylight saving time), rate, at, preview.

DST rules are the contract's (docs/api.md): Debian cron's (tests/unit/domain/test_cron.py holds the exact model).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from punctual.domain.models import SCHEDULE_ADAPTER
from punctual.domain.schedules import (
    AtSchedule,
    CronSchedule,
    NowSchedule,
    RateSchedule,
    next_run,
    occurrences,
    preview,
    rate_anchor,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def cron(expression: str, timezone: str = "UTC", **window: Any) -> CronSchedule:
    return CronSchedule(type="cron", expression=expression, timezone=timezone, **window)


def first(schedule: Any, after: datetime, count: int, anchor: datetime | None = None) -> list[datetime]:
    return list(itertools.islice(occurrences(schedule, after, anchor), count))


def validation_error(payload: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ValidationError) as caught:
        SCHEDULE_ADAPTER.validate_python(payload)
    errors = caught.value.errors()
    assert len(errors) == 1, errors
    return dict(errors[0])


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "field", "message_part"),
    [
        pytest.param(
            {"type": "cron", "expression": "0 9 * * *", "timezone": "Mars/Olympus_Mons"},
            "timezone",
            "unknown time zone",
            id="unknown-zone",
        ),
        pytest.param(
            {"type": "cron", "expression": "0 9 * * *", "timezone": "../../etc/passwd"},
            "timezone",
            "unknown time zone",
            id="path-as-zone",
        ),
        pytest.param(
            {"type": "cron", "expression": "0 0 9 * * *"}, "expression", "5 fields", id="six-fields"
        ),
        pytest.param({"type": "cron", "expression": "0 9 * *"}, "expression", "", id="four-fields"),
        pytest.param({"type": "cron", "expression": "61 9 * * *"}, "expression", "minute", id="minute-61"),
        pytest.param({"type": "cron", "expression": "0 24 * * *"}, "expression", "hour", id="hour-24"),
        pytest.param({"type": "cron", "expression": "0 0 0 * *"}, "expression", "day", id="day-0"),
        pytest.param({"type": "cron", "expression": "0 0 1 13 *"}, "expression", "month", id="month-13"),
        pytest.param({"type": "cron", "expression": "0 0 * * 8"}, "expression", "day", id="weekday-8"),
        pytest.param({"type": "cron", "expression": "a b c d e"}, "expression", "", id="words"),
        pytest.param({"type": "cron", "expression": "0 0 30 2 *"}, "expression", "", id="feb-30"),
        pytest.param(
            {"type": "cron", "expression": "0 0 31 4,6,9 *"}, "expression", "", id="short-months-31"
        ),
        pytest.param({"type": "at", "at": "2026-12-01T10:00:00"}, "at", "offset", id="at-without-offset"),
        pytest.param({"type": "at", "at": "2026-12-01"}, "at", "", id="at-date-only"),
        pytest.param({"type": "at", "at": 1764579600}, "at", "", id="at-number"),
        pytest.param({"type": "rate", "every_seconds": 59}, "every_seconds", "60", id="rate-59"),
        pytest.param({"type": "rate", "every_seconds": 0}, "every_seconds", "60", id="rate-0"),
        pytest.param(
            {"type": "cron", "expression": "0 9 * * *", "start_at": "2026-12-01T10:00:00"},
            "start_at",
            "offset",
            id="start-without-offset",
        ),
        pytest.param(
            {"type": "cron", "expression": "0 9 * * *", "seconds": "0"}, "seconds", "extra", id="extra-cron"
        ),
        pytest.param({"type": "now", "at": "2026-12-01T10:00:00Z"}, "at", "extra", id="extra-now"),
    ],
)
def test_invalid_schedule_is_refused_naming_its_field(
    payload: dict[str, Any], field: str, message_part: str
) -> None:
    # Given a schedule with one bad field / When it is validated
    error = validation_error(payload)

    # Then the error points at that field, and says why when the reason is fixed
    assert error["loc"][-1] == field
    assert message_part.lower() in error["msg"].lower()


@pytest.mark.parametrize("kind", ["cron", "rate"])
@pytest.mark.parametrize("end_offset", [timedelta(0), -timedelta(hours=1)])
def test_window_ending_at_or_before_its_start_is_refused(kind: str, end_offset: timedelta) -> None:
    # Given a window whose end is not after its start
    start = utc(2026, 12, 1, 9)
    payload: dict[str, Any] = {
        "type": kind,
        "start_at": start.isoformat(),
        "end_at": (start + end_offset).isoformat(),
    }
    payload |= {"expression": "0 9 * * *"} if kind == "cron" else {"every_seconds": 3600}

    # When it is validated / Then the message names end_at
    error = validation_error(payload)
    assert "end_at" in error["msg"]


def test_unknown_schedule_type_is_refused_naming_type() -> None:
    error = validation_error({"type": "weekly", "day": "monday"})
    assert "type" in error["msg"] and "weekly" in error["msg"]


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "now"},
        {"type": "at", "at": "2026-12-01T10:00:00+01:00"},
        {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"},
        {"type": "cron", "expression": "0 0 29 2 *"},
        {"type": "rate", "every_seconds": 60},
    ],
)
def test_valid_schedules_are_accepted(payload: dict[str, Any]) -> None:
    schedule = SCHEDULE_ADAPTER.validate_python(payload)
    assert schedule.type == payload["type"]


def test_cron_timezone_defaults_to_utc() -> None:
    assert cron("0 10 * * *").timezone == "UTC"


def test_at_with_offset_is_stored_as_the_same_instant_in_utc() -> None:
    # Given an `at` written with a +01:00 offset / When validated
    schedule = SCHEDULE_ADAPTER.validate_python({"type": "at", "at": "2026-12-01T10:00:00+01:00"})

    # Then it is the UTC instant one hour earlier
    assert isinstance(schedule, AtSchedule)
    assert schedule.at == utc(2026, 12, 1, 9)
    assert schedule.at.utcoffset() == timedelta(0)


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


# The day `after` falls on a fall-back day just after 06:00:00Z (01:00 EST, the second pass), the local
# wall-clock rounding of the start must not jump to 02:00 EST (07:00Z) and skip the runs in between.
FALL_BACK_SECOND_PASS = utc(2026, 11, 1, 6)


def test_wildcard_cron_resumed_just_after_a_second_pass_run_keeps_the_following_runs() -> None:
    # Given "*/30 * * * *" in New York, and the 06:00Z run (01:00 EST, second pass) just done
    schedule = cron("*/30 * * * *", "America/New_York")

    # When the next run is asked from a millisecond after it (what models.next_after does)
    runs = first(schedule, FALL_BACK_SECOND_PASS + timedelta(milliseconds=1), 2)

    # Then 06:30Z and 07:00Z are next, not 07:30Z
    assert runs == [utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7)]


# --- cron: property tests ------------------------------------------------------------------------


@dataclass(frozen=True)
class CronField:
    text: str
    values: frozenset[int]

    @property
    def starred(self) -> bool:
        return self.text.startswith("*")


@st.composite
def cron_fields(draw: st.DrawFn, low: int, high: int) -> CronField:
    """One cron field and the values it matches (cron's 0-7 weekday is kept to 0-6 here)."""
    span = high - low + 1

    def term() -> tuple[str, set[int]]:
        kind = draw(st.sampled_from(["value", "range", "range-step"]))
        if kind == "value":
            a = draw(st.integers(low, high))
            return str(a), {a}
        # Ranges of one value ("5-5", "5-5/2") are left out: croniter reads "5-5" as "*" (test_cron.py
        # pins what they mean).
        a = draw(st.integers(low, high - 1))
        b = draw(st.integers(a + 1, high))
        if kind == "range":
            return f"{a}-{b}", set(range(a, b + 1))
        step = draw(st.integers(1, span))
        return f"{a}-{b}/{step}", set(range(a, b + 1, step))

    kind = draw(st.sampled_from(["star", "star-step", "terms"]))
    if kind == "star":
        return CronField("*", frozenset(range(low, high + 1)))
    if kind == "star-step":
        step = draw(st.integers(1, span - 1))
        return CronField(f"*/{step}", frozenset(range(low, high + 1, step)))
    terms = [term() for _ in range(draw(st.integers(1, 3)))]
    return CronField(",".join(t for t, _ in terms), frozenset().union(*(v for _, v in terms)))


@dataclass(frozen=True)
class CronExpr:
    minute: CronField
    hour: CronField
    dom: CronField
    month: CronField
    dow: CronField

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    @property
    def fixed_time(self) -> bool:
        """Neither minute nor hour starts with `*`: the DST fix-ups apply (Debian's rule)."""
        return not (self.minute.starred or self.hour.starred)

    def date_matches(self, local: datetime) -> bool:
        if local.month not in self.month.values:
            return False
        day = local.day in self.dom.values
        weekday = local.isoweekday() % 7 in self.dow.values
        if self.dom.starred or self.dow.starred:
            return day and weekday
        return day or weekday

    def matches(self, local: datetime) -> bool:
        return (
            local.minute in self.minute.values and local.hour in self.hour.values and self.date_matches(local)
        )


# The local hours that DST_ZONES skip or repeat (02:00 in Europe, North America and Sydney; 23:00 and
# 00:00 in Santiago), and "*" date fields: drawn often, or a property about gaps and repeated hours
# would rarely see one.
DST_HOURS = st.lists(st.sampled_from([0, 1, 2, 3, 23]), min_size=1, max_size=3, unique=True).map(
    lambda hours: CronField(",".join(map(str, sorted(hours))), frozenset(hours))
)

FIXED_MINUTES = st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True).map(
    lambda minutes: CronField(",".join(map(str, sorted(minutes))), frozenset(minutes))
)


@st.composite
def cron_exprs(draw: st.DrawFn, dst_biased: bool = False) -> CronExpr:
    def field(low: int, high: int) -> CronField:
        if dst_biased and draw(st.booleans()):
            return CronField("*", frozenset(range(low, high + 1)))
        return draw(cron_fields(low, high))

    return CronExpr(
        minute=draw(st.one_of(cron_fields(0, 59), FIXED_MINUTES) if dst_biased else cron_fields(0, 59)),
        hour=draw(st.one_of(cron_fields(0, 23), DST_HOURS) if dst_biased else cron_fields(0, 23)),
        dom=field(1, 31),
        month=field(1, 12),
        dow=field(0, 6),
    )


def valid_schedule(expr: CronExpr, zone: str = "UTC") -> CronSchedule:
    try:
        return cron(expr.text, zone)
    except ValidationError:
        assume(False)  # e.g. "0 0 31 2 *": refused, tested above
        raise


instants_2026_2027 = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31, 23, 59), timezones=st.just(UTC)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expr=cron_exprs(), after=instants_2026_2027)
def test_utc_cron_agrees_with_croniter(expr: CronExpr, after: datetime) -> None:
    # croniter treats "*/n" in day-of-month or day-of-week as a restriction (OR); Debian cron, and so
    # the contract, AND them: compare only where the two readings coincide.
    assume(not (expr.dom.text.startswith("*/") and expr.dow.text != "*"))
    assume(not (expr.dow.text.startswith("*/") and expr.dom.text != "*"))
    # Given a valid expression in UTC and a whole-second instant
    schedule = valid_schedule(expr)
    after = after.replace(microsecond=0)

    # When the next runs are listed
    runs = first(schedule, after, 8)

    # Then they are croniter's (which starts strictly after its start time)
    reference = croniter(expr.text, after - timedelta(seconds=1))
    assert runs == [reference.get_next(datetime) for _ in runs]
    assert len(runs) == 8


DST_ZONES = ["Europe/Paris", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "America/Santiago"]


def _offset_changes_between(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The UTC instant, to the second, in (low, high] at which the zone's offset changes."""
    before = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        mid = (low + (high - low) / 2).replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    return high


def _transitions(zone_name: str) -> list[datetime]:
    """UTC instants in 2026-2027 at which the zone's offset changes."""
    zone = ZoneInfo(zone_name)
    days = [utc(2026, 1, 1) + timedelta(days=n) for n in range(731)]
    return [
        _offset_changes_between(zone, a, b)
        for a, b in itertools.pairwise(days)
        if a.astimezone(zone).utcoffset() != b.astimezone(zone).utcoffset()
    ]


TRANSITIONS = {name: _transitions(name) for name in DST_ZONES}


def test_dst_zone_list_really_has_transitions() -> None:
    # The property below is only worth something if these zones change offset in 2026-2027.
    assert all(len(TRANSITIONS[name]) == 4 for name in DST_ZONES if name != "Asia/Kolkata")
    assert TRANSITIONS["Asia/Kolkata"] == []
    assert utc(2026, 3, 29, 1) in TRANSITIONS["Europe/Paris"]


@st.composite
def zone_and_instant(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone and an instant (ms precision), half the time within two days of one of its DST transitions."""
    zone = draw(st.sampled_from(DST_ZONES))
    near = TRANSITIONS[zone]
    if near and draw(st.booleans()):
        base = draw(st.sampled_from(near))
        offset = draw(st.integers(-2 * 86_400_000, 2 * 86_400_000))
        instant = base + timedelta(milliseconds=offset)
    else:
        instant = draw(instants_2026_2027)
    return zone, instant.replace(microsecond=instant.microsecond // 1000 * 1000)


def _instants_of(expr: CronExpr, zone: ZoneInfo, wall: datetime) -> tuple[list[datetime], list[datetime]]:
    """When a matching wall-clock time runs: (must run, may run), by Debian cron's rules."""
    first_pass = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second_pass = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first_pass.astimezone(zone).replace(tzinfo=None) != wall:
        # Skipped by a spring forward: a fixed-time schedule runs at the first instant after the gap.
        after_gap = [_offset_changes_between(zone, second_pass, first_pass)]
        if expr.fixed_time:
            return after_gap, []
        # Debian runs a `*` schedule's skipped time only if the first minute after the gap matches.
        return [], after_gap
    if first_pass != second_pass and not expr.fixed_time:
        return [first_pass, second_pass], []  # repeated by a fall back, and `*` in minute or hour
    return [first_pass], []


def _expected_runs(
    expr: CronExpr, zone: ZoneInfo, start: datetime, stop: datetime
) -> tuple[set[datetime], set[datetime]]:
    """The runs in [start, stop] that must and that may happen, by walking the local calendar."""
    required: set[datetime] = set()
    allowed: set[datetime] = set()
    day = start.astimezone(zone).date() - timedelta(days=1)
    while day <= stop.astimezone(zone).date() + timedelta(days=1):
        if expr.date_matches(datetime(day.year, day.month, day.day)):
            for hour, minute in itertools.product(sorted(expr.hour.values), sorted(expr.minute.values)):
                must, may = _instants_of(expr, zone, datetime(day.year, day.month, day.day, hour, minute))
                required.update(t for t in must if start <= t <= stop)
                allowed.update(t for t in may if start <= t <= stop)
        day += timedelta(days=1)
    return required, required | allowed


def assert_runs_follow_the_dst_rules(
    expr: CronExpr, zone_name: str, after: datetime, count: int
) -> list[datetime]:
    zone = ZoneInfo(zone_name)
    schedule = valid_schedule(expr, zone_name)

    # When its next runs are listed
    runs = first(schedule, after, count)

    # Then they are in UTC, at or after the start, strictly increasing (so never duplicated)
    assert len(runs) == count, "a valid expression runs forever"
    assert all(run.utcoffset() == timedelta(0) for run in runs)
    assert runs[0] >= after
    assert all(a < b for a, b in itertools.pairwise(runs))
    for run in runs:
        local = run.astimezone(zone)
        if expr.matches(local):
            continue
        # ... and a run whose local time does not match is the first instant after a spring-forward gap
        # that swallowed a matching wall time of that day
        event("run after a gap")
        before = (run - timedelta(seconds=1)).astimezone(zone)
        assert before.utcoffset() < local.utcoffset(), f"{run} ({local}) matches nothing"  # type: ignore[operator]
        gap_start, gap_end = before.replace(tzinfo=None) + timedelta(seconds=1), local.replace(tzinfo=None)
        swallowed = [gap_start + timedelta(minutes=m) for m in range((gap_end - gap_start).seconds // 60)]
        assert any(expr.matches(wall) for wall in swallowed)
    if expr.fixed_time:
        # A fixed-time schedule runs each wall-clock time at most once, even when the hour repeats.
        walls = [run.astimezone(zone).replace(tzinfo=None) for run in runs]
        assert len(set(walls)) == len(walls)
    elif any(run.astimezone(zone).fold for run in runs):
        event("wildcard run in the second pass of a repeated hour")
    # And none is missing or extra: walking the local calendar finds the same runs.
    required, allowed = _expected_runs(expr, zone, after, runs[-1])
    assert required <= set(runs) <= allowed
    return runs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expr=cron_exprs(dst_biased=True), where=zone_and_instant())
def test_cron_in_dst_zones_yields_ordered_utc_runs_that_match_or_follow_a_gap(
    expr: CronExpr, where: tuple[str, datetime]
) -> None:
    # Given a valid expression in a DST zone and a start instant in 2026-2027
    zone_name, after = where
    assert_runs_follow_the_dst_rules(expr, zone_name, after, count=8)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    minute=st.one_of(FIXED_MINUTES, cron_fields(0, 59)),
    hour=st.one_of(DST_HOURS, cron_fields(0, 23)),
    zone_name=st.sampled_from([name for name in DST_ZONES if TRANSITIONS[name]]),
    data=st.data(),
)
def test_cron_across_a_dst_transition_runs_by_debian_rules(
    minute: CronField, hour: CronField, zone_name: str, data: st.DataObject
) -> None:
    # Given a daily-or-denser expression and a start up to two days before one of the zone's transitions
    expr = CronExpr(
        minute=minute,
        hour=hour,
        dom=CronField("*", frozenset(range(1, 32))),
        month=CronField("*", frozenset(range(1, 13))),
        dow=CronField("*", frozenset(range(7))),
    )
    transition = data.draw(st.sampled_from(TRANSITIONS[zone_name]))
    after = transition - timedelta(seconds=data.draw(st.integers(0, 2 * 86_400)))
    # When enough runs are listed to pass the transition (at most 1440 a day, so 4 days' worth)
    count = min(4 * len(minute.values) * len(hour.values), 4000)
    runs = assert_runs_follow_the_dst_rules(expr, zone_name, after, count)

    # (and they do reach past it, or this would say nothing about it)
    assert runs[-1] > transition
    event("spring forward" if transition.astimezone(ZoneInfo(zone_name)).dst() else "fall back")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@example(
    expr_text="*/30 * * * *", where=("America/New_York", FALL_BACK_SECOND_PASS + timedelta(milliseconds=1))
)
@given(
    expr_text=st.sampled_from(["*/30 * * * *", "0 * * * *", "*/15 1,2 * * *", "30 1 * * *", "0 23 * * *"]),
    where=zone_and_instant(),
)
def test_cron_resumed_from_any_instant_continues_the_same_sequence(
    expr_text: str, where: tuple[str, datetime]
) -> None:
    # Given the runs listed from a day before an instant
    zone_name, resume_at = where
    schedule = cron(expr_text, zone_name)
    earlier = first(schedule, resume_at - timedelta(days=1), 60)

    # When the listing restarts at that instant (the scheduler does this after every run)
    resumed = first(schedule, resume_at, 3)

    # Then it continues the same sequence: nothing skipped, nothing repeated
    assert resumed == [run for run in earlier if run >= resume_at][:3]


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
