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
`BUDGET` of work steps before it raises `CronBoundExceeded`. No input can make it run unbounded.
The budget counts work, never time: a schedule gets the same answer however busy the machine.

The package is read in that order: `parsing` turns the text into a `CronSpec` (fields, names,
macros, and refusing other dialects), `bounds` holds the limits every computation spends against,
`zones` finds the changes of a zone's UTC offset, and `engine` walks the matching local minutes
across those changes as cron's main loop would.
"""

from punctual.domain.cron.bounds import (
    BUDGET,
    CHAIN_BUDGET,
    LAST_YEAR,
    SEARCH_YEARS,
    Budget,
    CronBoundExceeded,
)
from punctual.domain.cron.engine import next_local_match, runs
from punctual.domain.cron.parsing import (
    FIELD_HELP,
    FIELDS,
    MACROS,
    MAX_LENGTH,
    CronError,
    CronSpec,
    normalise,
    parse,
)

__all__ = [
    "BUDGET",
    "CHAIN_BUDGET",
    "FIELDS",
    "FIELD_HELP",
    "LAST_YEAR",
    "MACROS",
    "MAX_LENGTH",
    "SEARCH_YEARS",
    "Budget",
    "CronBoundExceeded",
    "CronError",
    "CronSpec",
    "next_local_match",
    "normalise",
    "parse",
    "runs",
]
