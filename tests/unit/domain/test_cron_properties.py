"""Cron schedules against references on drawn expressions and instants: croniter in UTC, and
Debian cron's rules across daylight saving time transitions (docs/api.md).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from punctual.domain.schedules import CronSchedule
from tests.unit.domain.schedule_helpers import FALL_BACK_SECOND_PASS, cron, first, instants_2026_2027, utc


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
        assume(False)  # e.g. "0 0 31 2 *": refused (test_schedule_validation.py)
        raise


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
