"""Schedules: when a job's executions are due.

Cron follows Debian cron's rules through `cronsim`: a wall-clock time inside a spring-forward gap
runs at the first instant after the gap; on a fall-back day an expression with `*` in its minute or
hour field runs in both passes of the repeated hour, any other runs each wall-clock time once.
Everything returned is UTC.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from punctual.timefmt import parse_rfc3339, to_rfc3339
from punctual.validation import NOT_BOOLEAN

# An `at` this far in the past is a mistake, not clock skew: it is refused rather than run at once.
PAST_TOLERANCE = timedelta(minutes=5)
MIN_RATE_SECONDS = 60
MAX_RATE_SECONDS = 366 * 24 * 3600


def _parse_instant(value: object) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("timestamp needs an offset (Z or +hh:mm)")
        return parse_rfc3339(value.isoformat())
    if not isinstance(value, str):
        raise ValueError("timestamp must be an RFC 3339 string with an offset")
    return parse_rfc3339(value)


Instant = Annotated[
    datetime,
    BeforeValidator(_parse_instant),
    PlainSerializer(to_rfc3339, return_type=str, when_used="json"),
]


class _Schedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NowSchedule(_Schedule):
    """Run as soon as possible."""

    type: Literal["now"]


class AtSchedule(_Schedule):
    """Run once, at an instant."""

    type: Literal["at"]
    at: Instant


class _Windowed(_Schedule):
    start_at: Instant | None = None
    end_at: Instant | None = None

    @model_validator(mode="after")
    def _window_is_ordered(self) -> _Windowed:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


class CronSchedule(_Windowed):
    """Five-field cron in an IANA time zone (default UTC)."""

    type: Literal["cron"]
    expression: str = Field(min_length=9, max_length=200)
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        if value != "UTC" and value not in _zone_names():
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Europe/Paris")
        return value

    @field_validator("expression")
    @classmethod
    def _expression_parses(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError("expression must have 5 fields: minute hour day-of-month month day-of-week")
        try:
            it = CronSim(value, datetime(2000, 1, 1, tzinfo=UTC))
            next(it)
        except StopIteration:
            raise ValueError(f"cron expression {value!r} never matches") from None
        except (CronSimError, ValueError, KeyError, IndexError) as exc:
            raise ValueError(f"invalid cron expression {value!r}: {exc}") from exc
        return value


class RateSchedule(_Windowed):
    """Every N seconds (N >= 60), from start_at or, without it, from one period after creation."""

    type: Literal["rate"]
    every_seconds: Annotated[int, NOT_BOOLEAN] = Field(ge=MIN_RATE_SECONDS, le=MAX_RATE_SECONDS)


Schedule = Annotated[
    NowSchedule | AtSchedule | CronSchedule | RateSchedule,
    Field(discriminator="type"),
]


def _zone_names() -> set[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = available_timezones()
    return _ZONES


_ZONES: set[str] | None = None


def is_recurring(schedule: _Schedule) -> bool:
    return isinstance(schedule, CronSchedule | RateSchedule)


def rate_anchor(schedule: RateSchedule, created_at: datetime) -> datetime:
    """The instant a rate schedule counts its periods from."""
    return schedule.start_at or created_at + timedelta(seconds=schedule.every_seconds)


def occurrences(schedule: _Schedule, after: datetime, anchor: datetime | None = None) -> Iterator[datetime]:
    """Run times at or after `after`, in order, in UTC (millisecond precision).

    `anchor` is the rate schedule's first run (see `rate_anchor`); other schedules ignore it.
    A one-time schedule yields its instant whatever `after` is: whether a past instant still runs is
    the caller's decision.
    """
    if isinstance(schedule, NowSchedule):
        yield after
        return
    if isinstance(schedule, AtSchedule):
        yield schedule.at
        return
    if isinstance(schedule, CronSchedule):
        runs = _cron_runs(schedule, after)
    elif isinstance(schedule, RateSchedule):
        runs = _rate_runs(schedule, after, anchor or after)
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"unknown schedule {schedule!r}")
    try:
        for run in runs:
            if schedule.end_at is not None and run > schedule.end_at:
                return
            yield run
    except OverflowError:
        return  # past the last representable instant: the schedule has no more runs


def next_run(schedule: _Schedule, after: datetime, anchor: datetime | None = None) -> datetime | None:
    """The first run time at or after `after`, or None when the schedule has ended."""
    return next(occurrences(schedule, after, anchor), None)


def preview(schedule: _Schedule, now: datetime, count: int, anchor: datetime | None = None) -> list[datetime]:
    return list(itertools.islice(occurrences(schedule, now, anchor), count))


def _cron_runs(schedule: CronSchedule, after: datetime) -> Iterator[datetime]:
    start = after if schedule.start_at is None else max(after, schedule.start_at)
    zone = ZoneInfo(schedule.timezone)
    # cronsim yields times strictly after its start, at whole seconds: start a second early so that a
    # run exactly at `start` is included. Round in UTC: local wall-clock arithmetic across a fall-back
    # hour would jump an hour.
    begin_utc = start - timedelta(seconds=1)
    if begin_utc.microsecond:
        begin_utc = begin_utc.replace(microsecond=0) + timedelta(seconds=1)
    begin = begin_utc.astimezone(zone)
    tz_for_cronsim = UTC if schedule.timezone == "UTC" else zone
    seen_last: datetime | None = None
    for local in CronSim(schedule.expression, begin.replace(tzinfo=tz_for_cronsim)):
        run = local.astimezone(UTC)
        if run < start:
            continue
        # Belt and braces: never yield the same or an earlier instant twice.
        if seen_last is not None and run <= seen_last:
            continue
        seen_last = run
        yield run


def _rate_runs(schedule: RateSchedule, after: datetime, anchor: datetime) -> Iterator[datetime]:
    period = timedelta(seconds=schedule.every_seconds)
    start = after if schedule.start_at is None else max(after, schedule.start_at)
    if start <= anchor:
        run = anchor
    else:
        periods = -((anchor - start) // period)  # ceil((start - anchor) / period)
        run = anchor + periods * period
    while True:
        yield run
        run += period
