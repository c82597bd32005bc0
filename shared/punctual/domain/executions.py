"""Executions: one run of a job at an instant, its statuses, its notifications' deliveries, its ids
(which carry its instant), how users see one claimed ahead of its instant, and a dead letter (one
its message gave up on). Plain Python, no AWS. Jobs: models.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from punctual.domain.policies import NotifyEvent
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms

# Time a run's lease (its own claim's, or its pack's) outlasts its timeout, before another worker may
# take it over.
LEASE_MARGIN = timedelta(seconds=30)


class ExecutionStatus(StrEnum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    # Not run by the job's own policy (too late for its catch-up window, or its previous run still
    # under way): the reason says which.
    SKIPPED = "SKIPPED"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATUSES

    @property
    def ran_to_end(self) -> bool:
        """Final, having run (SUCCEEDED or FAILED); a skipped execution (CANCELLED) did not."""
        return self in RAN_TO_END

    @property
    def under_way(self) -> bool:
        """Started and not ended: RUNNING, or RETRYING between attempts."""
        return self in UNDER_WAY


FINAL_STATUSES = frozenset(
    {ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED, ExecutionStatus.SKIPPED}
)
RAN_TO_END = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED})
UNDER_WAY = frozenset({ExecutionStatus.RUNNING, ExecutionStatus.RETRYING})


@dataclass(frozen=True)
class Execution:
    id: str
    job_id: str
    owner: str
    scheduled_at: datetime
    status: ExecutionStatus
    schedule_version: int
    manual: bool = False
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lateness_ms: int | None = None
    error: str | None = None
    result: Any = None
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    created_at: datetime | None = None
    # The version of the named task its (latest) attempt ran; None for a task given inline.
    task_version: int | None = None
    # The execution this one runs again (POST /jobs/{id}/executions/{execution_id}/retry).
    retry_of: str | None = None
    # Ended FAILED by the dead-letter handler: its message exhausted its deliveries.
    dead_lettered: bool = False
    # What became of its notifications (the job's `notify` rules), one per rule and event.
    deliveries: tuple[Delivery, ...] = ()
    # A one-time job's scheduled run under its pack's lease: the size its job's item would have once
    # completed, without the run (`JobStore.completed_bytes`, punctual.ports.jobs). Its end may then be stored on that
    # item, in the write that completes the job, instead of on an item of its own: one write, not two
    # (`ExecutionRepository.put_end`). None: on an item of its own.
    job_item_bytes: int | None = None
    # Its end was stored so, on its job's item with the job's completion: the job's consecutive
    # failures that write left (None: stored on an item of its own, or not yet).
    job_failures: int | None = None
    # A later run of its job waiting for it to end (overlap `buffer_one`): sent on at its end.
    waiter: Waiter | None = None


@dataclass(frozen=True)
class Waiter:
    """A scheduled run held back behind its job's previous one, as that run's item names it: what a
    work message needs to send it on the moment the previous run ends."""

    execution_id: str
    scheduled_at: datetime
    schedule_version: int


@dataclass(frozen=True)
class Delivery:
    """A notification of an execution's event to one target: where it stands."""

    event: NotifyEvent
    rule: int  # the index of the rule in the job's `notify`
    to: str
    status: DeliveryStatus
    attempts: int
    at: datetime  # of the last attempt
    error: str | None = None
    next_attempt_at: datetime | None = None


class DeliveryStatus(StrEnum):
    DELIVERED = "delivered"
    RETRYING = "retrying"  # the last attempt failed; another comes at `next_attempt_at`
    FAILED = "failed"  # given up on (out of attempts, or refused for good)


@dataclass(frozen=True)
class DeadLetter:
    """An execution the dead-letter handler ended FAILED (its message exhausted its deliveries), kept
    for its owner to list and redrive (`punctual.execution.dead_letters`)."""

    owner: str
    job_id: str
    execution_id: str
    scheduled_at: datetime
    schedule_version: int | None
    manual: bool
    dead_lettered_at: datetime
    error: str


# An execution's key, as a message names it: job id, instant, execution id.
ExecutionRef = tuple[str, datetime, str]


def execution_id_for(job_id: str, scheduled_at: datetime, schedule_version: int) -> str:
    """Deterministic, so that materialising the same occurrence twice yields the same execution."""
    return execution_id_at(job_id, instant_stamp(scheduled_at), schedule_version)


def instant_stamp(scheduled_at: datetime) -> str:
    """An instant as execution ids write it: made once for the many executions of one instant."""
    return f"{to_epoch_ms(scheduled_at):x}"


def execution_id_at(job_id: str, stamp: str, schedule_version: int) -> str:
    """`execution_id_for`, the instant given as its `instant_stamp`."""
    return f"{job_id}.{stamp}.{schedule_version}"


def manual_execution_id(job_id: str, scheduled_at: datetime, token: str) -> str:
    return f"{job_id}.{to_epoch_ms(scheduled_at):x}.r{token}"


def execution_as_seen(execution: Execution, now: datetime) -> Execution:
    """An execution as users see it at `now`. One claimed ahead of its instant is RUNNING in the store
    from its claim, its start not recorded (the write of its attempt's outcome records it): until its
    instant it has not started, so it shows as QUEUED, the claim's attempt not counted. Derived here
    rather than written at its start: a write at each start would cost one more per execution."""
    if not claimed_ahead(execution, now):
        return execution
    return replace(
        execution, status=ExecutionStatus.QUEUED, attempts=execution.attempts - 1, lease_until=None
    )


def claimed_ahead(execution: Execution, now: datetime) -> bool:
    """Whether the execution is claimed and waits for its instant, not started (`execution_as_seen`)."""
    return (
        execution.status is ExecutionStatus.RUNNING
        and execution.started_at is None
        and now < execution.scheduled_at
    )


def scheduled_at_of(job_id: str, execution_id: str) -> datetime | None:
    """The scheduled instant an execution id of this job carries (`execution_id_for`,
    `manual_execution_id`: `<job id>.<hex ms>.<rest>`), or None if it is not one of its ids."""
    head, dot, rest = execution_id.partition(".")
    if head != job_id or not dot:
        return None
    hex_ms, dot, tail = rest.partition(".")
    if not dot or not tail or not 0 < len(hex_ms) <= 12:
        return None
    try:
        return from_epoch_ms(int(hex_ms, 16))
    except (ValueError, OverflowError):
        return None
