"""Ids as people give them back: the shortened ids the tables show (display.job_ids,
display.execution_ids) name the same jobs and executions on the command line, as `git` takes a
shortened hash, as long as one alone starts so."""

from __future__ import annotations

from collections.abc import Iterable

from punctual_cli import display
from punctual_cli.common import UsageError
from punctual_client.transport import PunctualClient


def _one(given: str, found: Iterable[str], noun: str) -> str:
    found = sorted(set(found))
    if len(found) == 1:
        return found[0]
    if not found:
        # Left to the API, whose 404 says it plainly.
        return given
    shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise UsageError(f"{noun} {given!r} is ambiguous: it starts {shown} (give more of it)")


def job_id(client: PunctualClient, given: str) -> str:
    """The whole id of a job given shortened (`job_1a2b3c4`); any other text as it is."""
    if not display.is_short_job_id(given):
        return given
    jobs = (str(job["id"]) for job in client.iter_jobs(limit=100))
    return _one(given, (job for job in jobs if job.startswith(given)), "job")


def execution_id(client: PunctualClient, job: str, given: str) -> str:
    """The whole id of one of `job`'s executions given as shown (what follows the job's id), or whole."""
    if given.startswith(job + ".") or not display.is_job_id(job):
        return given
    candidates = (
        str(e["id"])
        for e in client.iter_executions(job, limit=100)
        if display.matches_execution(given, str(e["id"]), job)
    )
    return _one(given, candidates, "execution")


def dead_letter_ids(client: PunctualClient, given: list[str]) -> list[str]:
    """Dead-lettered executions' whole ids, given as `dead-letters list` shows them."""
    if not any(display.is_short_job_id(i.partition(".")[0]) for i in given):
        return given
    letters = [str(letter["execution_id"]) for letter in client.iter_dead_letters(limit=100)]
    return [
        _one(i, (e for e in letters if display.matches_execution(i, e)), "execution")
        if display.is_short_job_id(i.partition(".")[0])
        else i
        for i in given
    ]
