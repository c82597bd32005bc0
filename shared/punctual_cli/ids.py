"""Ids as people give them back: the shortened ids the tables show (display.job_ids,
display.execution_ids) name the same jobs and executions on the command line, as `git` takes a
shortened hash, as long as one alone starts so.

Taking one back reads a bounded amount, whatever the store holds: first the ids this CLI has shown at
this endpoint (shown.py), then an execution's own instant (its id's first digits after the job's:
one page of that job's executions), else the newest SCANNED jobs or executions. An id older than those
and never shown here is refused with a usage error asking for it whole."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import islice

from punctual.platform.timefmt import to_rfc3339
from punctual_cli import display, shown
from punctual_cli.common import UsageError
from punctual_client.transport import PunctualClient

SCANNED = 1_000  # ten pages of 100: about a second at the API
PAGE = 100
# An execution id's instant: the scheduled time's milliseconds in hex, 11 digits from 2004 to 2527.
_INSTANT_DIGITS = 11
_INSTANT = re.compile(r"[0-9a-f]{1,11}")
_LAST_INSTANT = datetime(2200, 1, 1, tzinfo=UTC)  # the API's bound on `until`


def _one(given: str, found: Iterable[str], noun: str) -> str:
    found = sorted(set(found))
    if len(found) == 1:
        return found[0]
    if not found:
        # Left to the API, whose 404 says it plainly.
        return given
    shown_ids = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise UsageError(f"{noun} {given!r} is ambiguous: it starts {shown_ids} (give more of it)")


def _not_found(given: str, noun: str, newest: str) -> UsageError:
    return UsageError(
        f"no {noun} starts {given!r} among the ids shown here or {newest}: give its whole id"
        " (`-q` lists whole ids)"
    )


def job_id(client: PunctualClient, given: str) -> str:
    """The whole id of a job given shortened (`job_1a2b3c4`); any other text as it is."""
    if not display.is_short_job_id(given):
        return given
    seen = shown.current.matching(lambda i: display.is_job_id(i) and i.startswith(given))
    if seen and len(given) >= len("job_") + display.MIN_ABBREV:
        # (as long as the tables show ids at least: a shorter one is checked against the store's too)
        return _one(given, seen, "job")
    read = list(islice(client.iter_jobs(limit=PAGE), SCANNED + 1))
    found = [str(job["id"]) for job in read[:SCANNED] if str(job["id"]).startswith(given)] + sorted(seen)
    if not found and len(read) > SCANNED:
        raise _not_found(given, "job", f"your {SCANNED:,} newest jobs")
    return _one(given, found, "job")


def execution_id(client: PunctualClient, job: str, given: str) -> str:
    """The whole id of one of `job`'s executions given as shown (what follows the job's id), or whole."""
    if given.startswith(job + ".") or not display.is_job_id(job):
        return given
    seen = shown.current.matching(lambda i: display.matches_execution(given, i, job))
    if seen:
        return _one(given, seen, "execution")
    window = instant_window(given)
    if window is None:
        executions = client.iter_executions(job, limit=PAGE)
        newest = f"the job's {SCANNED:,} newest executions"
    else:
        since, until = window
        executions = client.iter_executions(job, limit=PAGE, since=since, until=until)
        newest = f"the job's executions scheduled from {since}{f' to {until}' if until else ''} ({SCANNED:,} at most)"
    read = list(islice(executions, SCANNED + 1))
    found = [str(e["id"]) for e in read[:SCANNED] if display.matches_execution(given, str(e["id"]), job)]
    if not found and len(read) > SCANNED:
        raise _not_found(given, "execution", newest)
    return _one(given, found, "execution")


def instant_window(given: str) -> tuple[str, str | None] | None:
    """`since` and `until` (RFC 3339) holding every instant an execution id shown as `given` may have:
    its first digits are the scheduled instant's milliseconds in hex. None when they are not; `until`
    None when the window reaches 2200, which no instant does (and no `until` may name)."""
    head = given.partition(".")[0]
    if not _INSTANT.fullmatch(head):
        return None
    spread = 16 ** (_INSTANT_DIGITS - len(head))
    low = int(head, 16) * spread
    high = (int(head, 16) + 1) * spread
    since = datetime.fromtimestamp(low / 1000, UTC)
    if since >= _LAST_INSTANT:
        return None
    until = datetime.fromtimestamp(high / 1000, UTC)
    return to_rfc3339(since), None if until >= _LAST_INSTANT else to_rfc3339(until)


def dead_letter_ids(client: PunctualClient, given: list[str]) -> list[str]:
    """Dead-lettered executions' whole ids, given as `dead-letters list` shows them."""
    if not any(display.is_short_job_id(i.partition(".")[0]) for i in given):
        return given
    read: list[str] | None = None  # the newest dead letters, read once if any id needs them
    whole = []
    for i in given:
        if not display.is_short_job_id(i.partition(".")[0]):
            whole.append(i)
            continue
        found = shown.current.matching(functools.partial(display.matches_execution, i))
        if not found:
            if read is None:
                letters = islice(client.iter_dead_letters(limit=PAGE), SCANNED + 1)
                read = [str(letter["execution_id"]) for letter in letters]
            found = {e for e in read[:SCANNED] if display.matches_execution(i, e)}
            if not found and len(read) > SCANNED:
                raise _not_found(i, "dead-lettered execution", f"the {SCANNED:,} newest dead letters")
        whole.append(_one(i, found, "execution"))
    return whole
