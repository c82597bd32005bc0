"""What the CLI's command modules share: the usage error, the parsers of durations and counts, and
the clock, kept apart from the commands so that none of those modules imports another's."""

from __future__ import annotations

import argparse
import re

from punctual.platform.clock import Clock, SystemClock

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
