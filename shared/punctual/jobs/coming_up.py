"""An owner's scheduled runs in the coming hour, minute by minute (GET /coming-up): a burst is
visible before it comes. Computed from the owner's ACTIVE jobs and their schedules, as the jobs
would file their runs; no execution is read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from punctual.domain.cron.bounds import CronBoundExceeded
from punctual.domain.models import Job, JobStatus, next_after, queued_runs

HORIZON = timedelta(hours=1)
# Jobs read by one request: the owner's newest ACTIVE jobs, a page of 100 at a time.
MAX_JOBS = 500
PAGE_SIZE = 100
# Pages asked for at most. ACTIVE is no index's key (most jobs are ACTIVE or COMPLETED, and neither
# writes an index entry), so a page reads the owner's jobs newest first, up to the store's list read
# budget each, and an owner with many completed jobs would otherwise have the whole list read.
MAX_PAGES = 10
# Jobs named in one minute's entry, the busiest first: the count covers them all.
JOBS_A_MINUTE = 10


@dataclass(frozen=True)
class Minute:
    at: datetime  # the minute's start, UTC
    count: int
    jobs: list[tuple[str, str, int]]  # (job id, name, runs), the busiest first


def runs_within(job: Job, now: datetime, until: datetime) -> list[datetime]:
    """The ACTIVE job's scheduled runs before `until`, from its next one on: each as the job files it
    (spread by its flexible window, stopping at `policy.max_runs`). A run already due counts as now."""
    if job.status is not JobStatus.ACTIVE:
        return []
    runs: list[datetime] = []
    at = job.upcoming_run(now)
    if at is not None:
        # The runs from it to the one enqueued last are in the queue already, and counted in
        # runs_dispatched: the count goes on from before them, as next_after counts from the run it
        # is given.
        in_queue = len(queued_runs(job, at - timedelta(milliseconds=1)))
        job = replace(job, runs_dispatched=job.runs_dispatched - in_queue)
    while at is not None and at < until:
        runs.append(max(at, now))
        try:
            at = next_after(job, at)
        except CronBoundExceeded:
            # (a run that takes more than a request's bound to find is decades away, past the hour:
            # the scheduler finds it with a larger one, cron.CHAIN_BUDGET)
            break
        job = replace(job, runs_dispatched=job.runs_dispatched + 1)
    return runs


def by_minute(jobs: Iterable[Job], now: datetime, horizon: timedelta = HORIZON) -> list[Minute]:
    """Every minute from the current one to the horizon's (all of them, empty ones too), with the
    runs the jobs have due in it."""
    start = now.replace(second=0, microsecond=0)
    until = now + horizon
    per_minute: dict[datetime, Counter[str]] = {}
    names: dict[str, str] = {}
    for job in jobs:
        for run in runs_within(job, now, until):
            minute = run.replace(second=0, microsecond=0)
            per_minute.setdefault(minute, Counter())[job.id] += 1
            names[job.id] = job.name
    minutes: list[Minute] = []
    minute = start
    while minute < until:
        counts = per_minute.get(minute, Counter())
        busiest = [(job_id, names[job_id], n) for job_id, n in counts.most_common(JOBS_A_MINUTE)]
        minutes.append(Minute(minute, sum(counts.values()), busiest))
        minute += timedelta(minutes=1)
    return minutes
