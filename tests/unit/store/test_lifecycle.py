"""The execution and job lifecycles as data (store/lifecycle.py): the conditions each transition
turns into, and the transitions it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import JobStatus
from punctual.store import lifecycle
from punctual.store.lifecycle import EXECUTION_TRANSITIONS, JOB_TRANSITIONS, IllegalTransition
from punctual_testing import expressions

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
S = ExecutionStatus


def copy(status: ExecutionStatus, *, lease: bool = True, attempts: int = 2) -> Execution:
    return Execution(
        id="job_1.1.1",
        job_id="job_1",
        owner="alice",
        scheduled_at=NOW,
        status=status,
        schedule_version=1,
        attempts=attempts,
        lease_until=NOW + timedelta(minutes=1) if lease and status is S.RUNNING else None,
    )


# Every execution transition's condition, as written to DynamoDB (from the copy given).
EXPECTED = {
    ("claim", S.QUEUED): "attribute_not_exists(pk) OR #st IN (:c_queued, :c_retrying) OR "
    "(#st = :c_running AND (lease_until < :c_now OR attribute_not_exists(lease_until)))",
    ("release_claim", S.RUNNING): "#st = :c_running AND lease_until = :c_lease",
    ("finish_attempt", S.RUNNING): "#st = :c_running AND attempts = :c_attempts",
    ("retry_later", S.RUNNING): "#st = :c_running AND attempts = :c_attempts",
    # A packed run's end, stored once: never over a claimed (leased) or ended execution.
    (
        "end_leased",
        S.QUEUED,
    ): "attribute_not_exists(pk) OR (#st = :c_queued AND attribute_not_exists(lease_until)) "
    "OR (#st = :c_running AND attribute_not_exists(lease_until))",
    ("skip", S.QUEUED): "attribute_not_exists(pk) OR #st = :c_queued",
    ("skip", S.PENDING): "attribute_not_exists(pk) OR #st = :c_pending",
    ("skip", S.RUNNING): "#st = :c_running AND lease_until = :c_lease",
    ("skip", S.RETRYING): "#st = :c_retrying AND attempts = :c_attempts",
    (
        "give_up",
        S.RUNNING,
    ): "attribute_not_exists(pk) OR NOT (#st IN (:c_cancelled, :c_failed, :c_succeeded))",
    ("requeue_dead_lettered", S.FAILED): "#st = :c_queued OR (#st = :c_failed AND dead_lettered = :c_yes)",
    ("still_under_way", S.RUNNING): "#st IN (:c_running, :c_retrying)",
}


@pytest.mark.parametrize(("name", "status"), sorted(EXPECTED))
def test_each_execution_transition_turns_into_its_condition(name: str, status: ExecutionStatus) -> None:
    # When the transition's condition is made from a copy in `status`
    condition = lifecycle.condition(EXECUTION_TRANSITIONS[name], copy=copy(status), now=NOW)
    # Then it is the expected one, its every placeholder given a value, and DynamoDB's grammar holds it
    assert condition.expression == EXPECTED[(name, status)]
    names = expressions.Names(condition.names, {k: {"S": str(v)} for k, v in condition.values.items()})
    expressions.condition(condition.expression, names)
    assert {t for t in expressions.tokens(condition.expression, members=True) if t.startswith(":")} == set(
        condition.values
    )


def test_every_execution_transition_is_pinned() -> None:
    assert {name for name, _ in EXPECTED} == set(EXECUTION_TRANSITIONS)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("complete", "attribute_exists(pk) AND #st = :c_active AND schedule_version = :c_sv"),
        ("resume_with_run", "attribute_exists(pk) AND #st = :c_paused AND schedule_version = :c_sv"),
        ("note_ran_while_paused", "attribute_exists(pk) AND #st = :c_paused AND paused_version = :c_sv"),
        ("still_paused", "attribute_exists(pk) AND #st = :c_paused"),
    ],
)
def test_each_job_transition_turns_into_its_condition(name: str, expected: str) -> None:
    condition = lifecycle.condition(JOB_TRANSITIONS[name], schedule_version=7)
    assert condition.expression == expected
    assert condition.values.get(":c_sv", 7) == 7


def test_a_skip_from_a_finished_copy_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        lifecycle.condition(EXECUTION_TRANSITIONS["skip"], copy=copy(S.SUCCEEDED))


def test_a_running_copy_without_a_lease_skips_only_an_item_without_one() -> None:
    condition = lifecycle.condition(EXECUTION_TRANSITIONS["skip"], copy=copy(S.RUNNING, lease=False))
    assert condition.expression == "#st = :c_running AND attribute_not_exists(lease_until)"


def test_only_transitions_from_absent_store_an_execution() -> None:
    storing = {name for name, t in EXECUTION_TRANSITIONS.items() if t.stores_absent(copy(S.QUEUED))}
    assert storing == {"claim", "skip", "give_up", "end_leased"}
    assert not EXECUTION_TRANSITIONS["skip"].stores_absent(copy(S.RUNNING))


@pytest.mark.parametrize(
    ("transition", "source", "target", "allowed"),
    [
        ("claim", None, S.RUNNING, True),
        ("claim", S.SUCCEEDED, S.RUNNING, False),
        ("finish_attempt", S.RUNNING, S.SUCCEEDED, True),
        ("finish_attempt", S.QUEUED, S.SUCCEEDED, False),
        ("finish_attempt", S.RUNNING, S.CANCELLED, False),
        ("give_up", S.SKIPPED, S.FAILED, True),  # (a SKIPPED one too: the handler reads it first)
        ("give_up", S.SUCCEEDED, S.FAILED, False),
        ("requeue_dead_lettered", S.FAILED, S.QUEUED, True),
        ("requeue_dead_lettered", S.CANCELLED, S.QUEUED, False),
    ],
)
def test_the_table_says_which_moves_are_allowed(
    transition: str, source: ExecutionStatus | None, target: ExecutionStatus, allowed: bool
) -> None:
    assert EXECUTION_TRANSITIONS[transition].allows(source, target) is allowed


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (JobStatus.CANCELLED, JobStatus.ACTIVE),
        (JobStatus.CANCELLED, JobStatus.PAUSED),
        (JobStatus.COMPLETED, JobStatus.PAUSED),
        (JobStatus.ACTIVE, JobStatus.COMPLETED),  # (completion is `complete`, with its outcome)
    ],
)
def test_a_job_status_change_the_lifecycle_does_not_list_is_refused(
    before: JobStatus, after: JobStatus
) -> None:
    with pytest.raises(IllegalTransition):
        lifecycle.check_status_change([before], after)


def test_the_job_status_changes_the_api_makes_are_listed() -> None:
    for before, after in [
        (JobStatus.ACTIVE, JobStatus.PAUSED),
        (JobStatus.PAUSED, JobStatus.ACTIVE),
        (JobStatus.PAUSED, JobStatus.COMPLETED),
        (JobStatus.COMPLETED, JobStatus.ACTIVE),
        (JobStatus.ACTIVE, JobStatus.CANCELLED),
        (JobStatus.PAUSED, JobStatus.PAUSED),
    ]:
        lifecycle.check_status_change([before], after)
