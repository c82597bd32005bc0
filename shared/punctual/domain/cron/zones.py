"""Changes of a zone's UTC offset (daylight saving, and a zone moving its standard time), found by
probing zoneinfo, since it exposes no list of transitions. The engine needs each change's instant
and both offsets to follow cron's main loop across it."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from punctual.domain.cron.bounds import LAST_YEAR, ZONE_YEAR_STEPS, Budget

_DAY = 86400


def _offset(zone: ZoneInfo, ts: int) -> int:
    moment = datetime.fromtimestamp(ts, UTC).astimezone(zone)
    delta = moment.utcoffset()
    return int(delta.total_seconds()) if delta is not None else 0


@lru_cache(maxsize=8192)
def _year_changes(key: str, year: int) -> tuple[tuple[int, int, int], ...]:
    """(instant, offset before, offset after) of every change of the zone's UTC offset in the year.
    Offsets are probed a day apart and each change is found to the second; no zone in the database
    changes twice within a week (checked over 1970-2037), so none is missed."""
    zone = ZoneInfo(key)
    start = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp()) if year < 9999 else start + 365 * _DAY
    changes: list[tuple[int, int, int]] = []
    t, before = start, _offset(zone, start)
    while t < end:
        probe = min(t + _DAY, end)
        after = _offset(zone, probe)
        if after != before:
            lo, hi = t, probe  # offset(lo) == before, offset(hi) != before
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(zone, mid) == before:
                    lo = mid
                else:
                    hi = mid
            now_off = _offset(zone, hi)
            changes.append((hi, before, now_off))
            t, before = hi, now_off
            continue
        t = probe
    return tuple(changes)


def _next_change(key: str, after: int, until: int, budget: Budget) -> tuple[int, int, int] | None:
    """The first change of offset at an instant in (after, until]."""
    if key == "UTC":
        return None
    year = datetime.fromtimestamp(after, UTC).year
    while True:
        budget.spend(ZONE_YEAR_STEPS)  # (cached or not: the answer must not depend on a cache)
        for change in _year_changes(key, year):
            if after < change[0] <= until:
                return change
            if change[0] > until:
                return None
        year += 1
        if year > LAST_YEAR or int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) > until:
            return None


def _last_change(key: str, after: int, until: int, budget: Budget) -> tuple[int, int, int] | None:
    found = None
    cursor = after
    while (change := _next_change(key, cursor, until, budget)) is not None:
        found, cursor = change, change[0]
    return found
