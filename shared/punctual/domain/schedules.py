"""Schedules: when a job's executions are due.

Cron follows Debian cron's rules (`punctual.domain.cron`): a wall-clock time inside a spring-forward gap
runs at the first minute after the gap, unless the expression is starred in its minute or hour
field; on a fall-back day a starred expression runs in both passes of the repeated time, any other
once; jumps of more than three hours are not caught up. Everything returned is UTC. Every
computation is bounded (`punctual.domain.cron.CronBoundExceeded`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, available_timezones

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from punctual.domain import cron
from punctual.domain.validation import JSON_NUMBER
from punctual.platform.timefmt import OutOfRange, parse_rfc3339, to_rfc3339

# An `at` this far in the past is a mistake, not clock skew: it is refused rather than run at once.
PAST_TOLERANCE = timedelta(minutes=5)
MIN_RATE_SECONDS = 60
MAX_RATE_SECONDS = 366 * 24 * 3600
# Instants a schedule may name: later ones are typing mistakes, and far enough that no arithmetic on
# them (time zones, periods, retention) can leave the calendar.
LATEST_INSTANT = datetime(2200, 1, 1, tzinfo=UTC)
BEFORE_LATEST = "timestamp must be before 2200-01-01T00:00:00Z"
# What a request's instant outside the years any instant is kept in is told.
IN_REQUEST_RANGE = "timestamp must be from 1970-01-01T00:00:00Z and before 2200-01-01T00:00:00Z"
# Names in the zone database that are not places: they depend on the host or count leap seconds.
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def _parse_instant(value: object) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("timestamp needs an offset (Z or +hh:mm)")
        return request_instant(value.isoformat())
    if not isinstance(value, str):
        raise ValueError("timestamp must be an RFC 3339 string with an offset")
    return request_instant(value)


def request_instant(text: str) -> datetime:
    """A request's RFC 3339 instant, before LATEST_INSTANT; ValueError otherwise, saying the request's
    range for one far outside it (year 9999 is no instant any request may name, whatever years the
    store could hold)."""
    try:
        instant = parse_rfc3339(text)
    except OutOfRange:
        raise ValueError(IN_REQUEST_RANGE) from None
    if sub := instant.microsecond % 1000:
        # Up to the millisecond Punctual keeps, never down: a run is never before the instant asked.
        instant += timedelta(microseconds=1000 - sub)
    if instant >= LATEST_INSTANT:
        raise ValueError(BEFORE_LATEST + (", once rounded up to the millisecond kept" if sub else ""))
    return instant


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


# The longest `in` a request may ask for (about ten years): any later instant is a typing mistake.
MAX_IN_SECONDS = 10 * 366 * 24 * 3600


class InSchedule(_Schedule):
    """Run once, this many seconds after the request that creates (or reschedules) the job is taken.
    Stored as the `at` schedule of that instant. A retry of the request with the same Idempotency-Key
    and body answers the job the first one created: unlike an `at` computed by the client at each
    attempt, the body does not change between attempts."""

    type: Literal["in"]
    seconds: Annotated[int, JSON_NUMBER] = Field(ge=0, le=MAX_IN_SECONDS)


def absolute(schedule: _Schedule, now: datetime) -> _Schedule:
    """The schedule as stored: an `in` schedule taken at `now` becomes the `at` of its instant."""
    if isinstance(schedule, InSchedule):
        return AtSchedule(type="at", at=now + timedelta(seconds=schedule.seconds))
    return schedule


class _Windowed(_Schedule):
    start_at: Instant | None = None
    end_at: Instant | None = None

    @model_validator(mode="after")
    def _window_is_ordered(self) -> _Windowed:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


class CronSchedule(_Windowed):
    """Five-field cron (or a macro such as @daily) in an IANA time zone (default UTC)."""

    type: Literal["cron"]
    expression: str = Field(max_length=cron.MAX_LENGTH)
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        if value != "UTC" and (value in _NOT_ZONES or value not in zone_names()):
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Europe/Paris")
        return value

    @field_validator("expression")
    @classmethod
    def _expression_parses(cls, value: str) -> str:
        try:
            return cron.normalise(value)
        except cron.CronError as exc:
            raise ValueError(str(exc)) from None


class RateSchedule(_Windowed):
    """Every N seconds (N >= 60), from start_at or, without it, from one period after creation."""

    type: Literal["rate"]
    every_seconds: Annotated[int, JSON_NUMBER] = Field(ge=MIN_RATE_SECONDS, le=MAX_RATE_SECONDS)


Schedule = Annotated[
    NowSchedule | AtSchedule | InSchedule | CronSchedule | RateSchedule,
    Field(discriminator="type"),
]


def zone_names() -> set[str]:
    """The IANA zones a schedule may name (the `posix/` and `right/` copies left out)."""
    global _ZONES
    if _ZONES is None:
        _ZONES = {z for z in available_timezones() if not z.startswith(("posix/", "right/"))}
    return _ZONES


_ZONES: set[str] | None = None


def is_recurring(schedule: _Schedule) -> bool:
    return isinstance(schedule, CronSchedule | RateSchedule)


def rate_anchor(schedule: RateSchedule, created_at: datetime) -> datetime:
    """The instant a rate schedule counts its periods from."""
    return schedule.start_at or created_at + timedelta(seconds=schedule.every_seconds)


def occurrences(
    schedule: _Schedule, after: datetime, anchor: datetime | None = None, *, steps: int | None = None
) -> Iterator[datetime]:
    """Run times at or after `after`, in order, in UTC (millisecond precision).

    `anchor` is the rate schedule's first run (see `rate_anchor`); other schedules ignore it.
    A one-time schedule yields its instant whatever `after` is: whether a past instant still runs is
    the caller's decision. `steps`: a cron schedule's budget for the whole iteration, instead of
    cron.BUDGET for each run.
    """
    if isinstance(schedule, NowSchedule):
        yield after
        return
    if isinstance(schedule, AtSchedule):
        yield schedule.at
        return
    if isinstance(schedule, InSchedule):  # (taken at `after`: `absolute` resolves it at the request)
        yield after + timedelta(seconds=schedule.seconds)
        return
    if isinstance(schedule, CronSchedule):
        runs = _cron_runs(schedule, after, steps)
    elif isinstance(schedule, RateSchedule):
        runs = _rate_runs(schedule, after, anchor or after)
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"unknown schedule {schedule!r}")
    # A recurring schedule ends before LATEST_INSTANT, as if its `end_at` were there: no instant a
    # request may not name is ever a run (a preview's, a job's next run, a marker's).
    try:
        for run in runs:
            if run >= LATEST_INSTANT or (schedule.end_at is not None and run >= schedule.end_at):
                return
            yield run
    except OverflowError:
        return  # past the last representable instant: the schedule has no more runs


def next_run(
    schedule: _Schedule, after: datetime, anchor: datetime | None = None, *, steps: int | None = None
) -> datetime | None:
    """The first run time at or after `after`, or None when the schedule has ended (`steps`: as
    `occurrences`)."""
    return next(occurrences(schedule, after, anchor, steps=steps), None)


def preview(schedule: _Schedule, now: datetime, count: int, anchor: datetime | None = None) -> list[datetime]:
    return list(itertools.islice(occurrences(schedule, now, anchor), count))


DstNote = Literal["moved", "repeated"]


def local_note(schedule: _Schedule, run: datetime) -> tuple[datetime, DstNote | None]:
    """A run on the schedule's wall clock, and whether a change of offset shaped it: "moved" (its
    wall-clock time fell in a gap, so it runs at the first minute after) or "repeated" (its
    wall-clock time occurs twice that day)."""
    if not isinstance(schedule, CronSchedule):
        return run, None
    zone = ZoneInfo(schedule.timezone)
    local = run.astimezone(zone)
    naive = local.replace(tzinfo=None)
    spec = cron.parse(schedule.expression)
    minute = int((naive - datetime(1970, 1, 1)).total_seconds() // 60)
    if not spec.minute_matches(minute):
        return local, "moved"
    other = naive.replace(tzinfo=zone, fold=1 - local.fold)
    if other.utcoffset() != local.utcoffset():
        return local, "repeated"
    return local, None


def _cron_runs(schedule: CronSchedule, after: datetime, steps: int | None) -> Iterator[datetime]:
    start = after if schedule.start_at is None else max(after, schedule.start_at)
    budget = None if steps is None else cron.Budget(steps)
    return cron.runs(cron.parse(schedule.expression), schedule.timezone, start, budget)


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
