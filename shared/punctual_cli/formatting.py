"""How the CLI words values for people: tables fitted to the terminal, `key: value` details, times in
the display zone, durations, lateness and counts (`--json` bypasses all of this). What it shows of
jobs, executions and tasks is in punctual_cli.views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from zoneinfo import ZoneInfoNotFoundError

from punctual_cli import display
from punctual_cli.display import Column

NONE = "-"


def table(headers: Sequence[str | Column], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, the last not padded, fitted to the reader's terminal."""
    columns = [h if isinstance(h, Column) else Column(h) for h in headers]
    return display.fit(columns, [list(row) for row in rows], display.current.width)


def details(pairs: Sequence[tuple[str, str]]) -> str:
    """`key:  value` lines, the values lined up, each value on its line as `display.escaped` shows it."""
    width = max(len(key) for key, _ in pairs) + 1
    return "\n".join(f"{(key + ':').ljust(width)}  {display.escaped(value)}" for key, value in pairs)


def truncate(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_time(value: Any) -> str:
    """An API time in the display zone, marked: `2026-12-01 10:00:00 CET`, `2026-12-01 09:00:00Z`."""
    return display.current.time(value)


def run_time(value: Any, schedule: Any) -> str:
    """A run's time: a cron job's in its own zone beside UTC (and the display zone when that is a third
    one), `2026-12-07 09:00:00 CET (2026-12-07 08:00:00Z)`; any other in the display zone."""
    # (a cron schedule without a zone is in UTC, as the API takes it)
    zone = (
        schedule.get("timezone") or "UTC"
        if isinstance(schedule, dict) and schedule.get("type") == "cron"
        else None
    )
    if not value or not zone or display.parse(value) is None:
        return short_time(value)
    # (a job in UTC shows it once: its own zone and UTC are one)
    own_zone = "UTC" if zone in display.UTC_NAMES else zone
    try:
        own = display.current.time(value, own_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return short_time(value)
    also = [] if own_zone == "UTC" else [display.current.time(value, "UTC")]
    if display.current.zone_name != zone and display.current.zone_name not in display.UTC_NAMES:
        also.append(short_time(value))
    return f"{own} ({', '.join(also)})" if also else own


def duration(seconds: Any) -> str:
    """300 → `5m`, 5400 → `1h30m`, 90 → `1m30s`, 0.5 → `0.5s`."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return NONE if seconds is None else str(seconds)
    if seconds != int(seconds) or seconds <= 0:
        return f"{seconds:g}s"
    remaining = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def lateness(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return NONE
    return f"{ms:.0f}ms" if abs(ms) < 1000 else f"{ms / 1000:.1f}s"


def counted(count: Any, noun: str) -> str:
    """`1 attempt`, `3 attempts`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def fitted(line: str) -> str:
    """A line as `display.escaped` shows it, cut to the terminal's width (never wrapped)."""
    line = display.escaped(line)
    width = display.current.width
    return line if width is None else display.cut(line, width)
