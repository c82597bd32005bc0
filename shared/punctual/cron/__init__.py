"""Cron expressions with Debian cron's semantics, bounded in time and work.

Parsing follows Vixie cron's `entry.c` (as Debian ships it): five fields, lists of numbers, ranges
and steps, month and weekday names, day-of-week 7 as Sunday, and the `@yearly`-style macros. A field
whose text starts with `*` (`*`, `*/15`) marks the expression as starred in that field, which is what
decides the rules below, exactly as cron's MIN_STAR / HR_STAR / DOM_STAR / DOW_STAR flags do:

- day of month and day of week: when either field is starred, a day must match both; otherwise it
  must match either (the classic `0 0 1 * 1` = the 1st and every Monday);
- daylight saving and other changes of a zone's offset follow `cron.c`'s main loop, which compares
  the local wall-clock minute it wakes to with the one it last ran ("virtual time"):
  * forward by up to 5 minutes: every minute skipped runs, at the first minute after the change;
  * forward by 6 minutes to 3 hours (a spring-forward gap): an expression starred in its minute or
    hour field ("wildcard") runs only if the first minute after the gap matches; any other runs once
    at that first minute if it matched anywhere in the gap;
  * backward by less than 3 hours (a fall-back): wildcard expressions run again in the repeated
    minutes; the others do not run until the clock passes the last minute they already saw;
  * any larger jump (Pacific/Apia skipping a day): nothing is caught up; what matches the minute
    after the jump runs.

Cron wakes once a minute, so each run is a whole UTC minute; several matches cron would run in the
same wake are one run.

Every computation is bounded: a search for the next matching day stops after 400 years (the
Gregorian calendar's cycle, after which nothing new can match), and every call spends at most
`BUDGET` of work steps and `DEADLINE` seconds (read from an injectable monotonic clock) before it
raises `CronBoundExceeded`. No input can make it run unbounded.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
FIELD_HELP = "minute hour day-of-month month day-of-week"
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {3: {n: i + 1 for i, n in enumerate(_MONTHS)}, 4: {n: i for i, n in enumerate(_DAYS)}}
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_LENGTH = 200
# The largest year any schedule reaches; later runs are treated as the schedule's end.
LAST_YEAR = 9998
SEARCH_YEARS = 400
# Work steps (days looked at, offsets probed) one call may spend, and wall-clock seconds.
BUDGET = 100_000
DEADLINE = 0.5
_MAX_DAYS_IN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_EPOCH = datetime(1970, 1, 1)
_DAY = 86400
# A change of offset seen less than this long before an instant may still shape it (cron's
# backward case keeps its virtual time for up to 3 hours).
_SETTLE = 4 * 3600


class CronError(ValueError):
    """An expression cron would not accept, or one that can never run; the message says why."""


class CronBoundExceeded(RuntimeError):
    """A computation reached its bound of work or time before it found an answer."""


@dataclass(frozen=True)
class CronSpec:
    text: str  # normalised: single spaces, lower case
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]  # 0 = Sunday
    dom_star: bool
    dow_star: bool
    wild: bool  # starred in its minute or hour field
    # Extensions cron does not read but cronsim and Quartz do (accepted: stored jobs and their users
    # rely on them): `L` in day-of-month, `5L` (the last Friday) and `5#3` (the third Friday).
    dom_last: bool = False
    dow_last: frozenset[int] = frozenset()
    dow_nth: frozenset[tuple[int, int]] = frozenset()

    def day_matches(self, year: int, month: int, day: int) -> bool:
        dow = (calendar.weekday(year, month, day) + 1) % 7
        dom_ok = day in self.doms
        dow_ok = dow in self.dows
        if self.dom_last or self.dow_last or self.dow_nth:
            days_in = calendar.monthrange(year, month)[1]
            dom_ok = dom_ok or (self.dom_last and day == days_in)
            dow_ok = (
                dow_ok
                or (dow in self.dow_last and day + 7 > days_in)
                or (dow, (day - 1) // 7 + 1) in self.dow_nth
            )
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def minute_matches(self, local_minute: int) -> bool:
        moment = _EPOCH + timedelta(minutes=local_minute)
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.month in self.months
            and self.day_matches(moment.year, moment.month, moment.day)
        )


# ------------------------------------------------------------------------------------------ parsing
def parse(expression: str) -> CronSpec:
    """The expression's meaning, or CronError saying what is wrong with it."""
    return _parse_cached(_normalise_text(expression))


def normalise(expression: str) -> str:
    """The text to store: fields separated by single spaces, names and macros in lower case."""
    return parse(expression).text


