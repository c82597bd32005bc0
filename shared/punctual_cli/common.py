"""What the CLI's command modules share: exit codes, the usage error, the parsers of durations,
counts, timestamps and JSON, the options every listing takes, and the clock, kept apart from the
commands so that none of those modules imports another's."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from punctual.platform.clock import Clock, SystemClock
from punctual.platform.timefmt import parse_rfc3339

if TYPE_CHECKING:
    from punctual_client.transport import PunctualClient

EXIT_OK = 0
EXIT_FAILURE = 1  # the API answered 4xx/5xx, a watch gave up, no local stack
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_INTERRUPTED = 130

# What runs a command (set as the parser's `handler`), and what adds a group of options to one.
Handler = Callable[["PunctualClient", argparse.Namespace], int]
OptionAdder = Callable[[argparse.ArgumentParser], None]

# Every read of the time (for `--in`, `watch`, `receive`) goes through this attribute, read at call
# time, so that tests swap in a ManualClock in one place.
clock: Clock = SystemClock()


class UsageError(Exception):
    """The command line makes no sense; exit 2 without calling the API."""


_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_UNIT_SECONDS = (86400, 3600, 60, 1)


def parse_duration(text: str) -> int:
    """`90s`, `5m`, `1h30m`, `2d`, or plain seconds (`45`) → whole seconds."""
    value = text.strip().lower()
    if value.isdigit():
        return int(value)
    match = _DURATION.fullmatch(value)
    if not value or match is None:
        raise UsageError(f"invalid duration {text!r}: use a number with units d/h/m/s, e.g. 90s, 5m, 1h30m")
    return sum(int(count) * size for count, size in zip(match.groups(), _UNIT_SECONDS, strict=True) if count)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def check_timestamp(text: str, flag: str) -> str:
    """An RFC 3339 timestamp with an offset, passed on as written."""
    try:
        parse_rfc3339(text)
    except ValueError as exc:
        # (the parser's message gives its own example)
        example = "" if "e.g." in str(exc) else " (e.g. 2026-12-01T10:00:00+01:00)"
        raise UsageError(f"{flag}: {exc}{example}") from None
    return text.strip()


def parse_json(text: str, flag: str) -> Any:
    """JSON given on the command line; an object that repeats a key is refused, as the API refuses
    it (json.loads keeps the last silently: `{"a":1,"a":2}` would be sent as `{"a":2}`)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        raise UsageError(f"{flag} must be JSON: {exc}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} is given twice")
        found[key] = value
    return found


def parse_pair(text: str, flag: str, separator: str = "=") -> tuple[str, str]:
    key, sep, value = text.partition(separator)
    if not sep or not key.strip():
        raise UsageError(f"{flag} takes KEY{separator}VALUE, got {text!r}")
    return key.strip(), value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def add_job_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB", help="the job id")


def add_paging_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, help="page size (1-100)")
    parser.add_argument("--cursor", help="continue from this next_cursor")
    parser.add_argument("--all", action="store_true", help="follow next_cursor to the end")


T = TypeVar("T")

# How many times a read-modify-write (`jobs update`, `tasks update --param`) reads and amends again
# when another change lands between its read and its write (412): each loss kept the other change.
UPDATE_ATTEMPTS = 3


def until_unmoved(attempt: Callable[[], T]) -> T:
    """`attempt()` (a read, then a change on condition of what was read), again on a 412."""
    from punctual_client.errors import ApiError

    for left in range(UPDATE_ATTEMPTS - 1, -1, -1):
        try:
            return attempt()
        except ApiError as exc:
            if exc.status != 412 or left == 0:
                raise
    raise AssertionError("unreachable")
