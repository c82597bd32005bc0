"""Timestamps: RFC 3339 with milliseconds and Z at the edges, epoch milliseconds in storage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from punctual.platform.timefmt import from_epoch_ms, parse_rfc3339, to_epoch_ms, to_rfc3339


@pytest.mark.parametrize(
    ("instant", "text"),
    [
        (datetime(2026, 12, 1, 9, 0, tzinfo=UTC), "2026-12-01T09:00:00.000Z"),
        (
            datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1))),
            "2026-12-01T09:00:00.123Z",
        ),
        (
            datetime(2026, 7, 1, 2, 30, 5, 999999, tzinfo=ZoneInfo("America/New_York")),
            "2026-07-01T06:30:05.999Z",
        ),
        (datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01T00:00:00.000Z"),
    ],
)
def test_to_rfc3339_is_utc_with_milliseconds_and_z(instant: datetime, text: str) -> None:
    assert to_rfc3339(instant) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T10:00:00+01:00", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("2026-12-01T09:00:00Z", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("2026-12-01T09:00:00z", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("2026-12-01t09:00:00.250Z", datetime(2026, 12, 1, 9, 0, 0, 250000, tzinfo=UTC)),
        ("2026-12-01T04:00:00-05:00", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        (" 2026-12-01T09:00:00.000Z ", datetime(2026, 12, 1, 9, tzinfo=UTC)),
    ],
)
def test_parse_rfc3339_reads_the_instant_into_utc(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T09:00:00",  # no offset: which zone?
        "2026-12-01T09:00:00.000",
        "2026-12-01",  # date only
        "2026-12-01Z",
        "09:00:00Z",
        "",
        "tomorrow",
        "2026-13-01T09:00:00Z",
        "2026-12-01T25:00:00Z",
        "2026-12-01T09:00:00+00:99",  # an offset's minutes are 00-59 (Python reads this as +01:39)
        "2026-12-01T09:00:00+05:60",
        "2026-12-01T09:00:00+24:00",
        "2026-12-01T09:00:00+0100",
    ],
)
def test_parse_rfc3339_rejects_timestamps_without_date_time_and_offset(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)


instants = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(ms=st.integers(0, 7_258_118_400_000))  # 1970 .. 2200
def test_epoch_ms_round_trip_is_exact(ms: int) -> None:
    # Integers all the way: no float rounding, even far from the epoch.
    instant = from_epoch_ms(ms)
    assert to_epoch_ms(instant) == ms
    assert instant.utcoffset() == timedelta(0)


@given(instant=instants)
def test_epoch_ms_keeps_exactly_the_milliseconds(instant: datetime) -> None:
    # Given any instant / When stored as epoch ms and read back / Then it loses only sub-millisecond parts
    assert from_epoch_ms(to_epoch_ms(instant)) == instant.replace(
        microsecond=instant.microsecond // 1000 * 1000
    )


@given(instant=instants, zone=st.sampled_from(["UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns"]))
def test_rfc3339_round_trip_keeps_the_millisecond_instant(instant: datetime, zone: str) -> None:
    # Given any instant, written in any zone / When formatted then parsed back
    text = to_rfc3339(instant.astimezone(ZoneInfo(zone)))

    # Then it is the same instant to the millisecond, and formatting it again gives the same text
    parsed = parse_rfc3339(text)
    assert to_epoch_ms(parsed) == to_epoch_ms(instant)
    assert to_rfc3339(parsed) == text