def _normalise_text(expression: str) -> str:
    if not isinstance(expression, str):
        raise CronError("expression must be a string")
    if len(expression) > MAX_LENGTH:
        raise CronError(f"expression is longer than {MAX_LENGTH} characters")
    if any(not ch.isprintable() and not ch.isspace() for ch in expression):
        raise CronError("expression contains a control character")
    return " ".join(expression.split()).lower()


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> CronSpec:
    if not text:
        raise CronError(f"expression is empty: expected 5 fields ({FIELD_HELP})")
    _refuse_other_dialects(text)
    if text.startswith("@"):
        if text == "@reboot":
            raise CronError("@reboot runs when a machine starts, and a Punctual schedule has no machine")
        if text not in MACROS:
            raise CronError(f"unknown macro {text!r}: use one of {', '.join(MACROS)}")
        spec = _parse_cached(MACROS[text])
        return CronSpec(text, *(getattr(spec, f) for f in _SPEC_FIELDS))
    fields = text.split(" ")
    if len(fields) != 5:
        raise CronError(f"expected 5 fields ({FIELD_HELP}), got {len(fields)}")
    extras: dict[int, set[tuple[int, ...]]] = {2: set(), 4: set()}
    sets = [_parse_field(index, field, extras.get(index)) for index, field in enumerate(fields)]
    dows = frozenset(0 if d == 7 else d for d in sets[4])
    spec = CronSpec(
        text=text,
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        doms=frozenset(sets[2]),
        months=frozenset(sets[3]),
        dows=dows,
        dom_star=fields[2].startswith("*"),
        dow_star=fields[4].startswith("*"),
        wild=fields[0].startswith("*") or fields[1].startswith("*"),
        dom_last=bool(extras[2]),
        dow_last=frozenset(e[1] for e in extras[4] if e[0] == 0),
        dow_nth=frozenset((e[1], e[2]) for e in extras[4] if e[0] == 1),
    )
    _refuse_impossible_dates(spec)
    return spec


_SPEC_FIELDS = ("minutes", "hours", "doms", "months", "dows", "dom_star", "dow_star", "wild")


def _parse_field(index: int, text: str, extras: set[tuple[int, ...]] | None = None) -> set[int]:
    name = FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{name} field {text!r} has an empty list element")
        if extras is not None and (extra := _extension(index, part)) is not None:
            extras.add(extra)
            continue
        values |= _parse_part(index, part)
    return values


def _extension(index: int, part: str) -> tuple[int, ...] | None:
    """`L` (day-of-month), `dL` and `d#n` (day-of-week): (0,) for the last day, (0, d) for the last
    weekday d of the month, (1, d, n) for its n-th; None when `part` is none of those."""
    if index == 2:
        return (0,) if part == "l" else None
    if part.endswith("l") and len(part) > 1:
        return (0, _weekday(part[:-1]))
    if "#" in part:
        day, _, nth = part.partition("#")
        if not (nth.isascii() and nth.isdigit() and 1 <= int(nth) <= 5):
            raise CronError(f"day-of-week field {part!r}: the n of '#n' is 1 to 5")
        return (1, _weekday(day), int(nth))
    return None


def _weekday(text: str) -> int:
    value = _value(4, text)
    return 0 if value == 7 else value


def _parse_part(index: int, part: str) -> set[int]:
    name = FIELDS[index]
    low, high = _RANGES[index]
    body, slash, step_text = part.partition("/")
    if slash:
        step = _number(index, step_text, "step")
        if step == 0:
            raise CronError(f"{name} field {part!r}: a step must be at least 1")
        # (a step past the range's end is cron's too: the range's first value alone)
    else:
        step = 1
    if body == "*":
        first, last = low, high
    elif "-" in body:
        start_text, _, end_text = body.partition("-")
        first = _value(index, start_text)
        last = _value(index, end_text)
        if first > last:
            raise CronError(
                f"{name} field {part!r}: the range runs backwards; write it as two ranges, "
                f"{first}-{high},{low}-{last}"
            )
    else:
        first = _value(index, body)
        # `5/15` is not Vixie syntax, but widely pasted (Quartz, croniter, cronsim): from 5 to the end.
        last = high if slash else first
    return set(range(first, last + 1, step))


def _value(index: int, text: str) -> int:
    names = _NAMES.get(index)
    if names is not None and text in names:
        return names[text]
    return _number(index, text, "value")


def _number(index: int, text: str, what: str) -> int:
    name = FIELDS[index]
    low, high = _RANGES[index]
    if not text.isascii() or not text.isdigit():
        hint = ""
        if "w" in text:
            hint = " ('W', the nearest weekday, is a Quartz extension Punctual does not read)"
        elif text == "?":
            hint = " ('?' is EventBridge and Quartz syntax: use '*')"
        elif index in _NAMES:
            kind = "month" if index == 3 else "weekday"
            hint = f" (a {kind} is a number or a three-letter name such as {_example_name(index)})"
        raise CronError(f"{name} field: {text!r} is not a number{hint}")
    number = int(text)  # (at most 200 digits: the expression's length is bounded)
    if what == "value" and not low <= number <= high:
        raise CronError(f"{name} field: {text} is out of range {low}-{high}")
    return number


