"""UTC inside; RFC 3339 at the edges."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

# Instants Punctual accepts: far enough from datetime's limits that schedule arithmetic never overflows.
MIN_YEAR = 1970
MAX_YEAR = 9000
# RFC 3339's date-time: a full date, T, a full time (seconds required, any fraction) and an offset
# (Z, or +hh:mm). ISO 8601's other forms (week dates, basic format, no seconds) are not RFC 3339.
# The offset's hours are 00-23 and its minutes 00-59 (RFC 3339's time-numoffset): Python would read
# +00:99 as an hour and 39 minutes.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)")


def to_rfc3339(instant: datetime) -> str:
    """`2026-12-01T09:00:00.000Z`: UTC, milliseconds, Z."""
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (it carries an offset: a naive one is rejected)."""
    value = text.strip()
    if _RFC3339.fullmatch(value) is None:
        raise ValueError(
            "not an RFC 3339 timestamp: it needs a date, T, a time with seconds and an offset "
            f"(Z or +hh:mm), e.g. 2026-12-01T10:00:00Z: {text!r}"
        )
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        if value[17:19] == "60" and _parses(value[:17] + "59" + value[19:]):
            # (RFC 3339 allows a leap second; Python's datetime has none)
            raise ValueError(
                f"a leap second (:60) is not taken: write :59.999 or the next minute: {text!r}"
            ) from None
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from exc
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise OutOfRange(f"timestamp out of range (years {MIN_YEAR} to {MAX_YEAR}): {text!r}")
    return parsed.astimezone(UTC)


def _parses(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


class OutOfRange(ValueError):
    """A timestamp outside the years Punctual keeps (MIN_YEAR to MAX_YEAR): callers with a narrower
    range of their own (a request's instants) say theirs instead."""


def parse_stored(text: str) -> datetime:
    """A time Punctual stored (`to_rfc3339`'s form), read without the checks an input needs: the
    store's readers parse several a job, and the scanner thousands of jobs a tick."""
    return datetime.fromisoformat(text).astimezone(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_epoch_ms(instant: datetime) -> int:
    return (instant - _EPOCH) // timedelta(milliseconds=1)


def from_epoch_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)
