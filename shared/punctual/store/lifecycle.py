"""Execution and job lifecycles as data: which transitions exist, from which statuses, under which
condition, and the DynamoDB condition expression each turns into.

A transition lists its sources: a status (or ABSENT: an execution not stored yet, which the scanner
never stores and whose first write stores it) and the requirement that holds with it. A requirement
says what else must still be as the copy being changed has it (the same claim, the same attempt),
so that a worker holding a stale copy cannot overwrite another's run. The repositories write
through `condition`: no status condition is spelled out anywhere else.

Job status changes through `JobRepository.update` are checked against `JOB_STATUS_CHANGES`; a change
it does not list is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import JobStatus
from punctual.platform.timefmt import to_epoch_ms

ABSENT = "ABSENT"
Source = ExecutionStatus | JobStatus | str


class Requirement(Enum):
    """What must hold beside the status, checked against the copy being changed."""

    NONE = "none"
    # A RUNNING item whose claim has run out (or that has no lease: none is written, but one would
    # otherwise stay stuck): another worker may take it over.
    LEASE_RUN_OUT = "lease run out"
    # The claim the copy holds: its lease (or none, for a copy without one).
    SAME_CLAIM = "same claim"
    # The attempt the copy is at.
    SAME_ATTEMPT = "same attempt"
    # No claim's lease on it: no worker claimed it on its own.
    NO_LEASE = "no lease"
    # Failed by the dead-letter handler.
    DEAD_LETTERED = "dead lettered"
    # A job still at the schedule version the caller gives.
    SAME_SCHEDULE = "same schedule"
    # A job paused from the schedule version the caller gives.
    PAUSED_FROM = "paused from"


class IllegalTransition(ValueError):
    """A transition the lifecycle does not allow: a bug in the caller, refused before any write."""


@dataclass(frozen=True)
class Transition:
    name: str
    sources: Mapping[Source, Requirement]
    targets: frozenset[Source]
    # Sources may also be every status but these (a status written by a newer version included).
    all_but: frozenset[Source] = field(default_factory=frozenset)
    # Only from the status of the copy being changed (and ABSENT if that copy was not started).
    as_read: bool = False

    def allows(self, source: Source | None, target: Source) -> bool:
        """Whether an item in `source` (None: absent) may go to `target` this way."""
        status = ABSENT if source is None else source
        if target not in self.targets:
            return False
        if self.all_but:
            return status not in self.all_but
        return status in self.sources

    def stores_absent(self, copy: Execution | None = None) -> bool:
        """Whether this write may find no item, and store it."""
        if ABSENT not in self.sources and not self.all_but:
            return False
        return not (self.as_read and copy is not None and copy.status.under_way)


_E = ExecutionStatus
_R = Requirement

EXECUTION_TRANSITIONS = {
    t.name: t
    for t in (
        # The worker's claim of an attempt (the scanner stores no execution: the first claim does).
        Transition(
            "claim",
            {ABSENT: _R.NONE, _E.QUEUED: _R.NONE, _E.RETRYING: _R.NONE, _E.RUNNING: _R.LEASE_RUN_OUT},
            frozenset({_E.RUNNING}),
        ),
        # A claim given back unused: waiting again, the attempt not counted.
        Transition("release_claim", {_E.RUNNING: _R.SAME_CLAIM}, frozenset({_E.QUEUED, _E.RETRYING})),
        Transition("finish_attempt", {_E.RUNNING: _R.SAME_ATTEMPT}, frozenset({_E.SUCCEEDED, _E.FAILED})),
        # The end of a first attempt run under its pack's lease, which stored nothing before it: the
        # pack's lease kept others off it, so it is not stored yet (or stored QUEUED, before its
        # message was sent), and no claim of its own holds it.
        Transition(
            "end_leased",
            {ABSENT: _R.NONE, _E.QUEUED: _R.NO_LEASE, _E.RUNNING: _R.NO_LEASE},
            frozenset({_E.SUCCEEDED, _E.FAILED, _E.RETRYING}),
        ),
        Transition("retry_later", {_E.RUNNING: _R.SAME_ATTEMPT}, frozenset({_E.RETRYING})),
        # An execution that must not run, only if it is still as the copy has it.
        Transition(
            "skip",
            {
                ABSENT: _R.NONE,
                _E.PENDING: _R.NONE,
                _E.QUEUED: _R.NONE,
                _E.RUNNING: _R.SAME_CLAIM,
                _E.RETRYING: _R.SAME_ATTEMPT,
            },
            frozenset({_E.CANCELLED, _E.SKIPPED}),
            as_read=True,
        ),
        # The dead-letter handler's end of an execution, whatever it was doing, unless it ended.
        Transition(
            "give_up",
            {},
            frozenset({_E.FAILED, _E.CANCELLED}),
            all_but=frozenset({_E.SUCCEEDED, _E.FAILED, _E.CANCELLED}),
        ),
        # A redrive: QUEUED already is a redrive interrupted before its message was sent.
        Transition(
            "requeue_dead_lettered",
            {_E.FAILED: _R.DEAD_LETTERED, _E.QUEUED: _R.NONE},
            frozenset({_E.QUEUED}),
        ),
        # Not a change: that a run is still under way, checked in a resume's transaction.
        Transition(
            "still_under_way",
            {_E.RUNNING: _R.NONE, _E.RETRYING: _R.NONE},
            frozenset({_E.RUNNING, _E.RETRYING}),
        ),
    )
}

_J = JobStatus

JOB_TRANSITIONS = {
    t.name: t
    for t in (
        # A job's last execution ended, on the schedule it belonged to (rescheduled meanwhile: a new
        # run is to come; paused or cancelled: it keeps that status).
        Transition("complete", {_J.ACTIVE: _R.SAME_SCHEDULE}, frozenset({_J.COMPLETED})),
        # A paused one-time job given back its run under way (`PauseProtocol.resume_with_run`).
        Transition("resume_with_run", {_J.PAUSED: _R.SAME_SCHEDULE}, frozenset({_J.ACTIVE})),
        # Not a change: a paused one-time job notes that its run ended (resuming must not repeat it).
        Transition("note_ran_while_paused", {_J.PAUSED: _R.PAUSED_FROM}, frozenset({_J.PAUSED})),
        # Not a change: the job is still paused (a run under way is cancelled for the pause).
        Transition("still_paused", {_J.PAUSED: _R.NONE}, frozenset({_J.PAUSED})),
    )
}

# The status changes a job's field update may make, from -> to (a field change keeps its status).
JOB_STATUS_CHANGES = frozenset(
    {
        (_J.ACTIVE, _J.PAUSED),
        (_J.PAUSED, _J.ACTIVE),
        # A resumed one-time job whose run ended, or whose instant passed, while it was paused.
        (_J.PAUSED, _J.COMPLETED),
        # A new schedule revives a completed job.
        (_J.COMPLETED, _J.ACTIVE),
        (_J.ACTIVE, _J.CANCELLED),
        (_J.PAUSED, _J.CANCELLED),
        (_J.COMPLETED, _J.CANCELLED),
    }
)


def check_status_change(from_: Iterable[JobStatus], to: JobStatus) -> None:
    """Refuse a job status change the lifecycle does not list."""
    for status in from_:
        if status is not to and (status, to) not in JOB_STATUS_CHANGES:
            raise IllegalTransition(f"a job cannot go from {status.value} to {to.value}")


@dataclass
class Condition:
    """A condition expression with the names and values it uses."""

    expression: str
    names: dict[str, str]
    values: dict[str, Any]


def condition(
    transition: Transition,
    *,
    copy: Execution | None = None,
    now: datetime | None = None,
    schedule_version: int | None = None,
    stored: bool = False,
) -> Condition:
    """The condition under which an item may take `transition`: `copy` is the execution as the caller
    read it (SAME_CLAIM, SAME_ATTEMPT, `as_read`), `now` the instant a lease must have run out by, and
    `schedule_version` the version a job must be at (SAME_SCHEDULE, PAUSED_FROM). `stored`: the caller
    read the item from the store, so it must still be there (not absent, even where the transition
    may store one)."""
    names = {"#st": "status"}
    values: dict[str, Any] = {}
    if transition.all_but:
        placeholders = [_value(values, status) for status in sorted(transition.all_but)]
        clause = f"NOT (#st IN ({', '.join(placeholders)}))"
        return Condition(f"attribute_not_exists(pk) OR {clause}", names, values)
    sources = dict(transition.sources)
    if transition.as_read:
        assert copy is not None, f"{transition.name} is made from a copy"
        if copy.status not in sources:
            raise IllegalTransition(f"{transition.name} is not allowed from {copy.status.value}")
        sources = {s: r for s, r in sources.items() if s == copy.status}
    plain = [s for s, r in sources.items() if r is _R.NONE and s != ABSENT]
    clauses: list[str] = []
    if transition.stores_absent(copy) and not stored:
        clauses.append("attribute_not_exists(pk)")
    if len(plain) == 1:
        clauses.append(f"#st = {_value(values, plain[0])}")
    elif plain:
        clauses.append(f"#st IN ({', '.join(_value(values, s) for s in plain)})")
    for status, requirement in sources.items():
        if requirement is _R.NONE or status == ABSENT:
            continue
        extra = _requirement(requirement, values, copy=copy, now=now, schedule_version=schedule_version)
        clauses.append(f"#st = {_value(values, status)} AND {extra}")
    # (DynamoDB refuses redundant parentheses: only a group of several is bracketed)
    if len(clauses) > 1:
        clauses = [f"({c})" if " AND " in c else c for c in clauses]
    expression = " OR ".join(clauses)
    if isinstance(next(iter(transition.targets)), JobStatus):
        # A job's write never stores one: it must exist (and be in a source status).
        expression = (
            f"attribute_exists(pk) AND ({expression})"
            if len(clauses) > 1
            else f"attribute_exists(pk) AND {expression}"
        )
    return Condition(expression, names, values)


def _value(values: dict[str, Any], status: Source) -> str:
    placeholder = f":c_{str(status).lower()}"
    values[placeholder] = str(status)
    return placeholder


def _requirement(
    requirement: Requirement,
    values: dict[str, Any],
    *,
    copy: Execution | None,
    now: datetime | None,
    schedule_version: int | None,
) -> str:
    if requirement is _R.LEASE_RUN_OUT:
        assert now is not None, "a lease runs out by an instant"
        values[":c_now"] = to_epoch_ms(now)
        return "(lease_until < :c_now OR attribute_not_exists(lease_until))"
    if requirement is _R.NO_LEASE:
        return "attribute_not_exists(lease_until)"
    if requirement is _R.SAME_CLAIM:
        assert copy is not None
        if copy.lease_until is None:
            return "attribute_not_exists(lease_until)"
        values[":c_lease"] = to_epoch_ms(copy.lease_until)
        return "lease_until = :c_lease"
    if requirement is _R.SAME_ATTEMPT:
        assert copy is not None
        values[":c_attempts"] = copy.attempts
        return "attempts = :c_attempts"
    if requirement is _R.DEAD_LETTERED:
        values[":c_yes"] = True
        return "dead_lettered = :c_yes"
    assert schedule_version is not None, f"{requirement.value} needs a schedule version"
    values[":c_sv"] = schedule_version
    if requirement is _R.SAME_SCHEDULE:
        return "schedule_version = :c_sv"
    return "paused_version = :c_sv"
