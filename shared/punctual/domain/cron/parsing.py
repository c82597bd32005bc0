"""A cron expression's text to its meaning, a `CronSpec`, as Vixie cron's `entry.c` reads it.

Five fields of numbers, ranges, steps and names, the `@yearly`-style macros, the `L` and `#`
extensions stored jobs rely on, and a refusal (with the 5-field equivalent) of EventBridge's and
Quartz's dialects, whose day-of-week numbering would silently change what an expression means.
Parsing is cached: the same text always means the same thing.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

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
_MAX_DAYS_IN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_EPOCH = datetime(1970, 1, 1)


class CronError(ValueError):
    """An expression cron would not accept, or one that can never run; the message says why."""


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


def parse(expression: str) -> CronSpec:
    """The expression's meaning, or CronError saying what is wrong with it (quoting the expression's
    parts as written, not in the lower case they are read in)."""
    text = _normalise_text(expression)
    try:
        return _parse_cached(text)
    except CronError as exc:
        message = str(exc)
        parts = {*expression.split(), *re.split(r"[\s,/-]+", expression)}
        for part in sorted((p for p in parts if p != p.lower()), key=len, reverse=True):
            message = message.replace(repr(part.lower()), repr(part))
        if message == str(exc):
            raise
        raise CronError(message) from None


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
