"""punctual.domain.cron: Debian cron's semantics in every zone, bounded.

The engine is judged against `tests/cron_reference.py`, an independent minute-by-minute model of
cron.c's main loop, at the zones' real changes of offset (read from the time-zone database's own
transition lists, not probed as the engine does), and by hand-computed cases.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones
from zoneinfo._zoneinfo import ZoneInfo as PyZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from punctual.domain import cron
from punctual.domain.cron import zones
from tests.cron_reference import simulate

FIRST = int(datetime(1970, 1, 2, tzinfo=UTC).timestamp())
LAST = int(datetime(2037, 12, 1, tzinfo=UTC).timestamp())


# (A second to read: the strategies below read them when they first draw, not as the module loads,
# so that the test processes that collect this file without running it do not pay for them.)
@lru_cache(maxsize=1)
def _transitions() -> list[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    for key in sorted(available_timezones()):
        for ts in PyZoneInfo.no_cache(key)._trans_utc:
            if FIRST <= ts <= LAST and _offset(key, ts - 1) != _offset(key, ts):
                found.add((key, ts))
    return sorted(found)


@lru_cache(maxsize=1)
def _unusual_transitions() -> list[tuple[str, int]]:
    """Changes that are not a whole hour, or not at a whole hour of local time."""
    out = []
    for key, ts in _transitions():
        delta = _offset(key, ts) - _offset(key, ts - 1)
        local = datetime.fromtimestamp(ts - 1, ZoneInfo(key))
        if abs(delta) != 3600 or (local.minute + 1) % 60 != 0:
            out.append((key, ts))
    return out


def _offset(key: str, ts: int) -> int:
    off = datetime.fromtimestamp(ts, ZoneInfo(key)).utcoffset()
    assert off is not None
    return int(off.total_seconds())


def engine_runs(expression: str, zone: str, start: int, end: int) -> list[int]:
    out = []
    for run in cron.runs(cron.parse(expression), zone, datetime.fromtimestamp(start, UTC)):
        ts = int(run.timestamp())
        if ts > end:
            break
        out.append(ts)
    return out


def reference_runs(expression: str, zone: str, start: int, end: int) -> list[int]:
    return [t for t in simulate(expression, zone, start - 8 * 3600, end) if t >= start]


def _agree(expression: str, zone: str, around: int) -> None:
    start, end = around - 3 * 3600, around + 5 * 3600
    expected = reference_runs(expression, zone, start, end)
    got = engine_runs(expression, zone, start, end)
    assert got == expected, (expression, zone, datetime.fromtimestamp(around, UTC).isoformat())


def _field(values: st.SearchStrategy[int], low: int, high: int) -> st.SearchStrategy[str]:
    pair = st.tuples(values, values).map(sorted)
    return st.one_of(
        st.just("*"),
        st.integers(1, max(1, (high - low) // 2)).map(lambda k: f"*/{k}"),
        values.map(str),
        pair.map(lambda p: f"{p[0]}-{p[1]}"),
        st.tuples(pair, st.integers(1, 20)).map(lambda x: f"{x[0][0]}-{x[0][1]}/{x[1]}"),
        st.tuples(values, values).map(lambda p: f"{p[0]},{p[1]}"),
    )


@st.composite
def case_at_transition(draw: st.DrawFn, pool: list[tuple[str, int]]) -> tuple[str, str, int]:
    zone, ts = draw(st.sampled_from(pool))
    before = datetime.fromtimestamp(ts - 60, ZoneInfo(zone))
    after = datetime.fromtimestamp(ts, ZoneInfo(zone))
    near_minutes = st.sampled_from(sorted({before.minute, after.minute, 0, 15, 30, 45, 59})) | st.integers(
        0, 59
    )
    near_hours = st.sampled_from(
        sorted({h % 24 for h in range(before.hour - 1, before.hour + 3)} | {after.hour})
    )
    minute = draw(_field(near_minutes, 0, 59))
    hour = draw(_field(near_hours | st.integers(0, 23), 0, 23))
    dom = draw(st.sampled_from(["*", "*", str(after.day), f"{after.day},{(after.day % 28) + 1}", "*/2"]))
    month = draw(st.sampled_from(["*", "*", str(after.month)]))
    dow = draw(st.sampled_from(["*", "*", str(after.isoweekday() % 7), "1-5", "*/3", "0,7"]))
    return f"{minute} {hour} {dom} {month} {dow}", zone, ts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.deferred(lambda: case_at_transition(_transitions())))
def test_every_zone_and_transition_agrees_with_the_cron_c_model(case: tuple[str, str, int]) -> None:
    expression, zone, ts = case
    _agree(expression, zone, ts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.deferred(lambda: case_at_transition(_unusual_transitions())))
def test_sub_hour_and_odd_minute_transitions_agree_with_the_model(case: tuple[str, str, int]) -> None:
    expression, zone, ts = case
    _agree(expression, zone, ts)


@pytest.mark.parametrize("expression", ["*/15 * * * *", "30 1,2,3 * * *", "0 */2 * * *", "45 2 * * *"])
def test_every_sub_hour_shift_since_1970_agrees_with_the_model(expression: str) -> None:
    # Deterministic sweep of the rare shapes (Lord_Howe's 30 minutes, Chatham's 45, odd minutes).
    pool = [(z, ts) for z, ts in _unusual_transitions() if abs(_offset(z, ts) - _offset(z, ts - 1)) < 3600]
    assert pool, "the database has sub-hour shifts"
    for zone, ts in pool[::3]:
        _agree(expression, zone, ts)


def _local(zone: str, runs: list[datetime]) -> list[str]:
    return [r.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M%z") for r in runs]


def _take(expression: str, zone: str, after: str, count: int) -> list[datetime]:
    out = []
    for run in cron.runs(cron.parse(expression), zone, datetime.fromisoformat(after)):
        out.append(run)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize(
    ("expression", "zone", "after", "expected"),
    [
        # The reported loop: Chatham falls back 03:45 -> 02:45; a wildcard runs again in the repeat.
        (
            "*/15 3 * * *",
            "Pacific/Chatham",
            "2027-04-03T13:40:00Z",
            [
                "2027-04-04 03:30+1345",
                "2027-04-04 03:00+1245",
                "2027-04-04 03:15+1245",
                "2027-04-04 03:30+1245",
                "2027-04-04 03:45+1245",
            ],
        ),
        # Chatham springs forward 02:45 -> 03:45: a fixed 03:00 runs at 03:45, a wildcard does not.
        (
            "0 3 * * *",
            "Pacific/Chatham",
            "2026-09-26T00:00:00Z",
            ["2026-09-27 03:45+1345", "2026-09-28 03:00+1345"],
        ),
        (
            "*/15 3 * * *",
            "Pacific/Chatham",
            "2026-09-26T12:00:00Z",
            ["2026-09-27 03:45+1345", "2026-09-28 03:00+1345"],
        ),
        # Lord_Howe springs 02:00 -> 02:30 and falls 02:00 -> 01:30.
        (
            "*/10 3 * * *",
            "Australia/Lord_Howe",
            "2026-10-03T12:00:00Z",
            ["2026-10-04 03:00+1100", "2026-10-04 03:10+1100", "2026-10-04 03:20+1100"],
        ),
        (
            "0 */2 * * *",
            "Australia/Lord_Howe",
            "2027-04-03T14:00:00Z",
            ["2027-04-04 02:00+1030", "2027-04-04 04:00+1030"],
        ),
        (
            "30 * * * *",
            "Australia/Lord_Howe",
            "2027-04-03T14:00:00Z",
            ["2027-04-04 01:30+1100", "2027-04-04 01:30+1030", "2027-04-04 02:30+1030"],
        ),
        ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z", ["2026-10-04 02:30+1100"]),
        (
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2027-04-03T12:00:00Z",
            ["2027-04-04 01:45+1100", "2027-04-05 01:45+1030"],
        ),
        # St John's 2010 changes at 00:01.
        (
            "0 * * * *",
            "America/St_Johns",
            "2010-11-07T01:00:00Z",
            [
                "2010-11-06 23:00-0230",
                "2010-11-07 00:00-0230",
                "2010-11-07 00:00-0330",
                "2010-11-07 01:00-0330",
            ],
        ),
        (
            "0 0 * * *",
            "America/St_Johns",
            "2010-11-06T12:00:00Z",
            ["2010-11-07 00:00-0230", "2010-11-08 00:00-0330"],
        ),
        # Apia skipped 30 December 2011: a change of a day is not caught up.
        (
            "0 12 * * *",
            "Pacific/Apia",
            "2011-12-28T00:00:00Z",
            ["2011-12-28 12:00-1000", "2011-12-29 12:00-1000", "2011-12-31 12:00+1400"],
        ),
        # Paris: spring gap and fall-back repeat.
        (
            "30 2 * * *",
            "Europe/Paris",
            "2027-03-27T12:00:00Z",
            ["2027-03-28 03:00+0200", "2027-03-29 02:30+0200"],
        ),
        ("*/30 2 * * *", "Europe/Paris", "2027-03-27T12:00:00Z", ["2027-03-29 02:00+0200"]),
        (
            "30 2 * * *",
            "Europe/Paris",
            "2027-10-30T12:00:00Z",
            ["2027-10-31 02:30+0200", "2027-11-01 02:30+0100"],
        ),
        ("30 2 * * *", "Europe/Paris", "2027-10-31T00:31:00Z", ["2027-11-01 02:30+0100"]),
        # Ranges of one value, with a step.
        ("5-5/15 * * * *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-01 00:05+0000", "2027-01-01 01:05+0000"]),
        ("0 3-3/6 * * *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-01 03:00+0000", "2027-01-02 03:00+0000"]),
        # Day of month OR day of week unless one is starred; 7 is Sunday.
        ("0 0 1 * 1", "UTC", "2027-02-01T00:00:01Z", ["2027-02-08 00:00+0000", "2027-02-15 00:00+0000"]),
        ("0 0 */2 * 1", "UTC", "2027-02-01T00:00:01Z", ["2027-02-15 00:00+0000", "2027-03-01 00:00+0000"]),
        ("0 0 * * 7", "UTC", "2027-02-01T00:00:00Z", ["2027-02-07 00:00+0000"]),
        ("@yearly", "UTC", "2027-02-01T00:00:00Z", ["2028-01-01 00:00+0000"]),
        ("@hourly", "UTC", "2027-02-01T00:00:01Z", ["2027-02-01 01:00+0000"]),
        # The extensions cronsim read: the last day, the last Friday, the third Friday.
        ("0 0 L * *", "UTC", "2027-01-01T00:00:00Z", ["2027-01-31 00:00+0000", "2027-02-28 00:00+0000"]),
        ("0 0 L 2 *", "UTC", "2027-03-01T00:00:00Z", ["2028-02-29 00:00+0000"]),
        ("0 9 * * 5L", "UTC", "2027-01-01T00:00:00Z", ["2027-01-29 09:00+0000", "2027-02-26 09:00+0000"]),
        ("0 9 * * fri#3", "UTC", "2027-01-01T00:00:00Z", ["2027-01-15 09:00+0000", "2027-02-19 09:00+0000"]),
        ("0 0 1 * 5#5", "UTC", "2027-01-02T00:00:00Z", ["2027-01-29 00:00+0000", "2027-02-01 00:00+0000"]),
        # Feb 29 on a Sunday (both starred fields mean AND): years apart, found quickly.
        (
            "0 0 29 2 */7",
            "Europe/Paris",
            "2027-01-01T00:00:00Z",
            ["2032-02-29 00:00+0100", "2060-02-29 00:00+0100"],
        ),
    ],
)
def test_hand_computed_cases(expression: str, zone: str, after: str, expected: list[str]) -> None:
    assert _local(zone, _take(expression, zone, after, len(expected))) == expected


def test_the_reported_loop_answers_at_once() -> None:
    started = time.perf_counter()
    runs = _take("*/15 3 * * *", "Pacific/Chatham", "2027-04-03T13:40:00Z", 3)
    assert len(runs) == 3
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
        ("* * * * * * * *", "expected 5 fields"),
        ("0 0 30 2 *", "February 30 never occurs"),
        ("0 0 31 4,6 *", "never runs"),
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("* 24 * * *", "hour field: 24 is out of range 0-23"),
        ("*/0 * * * *", "a step must be at least 1"),
        ("5-1 * * * *", "runs backwards"),
        ("0 0 15W * *", "nearest weekday"),
        ("0 0 * * 5#6", "the n of '#n' is 1 to 5"),
        ("0 0 * * mun", "three-letter name"),
        ("@reboot", "@reboot runs when a machine starts"),
        ("@fortnightly", "unknown macro"),
        ("cron(0 10 ? * MON-FRI *)", "'0 10 * * mon-fri'"),
        ("cron(0 10 ? * 2-6 *)", "'0 10 * * 1-5'"),
        ("0 0 10 ? * 2-6", "'0 10 * * 1-5'"),
        ("0 0 10 ? * MON *", "'0 10 * * mon'"),
        ("0 10 ? * *", "'?' is EventBridge and Quartz syntax"),
        ("", "empty"),
        ("* * * * *\x00", "control character"),
        ("1" * 300, "longer than"),
    ],
)
def test_refusals_say_what_is_wrong(expression: str, message: str) -> None:
    with pytest.raises(cron.CronError) as caught:
        cron.parse(expression)
    assert message in str(caught.value)


def test_text_is_normalised() -> None:
    assert cron.normalise("  0\t10 * *  MON-FRI\n") == "0 10 * * mon-fri"
    assert cron.normalise("@Daily") == "@daily"


@pytest.mark.parametrize("macro", sorted(cron.MACROS))
def test_macros_mean_their_five_fields(macro: str) -> None:
    after = "2027-03-27T12:00:00Z"
    expected = _take(cron.MACROS[macro], "Europe/Paris", after, 5)
    assert _take(macro, "Europe/Paris", after, 5) == expected


_SLOW_SHAPES = st.tuples(
    st.sampled_from(["0", "*", "59", "*/7"]),
    st.sampled_from(["0", "*", "23"]),
    st.sampled_from(["*", "29", "31", "30", "*/29", "*/30", "1,31", "29-31"]),
    st.sampled_from(["*", "2", "2,4", "4,6,9,11", "1-2"]),
    st.sampled_from(["*", "0", "*/7", "6", "1-5", "*/6"]),
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(_SLOW_SHAPES, st.sampled_from(sorted(available_timezones())[::7]), st.integers(1971, 2090))
def test_no_schedule_takes_long_to_find_its_next_runs(expression: str, zone: str, year: int) -> None:
    # Rare dates (the 29th of February on a Sunday, the 31st in short months) in any zone.
    try:
        spec = cron.parse(expression)
    except cron.CronError:
        return  # refused at once: fine
    started = time.perf_counter()
    runs = cron.runs(spec, zone, datetime(year, 1, 1, tzinfo=UTC))
    taken = []
    for run in runs:
        taken.append(run)
        if len(taken) == 3:
            break
    assert time.perf_counter() - started < 1.0
    assert taken == sorted(set(taken))


def test_the_work_budget_stops_a_computation() -> None:
    spec = cron.parse("0 0 29 2 */7")
    with pytest.raises(cron.CronBoundExceeded):
        next(cron.runs(spec, "UTC", datetime(2027, 1, 1, tzinfo=UTC), budget=cron.Budget(steps=50)))


def test_the_bound_counts_work_not_time_nor_what_a_cache_holds() -> None:
    # A rare schedule in a zone with daylight saving, 39 years to its next run: the same answer with
    # the zone's offsets cached or not (the trial saw 422s on a busy machine, 200s on an idle one)
    spec = cron.parse("0 0 29 2 */7")
    after = datetime(2089, 1, 1, tzinfo=UTC)
    zones._year_changes.cache_clear()
    cold = next(cron.runs(spec, "America/Edmonton", after))
    warm = next(cron.runs(spec, "America/Edmonton", after))
    assert cold == warm == datetime(2128, 2, 29, 7, 0, tzinfo=UTC)


def test_runs_are_whole_minutes_and_never_before_after() -> None:
    after = datetime(2027, 3, 28, 0, 59, 30, 500000, tzinfo=UTC)
    first = next(cron.runs(cron.parse("* * * * *"), "Europe/Paris", after))
    assert first == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
    assert first - after < timedelta(minutes=1)


def test_a_slow_machine_gets_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a machine so busy that probing a zone's offsets takes half a millisecond a probe (a bound
    # with a deadline refused valid schedules then: 422 under load, 200 alone)
    real_offset = zones._offset

    def slow_offset(zone: object, ts: int) -> int:
        time.sleep(0.0005)
        return real_offset(zone, ts)

    monkeypatch.setattr(zones, "_offset", slow_offset)
    zones._year_changes.cache_clear()
    # When the next Feb 29 that is a Sunday, four years ahead, is found in a zone with daylight saving
    found = next(cron.runs(cron.parse("0 0 29 2 */7"), "Europe/Paris", datetime(2028, 3, 1, tzinfo=UTC)))
    zones._year_changes.cache_clear()
    # Then it is found, as on an idle machine
    assert found == datetime(2032, 2, 28, 23, 0, tzinfo=UTC)


def test_an_error_quotes_the_expression_as_written_not_lower_cased() -> None:
    with pytest.raises(cron.CronError, match="'5L' is not a number"):
        cron.parse("0 0 5L * *")
    with pytest.raises(cron.CronError, match="'JANX' is not a number"):
        cron.parse("0 0 * JANX *")