def _example_name(index: int) -> str:
    return "'jan'" if index == 3 else "'mon'"


def _refuse_impossible_dates(spec: CronSpec) -> None:
    """A day-of-month no chosen month has ('0 0 30 2 *') is refused here, by name."""
    if not (spec.dom_star or spec.dow_star) or spec.dom_last:
        return  # either field may match (the weekdays alone always do), or the last day, which always is
    possible = any(d <= _MAX_DAYS_IN[m - 1] for m in spec.months for d in spec.doms)
    if possible:
        return
    months = ", ".join(calendar.month_name[m] for m in sorted(spec.months))
    days = ", ".join(str(d) for d in sorted(spec.doms))
    if len(spec.doms) == 1 and len(spec.months) == 1:
        raise CronError(f"{months} {days} never occurs")
    raise CronError(f"none of the days {days} occurs in {months}: the expression never runs")


def _refuse_other_dialects(text: str) -> None:
    """EventBridge Scheduler's `cron(...)` and Quartz's 6 or 7 fields would be read with another
    meaning (their day-of-week counts 1 = Sunday): refused, showing the 5-field equivalent."""
    inner = text
    wrapped = text.startswith("cron(") and text.endswith(")")
    if wrapped:
        inner = text[5:-1].strip()
    fields = inner.split(" ")
    if not wrapped and len(fields) not in (6, 7):
        return
    equivalent = _five_field_equivalent(fields, wrapped)
    dialect = "an EventBridge Scheduler" if wrapped or _looks_eventbridge(fields) else "a Quartz"
    advice = f"; the 5-field equivalent is {equivalent!r}" if equivalent else ""
    raise CronError(
        f"this looks like {dialect} expression, which cron reads differently (day-of-week 1 = Sunday, "
        f"'?' for any); expected 5 fields ({FIELD_HELP}){advice}"
    )


def _looks_eventbridge(fields: list[str]) -> bool:
    # EventBridge: minute hour dom month dow year ('?' in field 3 or 5); Quartz: second minute hour
    # dom month dow [year] ('?' in field 4 or 6).
    return len(fields) == 6 and (fields[2] == "?" or fields[4] == "?")


def _five_field_equivalent(fields: list[str], wrapped: bool) -> str | None:
    if wrapped or _looks_eventbridge(fields):
        if len(fields) != 6 or fields[5] not in ("*", "?"):
            return None
        minute, hour, dom, month, dow = fields[:5]
    elif len(fields) in (6, 7):
        if fields[0] != "0" or (len(fields) == 7 and fields[6] not in ("*", "?")):
            return None
        minute, hour, dom, month, dow = fields[1:6]
    else:
        return None
    dom = "*" if dom == "?" else dom
    translated = _quartz_dow(dow)
    if translated is None:
        return None
    candidate = " ".join((minute, hour, dom, month, translated))
    try:
        _parse_cached(candidate)
    except CronError:
        return None
    return candidate


def _quartz_dow(text: str) -> str | None:
    """Quartz/EventBridge day-of-week (1 = Sunday .. 7 = Saturday) in cron's numbering."""
    if text in ("?", "*"):
        return "*"
    out: list[str] = []
    for part in text.split(","):
        body, slash, step = part.partition("/")
        pieces = []
        for end in body.split("-"):
            if end.isdigit() and 1 <= int(end) <= 7:
                pieces.append(str(int(end) - 1))
            elif end in _DAYS or end == "*":
                pieces.append(end)
            else:
                return None
        out.append("-".join(pieces) + (slash + step if slash else ""))
    return ",".join(out)


# ------------------------------------------------------------------------------------------ bounds
class Budget:
    """Work steps and a deadline for one computation; `spend` raises CronBoundExceeded past either."""

    def __init__(
        self, steps: int = BUDGET, seconds: float = DEADLINE, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._left = steps
        self._monotonic = monotonic
        self._deadline = monotonic() + seconds
        self._checks = 0

    def spend(self, steps: int = 1) -> None:
        self._left -= steps
        if self._left < 0:
            raise CronBoundExceeded("the schedule needs more work than allowed to find its next run")
        self._checks += 1
        if self._checks % 64 == 0 and self._monotonic() > self._deadline:
            raise CronBoundExceeded("the schedule took too long to find its next run")


# ------------------------------------------------------------------------------------------ matching
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


# ------------------------------------------------------------------------------------------ zones
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
        budget.spend(8)
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


# ------------------------------------------------------------------------------------------ runs
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
