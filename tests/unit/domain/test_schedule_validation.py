"""Schedules refused or accepted as the contract says, each refusal naming its field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from punctual.domain.models import SCHEDULE_ADAPTER
from punctual.domain.schedules import AtSchedule
from punctual.platform.timefmt import to_rfc3339
from tests.unit.domain.schedule_helpers import cron, utc


def validation_error(payload: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ValidationError) as caught:
        SCHEDULE_ADAPTER.validate_python(payload)
    errors = caught.value.errors()
    assert len(errors) == 1, errors
    return dict(errors[0])


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


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("2027-01-01T10:00:18.999999Z", "2027-01-01T10:00:19.000Z"),
        ("2027-01-01T10:00:18.000001+05:30", "2027-01-01T04:30:18.001Z"),
        ("2027-01-01T10:00:18.5Z", "2027-01-01T10:00:18.500Z"),
    ],
)
def test_an_instant_finer_than_a_millisecond_is_kept_at_the_next_one_never_before(
    given: str, kept: str
) -> None:
    # (a run must never start before the instant asked; Punctual keeps milliseconds)
    schedule = SCHEDULE_ADAPTER.validate_python({"type": "at", "at": given})
    assert isinstance(schedule, AtSchedule)
    assert to_rfc3339(schedule.at) == kept


def test_a_leap_second_is_refused_as_such() -> None:
    with pytest.raises(ValidationError, match="leap second"):
        SCHEDULE_ADAPTER.validate_python({"type": "at", "at": "2027-12-31T23:59:60Z"})


def test_an_instant_taken_up_to_2200_is_refused_as_2200_is_saying_it_was_rounded() -> None:
    # (an instant before 2200 told only "must be before 2200" reads as a false refusal)
    with pytest.raises(ValidationError, match=r"before 2200-01-01.*once rounded up to the millisecond kept"):
        SCHEDULE_ADAPTER.validate_python({"type": "at", "at": "2199-12-31T23:59:59.9995Z"})
    with pytest.raises(ValidationError, match=r"before 2200-01-01T00:00:00Z \[") as exactly:
        SCHEDULE_ADAPTER.validate_python({"type": "at", "at": "2200-01-01T00:00:00Z"})
    assert "rounded" not in str(exactly.value)
