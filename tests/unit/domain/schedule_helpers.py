"""Instants and schedules built briefly for the schedule tests."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from punctual.domain.schedules import CronSchedule, occurrences


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def cron(expression: str, timezone: str = "UTC", **window: Any) -> CronSchedule:
    return CronSchedule(type="cron", expression=expression, timezone=timezone, **window)


def first(schedule: Any, after: datetime, count: int, anchor: datetime | None = None) -> list[datetime]:
    return list(itertools.islice(occurrences(schedule, after, anchor), count))


# The day `after` falls on a fall-back day just after 06:00:00Z (01:00 EST, the second pass), the local
# wall-clock rounding of the start must not jump to 02:00 EST (07:00Z) and skip the runs in between.
FALL_BACK_SECOND_PASS = utc(2026, 11, 1, 6)


instants_2026_2027 = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31, 23, 59), timezones=st.just(UTC)
)
