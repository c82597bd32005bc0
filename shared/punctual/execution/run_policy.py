"""A job's policy on a scheduled run about to start: its catch-up window and its overlap rule.

Kept apart from the worker's state changes because these are decisions, not writes: given the job,
the execution and the moment, they say whether the run starts, is skipped (with the reason its
execution keeps) or waits behind the job's previous run (`buffer_one`). The worker carries them out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job
from punctual.domain.policies import Overlap

# A run buffered behind the job's previous one (overlap `buffer_one`) looks again after this long,
# doubling to the cap; after this many receives of its message it is skipped rather than left to use
# up the queue's receives (the previous run has then been under way for about twenty minutes).
BUFFER_RECHECK_SECONDS = 2
MAX_BUFFER_RECHECK_SECONDS = 60
MAX_BUFFER_RECEIVES = 20
# The longest a buffered run waits, its rechecks added up: a run still QUEUED from before that is not
# waiting in the buffer any more, and holds no later run back.
BUFFER_SPAN = timedelta(
    seconds=sum(
        min(MAX_BUFFER_RECHECK_SECONDS, BUFFER_RECHECK_SECONDS * 2 ** max(0, n - 1))
        for n in range(1, MAX_BUFFER_RECEIVES + 1)
    )
    + MAX_BUFFER_RECHECK_SECONDS
)


@dataclass(frozen=True)
class Skip:
    """Skip the run (SKIPPED), its execution keeping the reason."""

    reason: str


@dataclass(frozen=True)
class Buffer:
    """Hold the run back behind the job's previous one (`busy`), looking again after `delay_seconds`."""

    busy: Execution
    delay_seconds: float


def too_late(job: Job, execution: Execution, started: datetime) -> str | None:
    """Why a scheduled run starting at `started` is past the job's catch-up window
    (`max_lateness_seconds`), or None if it is not."""
    window = job.policy.max_lateness_seconds
    late = (started - execution.scheduled_at).total_seconds()
    if window is None or late <= window:
        return None
    return f"skipped: it would have started {late:.0f} s after its time, past the job's max_lateness_seconds ({window})"


def before_start(
    job: Job,
    execution: Execution,
    now: datetime,
    receive_count: int,
    earlier: Callable[[], Sequence[Execution]],
) -> Skip | Buffer | None:
    """The job's policy on its scheduled run about to start now: None to start it. `earlier` reads the
    job's runs before this one, only when its overlap rule needs them."""
    reason = too_late(job, execution, now)
    if reason is not None:
        return Skip(reason)
    policy = job.policy
    if not job.recurring or policy.overlap is Overlap.ALLOW:
        return None
    runs = earlier()
    busy = next((e for e in runs if still_under_way(e, now)), None)
    if busy is None:
        if policy.overlap is Overlap.BUFFER_ONE and (ahead := _buffered(runs, now)) is not None:
            # (the previous run has ended, and the run waiting for it will start on its next look:
            # this one would run beside it)
            return Skip(f"skipped: run {ahead.id} waits to start before it (overlap: buffer_one)")
        return None
    if policy.overlap is Overlap.SKIP:
        return Skip(f"skipped: the job's previous run ({busy.id}) was still under way (overlap: skip)")
    waiting = next((e for e in runs if e.status is ExecutionStatus.QUEUED and not e.manual), None)
    if waiting is not None:
        return Skip(
            f"skipped: run {waiting.id} already waits for the job's previous run (overlap: buffer_one)"
        )
    if receive_count >= MAX_BUFFER_RECEIVES:
        return Skip(f"skipped: the job's previous run ({busy.id}) was still under way after waiting")
    delay = min(MAX_BUFFER_RECHECK_SECONDS, BUFFER_RECHECK_SECONDS * 2 ** max(0, receive_count - 1))
    return Buffer(busy, delay)


def _buffered(runs: Sequence[Execution], now: datetime) -> Execution | None:
    """An earlier scheduled run of the job waiting in the buffer (QUEUED, within the buffer's span)."""
    return next(
        (
            e
            for e in runs
            if e.status is ExecutionStatus.QUEUED and not e.manual and now - e.scheduled_at <= BUFFER_SPAN
        ),
        None,
    )


def early_claim(job: Job | None, execution: Execution) -> bool:
    """Whether an execution whose message came before its instant may be claimed before it: its first
    scheduled attempt, unless its job's overlap policy must see, at the instant, whether the previous
    run is still under way."""
    if execution.attempts or execution.status is not ExecutionStatus.QUEUED:
        return False
    if job is None or execution.manual or not job.recurring:
        return True
    return job.policy.overlap is Overlap.ALLOW


def still_under_way(execution: Execution, now: datetime) -> bool:
    """Whether an earlier run of the job is under way: running on a live lease (a crashed worker's
    run, its lease run out, does not hold the job up), or between attempts."""
    if execution.status is ExecutionStatus.RETRYING:
        return True
    return execution.status is ExecutionStatus.RUNNING and (
        execution.lease_until is None or execution.lease_until > now
    )
