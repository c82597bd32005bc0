"""The next-occurrence engine: the instants Debian's cron would start an expression's runs in a zone.

`next_local_match` finds the next matching minute on a zone's wall clock; `runs` walks those
matches across changes of the zone's offset with cron's virtual time, applying the catch-up and
skip rules the package's docstring lists. Every step is spent against a `Budget`.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from punctual.domain.cron.bounds import LAST_YEAR, SEARCH_YEARS, Budget, CronBoundExceeded
from punctual.domain.cron.parsing import _EPOCH, CronSpec
from punctual.domain.cron.zones import _last_change, _next_change, _offset

# A change of offset seen less than this long before an instant may still shape it (cron's
# backward case keeps its virtual time for up to 3 hours).
_SETTLE = 4 * 3600


def next_local_match(spec: CronSpec, lo: int, hi: int, budget: Budget) -> int | None:
    """The first local minute in [lo, hi] (minutes since 1970-01-01 00:00 on the zone's wall clock)
    the expression matches, or None."""
    if lo > hi:
        return None
    try:
        start = _EPOCH + timedelta(minutes=lo)
    except OverflowError:
        return None
    year, month, day = start.year, start.month, start.day
    first_hour, first_minute = start.hour, start.minute
    last_year = min(LAST_YEAR, year + SEARCH_YEARS)
    months = spec.months
    while year <= last_year:
        if month in months:
            days_in = calendar.monthrange(year, month)[1]
            while day <= days_in:
                budget.spend()
                if spec.day_matches(year, month, day):
                    hit = _first_time(spec, first_hour, first_minute)
                    if hit is not None:
                        minute = _minutes_since_epoch(year, month, day, *hit)
                        return minute if minute <= hi else None
                day += 1
                first_hour = first_minute = 0
                if _minutes_since_epoch(year, month, day, 0, 0) > hi:
                    return None
        month += 1
        day = 1
        first_hour = first_minute = 0
        if month > 12:
            month = 1
            year += 1
        if _minutes_since_epoch(year, month, 1, 0, 0) > hi:
            return None
    return None


def _first_time(spec: CronSpec, hour: int, minute: int) -> tuple[int, int] | None:
    for h in spec.hours:
        if h < hour:
            continue
        floor = minute if h == hour else 0
        for m in spec.minutes:
            if m >= floor:
                return h, m
    return None


def _minutes_since_epoch(year: int, month: int, day: int, hour: int, minute: int) -> int:
    days = (datetime(year, month, 1) - _EPOCH).days + day - 1
    return (days * 24 + hour) * 60 + minute


def runs(spec: CronSpec, zone: str, after: datetime, budget: Budget | None = None) -> Iterator[datetime]:
    """Run instants (UTC, whole minutes) at or after `after`, in increasing order, as Debian's cron
    running steadily in `zone` would start them. Finding each run is bounded by a fresh budget (or
    the one given, for the whole iteration)."""
    own_budget = budget is None
    threshold = _ceil_seconds(after)
    # Start where cron's state is plain (its virtual time equal to the clock's minute): before any
    # change of offset close enough to `after` to still shape it.
    start = threshold
    b = budget or Budget()
    for _ in range(4):
        change = _last_change(zone, start - _SETTLE, start, b)
        if change is None:
            break
        start = change[0] - 1
    offset = _offset(ZoneInfo(zone), start)
    first = -(-(start + offset) // 60)
    virtual = first - 1  # the local minute cron last woke at
    lo = first  # the next local minute to look at in this stretch of one offset
    at = start  # the real instant the stretch is known to be free of changes up to
    last_yielded: int | None = None
    while True:
        floor = lo if spec.wild else max(lo, virtual + 1)
        match = next_local_match(spec, floor, floor + SEARCH_YEARS * 366 * 1440, b)
        if match is None:
            return  # nothing matches for a whole calendar cycle: nothing ever will
        change = _next_change(zone, at, match * 60 - offset, b)
        if change is None:
            instant = match * 60 - offset
            lo, at = match + 1, instant
            virtual = max(virtual, match)
            if instant >= threshold:
                last_yielded = _checked(instant, last_yielded)
                yield _to_datetime(instant)
                b = Budget() if own_budget else b
            continue
        when, _, new_offset = change
        end = -(-(when + offset) // 60)  # first local minute at or after the change, old offset
        virtual = max(virtual, end - 1)
        # Cron set its alarm for the next minute by the old offset; it reads the clock by the new.
        instant = end * 60 - offset
        entry = (instant + new_offset) // 60
        diff = entry - virtual
        runs_now: bool
        if 1 <= diff <= 5:
            runs_now = next_local_match(spec, virtual + 1, entry, b) is not None
            virtual = entry
        elif 6 <= diff <= 180:
            if spec.wild:
                runs_now = spec.minute_matches(entry)
            else:
                runs_now = next_local_match(spec, virtual + 1, entry, b) is not None
            virtual = entry
        elif -179 <= diff <= 0:
            runs_now = spec.wild and spec.minute_matches(entry)
        else:
            runs_now = spec.minute_matches(entry)
            virtual = entry
        offset, lo, at = new_offset, entry + 1, when
        if runs_now and instant >= threshold:
            last_yielded = _checked(instant, last_yielded)
            yield _to_datetime(instant)
            b = Budget() if own_budget else b


def _checked(instant: int, last: int | None) -> int:
    if last is not None and instant <= last:
        # Cannot happen by construction; refusing to go on is safer than yielding a run twice.
        raise CronBoundExceeded("schedule computation went backwards")
    return instant


def _ceil_seconds(moment: datetime) -> int:
    ts = moment.timestamp()
    whole = int(ts)
    return whole if whole == ts else (whole + 1 if ts > 0 else whole)


def _to_datetime(instant: int) -> datetime:
    return datetime.fromtimestamp(instant, UTC)
