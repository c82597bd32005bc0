"""Suggestions ("did you mean ..."): the nearest known names to a misspelt one (a zone, a task type), as git and
kubectl offer them."""

from __future__ import annotations

import difflib
import zoneinfo
from collections.abc import Iterable


def nearest(word: str, known: Iterable[str], count: int = 3) -> list[str]:
    """The known names closest to `word` (case aside), best first; none when nothing is close."""
    names = list(known)
    by_lower = {name.lower(): name for name in names}
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=count, cutoff=0.6)
    return [by_lower[name] for name in found]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean noop?` or `; did you mean a or b?`, or "" when nothing is close."""
    found = nearest(word, known)
    if not found:
        return ""
    return f"; did you mean {' or '.join(found)}?"


def zone_hint(name: str) -> str:
    """The nearest IANA zones to a misspelt one, or how to list them."""
    found = nearest(name, zoneinfo.available_timezones())
    if found:
        return f"; did you mean {' or '.join(found)}?"
    return " (an IANA zone name, e.g. Europe/Paris, America/New_York, UTC)"
