"""Domain rules: retry backoff, skipping stale work, completing jobs, first and next runs, ids."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from punctual.domain.executions import Execution, ExecutionStatus, execution_as_seen, execution_id_for
from punctual.domain.models import (
    SCHEDULE_ADAPTER,
    DueMarker,
    Job,
    JobStatus,
    Outcome,
    TaskSpec,
    anchor_for,
    completes_job,
    dispatched_runs,
    first_run,
    in_flight,
    job_as_seen,
    next_after,
    skip_reason,
    spread,
    storing,
)
from punctual.domain.policies import JobPolicy, RetryPolicy

NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def schedule(payload: dict[str, Any]) -> Any:
    return SCHEDULE_ADAPTER.validate_python(payload)


def job(schedule_payload: dict[str, Any] | None = None, **changes: Any) -> Job:
    sched = schedule(schedule_payload or {"type": "cron", "expression": "0 * * * *"})
    base = Job(
        id="job1",
        owner="alice",
        name="hourly",
        status=JobStatus.ACTIVE,
        task=TaskSpec(type="noop"),
        schedule=sched,
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=NOW,
        updated_at=NOW,
        schedule_version=3,
        anchor_at=anchor_for(sched, NOW),
    )
    return replace(base, **changes)


def execution(**changes: Any) -> Execution:
    base = Execution(
        id="job1.exec",
        job_id="job1",
        owner="alice",
        scheduled_at=NOW,
        status=ExecutionStatus.QUEUED,
        schedule_version=3,
    )
    return replace(base, **changes)


def marker(**changes: Any) -> DueMarker:
    base = DueMarker(job_id="job1", execution_id="job1.exec", scheduled_at=NOW, schedule_version=3)
    return replace(base, **changes)


# --- RetryPolicy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "attempt", "ceiling"),
    [
        (RetryPolicy(backoff_seconds=2, max_backoff_seconds=300), 1, 2),
        (RetryPolicy(backoff_seconds=2, max_backoff_seconds=300), 2, 4),
        (RetryPolicy(backoff_seconds=2, max_backoff_seconds=300), 5, 32),
        (RetryPolicy(backoff_seconds=2, max_backoff_seconds=300), 9, 300),  # 512 capped
        (RetryPolicy(backoff_seconds=10, max_backoff_seconds=15), 2, 15),
        (RetryPolicy(backoff_seconds=0, max_backoff_seconds=300), 4, 0),
    ],
)
def test_retry_delay_spans_half_to_all_of_the_capped_exponential_ceiling(
    policy: RetryPolicy, attempt: int, ceiling: float
) -> None:
    # Given a random source at its extremes / When the delay after a failed attempt is drawn
    lowest = policy.delay_after(attempt, _FixedRandom(0.0))
    highest = policy.delay_after(attempt, _FixedRandom(0.999999999))

    # Then it goes from half the ceiling (fixed part) to the ceiling (all jitter)
    assert lowest == pytest.approx(ceiling / 2)
    assert highest == pytest.approx(ceiling)


class _FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@settings(max_examples=300)
@given(
    backoff=st.floats(0, 3600),
    cap=st.floats(0, 12 * 3600),
    attempt=st.integers(1, 64),
    seed=st.integers(0, 2**32),
)
def test_retry_delay_is_bounded_by_the_capped_exponential_ceiling(
    backoff: float, cap: float, attempt: int, seed: int
) -> None:
    # Given any valid policy, any failed attempt and any random source
    policy = RetryPolicy(max_attempts=10, backoff_seconds=backoff, max_backoff_seconds=cap)
    ceiling = min(cap, backoff * 2 ** (attempt - 1))

    # When the delay is drawn
    delay = policy.delay_after(attempt, random.Random(seed))

    # Then it lies in [ceiling/2, ceiling], and the same seed draws the same delay
    assert ceiling / 2 <= delay <= ceiling
    assert policy.delay_after(attempt, random.Random(seed)) == delay


def test_retry_delays_are_jittered_not_identical() -> None:
    # Equal jitter exists so that many executions failing together do not retry in lockstep.
    policy = RetryPolicy(backoff_seconds=10, max_backoff_seconds=300)
    rng = random.Random(7)
    assert len({policy.delay_after(3, rng) for _ in range(20)}) > 10


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_attempts", 0), ("max_attempts", 11), ("backoff_seconds", -1), ("max_backoff_seconds", 43201)],
)
def test_retry_policy_out_of_range_is_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as caught:
        RetryPolicy.model_validate({field: value})
    assert caught.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_attempts", "3", "not a string"),
        ("max_attempts", 3.0, "expected an integer, not 3.0"),
        ("max_attempts", 3.5, "expected an integer"),
        ("max_attempts", True, "not a boolean"),
        ("backoff_seconds", "2", "not a string"),
        ("backoff_seconds", False, "not a boolean"),
        ("max_backoff_seconds", "1e2", "not a string"),
    ],
)
def test_retry_policy_takes_json_numbers_only(field: str, value: Any, says: str) -> None:
    # A number in a string, a boolean, or a float for an integer is the client's mistake, not a number
    with pytest.raises(ValidationError) as caught:
        RetryPolicy.model_validate({field: value})
    [error] = caught.value.errors()
    assert error["loc"] == (field,) and says in error["msg"]


def test_retry_policy_float_fields_take_integers_and_read_back_as_stored() -> None:
    policy = RetryPolicy.model_validate({"max_attempts": 4, "backoff_seconds": 1, "max_backoff_seconds": 2.5})
    assert (policy.backoff_seconds, policy.max_backoff_seconds) == (1.0, 2.5)
    # (as the store keeps it: JSON, read back with the same model)
    assert RetryPolicy.model_validate_json(policy.model_dump_json()) == policy


def test_retry_policy_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError) as caught:
        RetryPolicy.model_validate({"max_attempts": 3, "jitter": "full"})
    assert caught.value.errors()[0]["loc"] == ("jitter",)


# --- skip_reason ----------------------------------------------------------------------------------


@pytest.mark.parametrize("record", [marker, execution], ids=["marker", "execution"])
@pytest.mark.parametrize(
    ("the_job", "record_changes", "reason_part"),
    [
        pytest.param(None, {}, "no longer exists", id="job-deleted"),
        pytest.param(job(status=JobStatus.CANCELLED), {}, "cancelled", id="cancelled"),
        pytest.param(job(status=JobStatus.CANCELLED), {"manual": True}, "cancelled", id="cancelled-manual"),
        pytest.param(job(status=JobStatus.PAUSED), {}, "paused", id="paused"),
        pytest.param(job(), {"schedule_version": 2}, "superseded", id="older-schedule-version"),
        pytest.param(job(), {"schedule_version": 2, "manual": True}, None, id="manual-ignores-version"),
        pytest.param(job(), {}, None, id="active-current"),
        pytest.param(job(status=JobStatus.COMPLETED), {"manual": True}, None, id="completed-manual"),
    ],
)
def test_skip_reason(
    the_job: Job | None, record_changes: dict[str, Any], reason_part: str | None, record: Any
) -> None:
    # Given a job (or none) and a marker or execution of it / When asked whether it may run
    reason = skip_reason(the_job, record(**record_changes))

    # Then it runs (None) or is skipped for the stated reason
    if reason_part is None:
        assert reason is None
    else:
        assert reason is not None and reason_part in reason


@pytest.mark.parametrize("record", [marker, execution], ids=["marker", "execution"])
def test_manual_run_requested_before_a_pause_does_not_run_while_paused(record: Any) -> None:
    # Given a manual run queued, then the job paused
    paused = job(status=JobStatus.PAUSED, schedule_version=4)

    # When the worker checks it / Then it is skipped: nothing runs until resumed
    assert skip_reason(paused, record(manual=True)) is not None


# --- completes_job --------------------------------------------------------------------------------

ONE_TIME = {"type": "at", "at": "2026-12-01T10:00:00Z"}


@pytest.mark.parametrize(
    ("the_job", "the_execution", "completes"),
    [
        pytest.param(job(ONE_TIME), execution(), True, id="one-time-scheduled"),
        pytest.param(job({"type": "now"}), execution(status=ExecutionStatus.FAILED), True, id="now-failed"),
        pytest.param(job(ONE_TIME), execution(manual=True), False, id="one-time-manual"),
        pytest.param(job(), execution(), False, id="recurring-not-final"),
        pytest.param(job(final_execution_id="job1.exec"), execution(), True, id="recurring-final"),
        pytest.param(job(final_execution_id="job1.other"), execution(), False, id="recurring-other-final"),
        pytest.param(
            job(final_execution_id="job1.exec"), execution(manual=True), False, id="recurring-final-id-manual"
        ),
    ],
)
def test_completes_job(the_job: Job, the_execution: Execution, completes: bool) -> None:
    assert completes_job(the_job, the_execution) is completes


# --- first_run / next_after -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule_payload", "expected"),
    [
        pytest.param({"type": "now"}, NOW, id="now"),
        pytest.param({"type": "at", "at": "2026-12-01T10:00:00+01:00"}, NOW, id="at-is-now"),
        pytest.param(
            {"type": "at", "at": "2026-12-24T18:00:00Z"},
            datetime(2026, 12, 24, 18, tzinfo=UTC),
            id="at-future",
        ),
        pytest.param({"type": "at", "at": "2026-12-01T08:58:00Z"}, NOW, id="at-just-past-runs-now"),
        pytest.param(
            {"type": "cron", "expression": "30 10 * * *", "timezone": "Europe/Paris"},
            datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
            id="cron-in-zone",
        ),
        pytest.param({"type": "cron", "expression": "0 9 * * *"}, NOW, id="cron-due-exactly-now"),
        pytest.param(
            {"type": "rate", "every_seconds": 600}, NOW + timedelta(minutes=10), id="rate-one-period-on"
        ),
        pytest.param(
            {"type": "rate", "every_seconds": 3600, "start_at": "2026-12-01T06:30:00Z"},
            datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
            id="rate-past-start-stays-on-grid",
        ),
        pytest.param(
            {"type": "cron", "expression": "0 * * * *", "end_at": "2026-11-30T00:00:00Z"},
            None,
            id="cron-ended",
        ),
        pytest.param(
            {"type": "rate", "every_seconds": 3600, "end_at": "2026-12-01T09:30:00Z"},
            None,
            id="rate-ends-first",
        ),
    ],
)
def test_first_run(schedule_payload: dict[str, Any], expected: datetime | None) -> None:
    # Given a schedule created (or resumed) at NOW / When its first run is computed
    sched = schedule(schedule_payload)
    result = first_run(sched, NOW, anchor_for(sched, NOW))

    # Then it is the expected instant, never before NOW, or None when nothing is left
    assert result == expected
    assert result is None or result >= NOW


@pytest.mark.parametrize(
    ("schedule_payload", "scheduled_at", "expected"),
    [
        pytest.param({"type": "now"}, NOW, None, id="now-has-no-next"),
        pytest.param(ONE_TIME, NOW, None, id="at-has-no-next"),
        pytest.param(
            {"type": "cron", "expression": "0 * * * *"},
            NOW,
            NOW + timedelta(hours=1),
            id="cron-strictly-after",
        ),
        pytest.param(
            {"type": "rate", "every_seconds": 600},
            NOW + timedelta(minutes=10),
            NOW + timedelta(minutes=20),
            id="rate-next-period",
        ),
        pytest.param(
            {"type": "cron", "expression": "0 * * * *", "end_at": "2026-12-01T09:30:00Z"},
            NOW,
            None,
            id="cron-ended",
        ),
    ],
)
def test_next_after(
    schedule_payload: dict[str, Any], scheduled_at: datetime, expected: datetime | None
) -> None:
    assert next_after(job(schedule_payload), scheduled_at) == expected


def test_next_after_a_rate_run_stays_on_the_anchor_grid_even_if_asked_late() -> None:
    # Given an every-10-minutes job anchored at 09:10 / When the 09:30 run's successor is asked
    the_job = job({"type": "rate", "every_seconds": 600})
    assert the_job.anchor_at == NOW + timedelta(minutes=10)

    # Then it is 09:40, a grid point, not 09:30 + anything else
    assert next_after(the_job, NOW + timedelta(minutes=30)) == NOW + timedelta(minutes=40)


# --- execution ids --------------------------------------------------------------------------------


def test_execution_id_is_deterministic_per_job_instant_and_version() -> None:
    # The same occurrence materialised twice (a scanner retry) must be one execution.
    a = execution_id_for("job1", NOW, 3)
    assert execution_id_for("job1", NOW, 3) == a
    assert execution_id_for("job1", NOW + timedelta(milliseconds=1), 3) != a
    assert execution_id_for("job1", NOW, 4) != a
    assert execution_id_for("job2", NOW, 3) != a


@given(
    instant=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
    version=st.integers(1, 10**6),
)
def test_execution_id_ignores_sub_millisecond_parts_and_zone(instant: datetime, version: int) -> None:
    # Given the same instant stored at millisecond precision, or written in another zone
    truncated = instant.replace(microsecond=instant.microsecond // 1000 * 1000)
    elsewhere = instant.astimezone(ZoneInfo("Asia/Kolkata"))

    # Then the execution id is the same
    assert execution_id_for("j", instant, version) == execution_id_for("j", truncated, version)
    assert execution_id_for("j", instant, version) == execution_id_for("j", elsewhere, version)


def test_a_job_is_shown_with_the_run_that_ended_before_its_own_write() -> None:
    at = {"type": "at", "at": "2026-12-01T10:00:00Z"}
    ended = execution(
        status=ExecutionStatus.FAILED,
        finished_at=NOW + timedelta(hours=1),
        scheduled_at=NOW + timedelta(hours=1),
    )
    one_time = job(at, last_execution=ended)
    # A one-time job whose only run has ended shows completed, with that run as its outcome
    seen = job_as_seen(one_time)
    assert seen.status is JobStatus.COMPLETED and seen.next_run_at is None
    assert seen.outcome is not None
    assert (seen.outcome.status, seen.outcome.execution_id, seen.outcome.consecutive_failures) == (
        ExecutionStatus.FAILED,
        ended.id,
        1,
    )
    # and once that is written, as it is
    assert job_as_seen(seen) == seen
    # A run by hand, or of an older schedule version, records an outcome but completes nothing
    for other in (replace(ended, manual=True), replace(ended, schedule_version=2)):
        shown = job_as_seen(job(at, last_execution=other))
        assert shown.status is JobStatus.ACTIVE and shown.outcome is not None
    # and a job that recorded a run ending later keeps its own
    later = Outcome(ExecutionStatus.SUCCEEDED, NOW + timedelta(hours=2), "job1.later", NOW)
    assert job_as_seen(job(at, last_execution=ended, outcome=later)).outcome == later


def test_a_run_claimed_ahead_of_its_instant_is_shown_queued_until_it() -> None:
    claimed = execution(status=ExecutionStatus.RUNNING, attempts=1, lease_until=NOW + timedelta(minutes=2))
    waiting = execution_as_seen(claimed, claimed.scheduled_at - timedelta(seconds=1))
    assert (waiting.status, waiting.attempts, waiting.lease_until) == (ExecutionStatus.QUEUED, 0, None)
    assert execution_as_seen(claimed, claimed.scheduled_at) == claimed
    started = replace(claimed, started_at=claimed.scheduled_at - timedelta(seconds=1))
    assert execution_as_seen(started, claimed.scheduled_at - timedelta(seconds=1)) == started


def test_a_marker_that_does_not_match_its_job_waits_only_while_its_request_may_still_store_it() -> None:
    filed = NOW + timedelta(seconds=5)
    marker = DueMarker("job1", "job1.x.9", NOW + timedelta(minutes=2), 9, filed_at=filed)
    soon_after = filed + timedelta(seconds=1)
    # The job not stored yet, or written last before the marker was filed (a resume's write pending)
    assert storing(None, marker, soon_after)
    assert storing(job(status=JobStatus.PAUSED, updated_at=NOW), marker, soon_after)
    # Written since the marker was filed: superseded
    assert not storing(job(updated_at=filed + timedelta(milliseconds=1)), marker, soon_after)
    # Its request has ended (API Gateway gave up on it): dropped
    assert not storing(None, marker, filed + timedelta(seconds=30))
    # Filed by a dispatch, or before markers said when they were filed: as before
    assert not storing(None, replace(marker, filed_at=None), soon_after)


def test_the_runs_a_change_is_recorded_against_are_those_a_message_may_carry_not_started() -> None:
    ahead = timedelta(seconds=200)
    soon, far = NOW + timedelta(seconds=100), NOW + timedelta(seconds=300)
    # A one-time job's run within how far ahead messages are sent, or just past
    assert dispatched_runs(job(next_run_at=soon), NOW, ahead) == [soon]
    assert dispatched_runs(job(next_run_at=NOW - timedelta(seconds=30)), NOW, ahead) == [
        NOW - timedelta(seconds=30)
    ]
    # not one further off, nor one long past (a pack that late reads its jobs again)
    assert dispatched_runs(job(next_run_at=far), NOW, ahead) == []
    assert dispatched_runs(job(next_run_at=NOW - timedelta(minutes=5)), NOW, ahead) == []
    # A recurring job's occurrence enqueued last, beside its next
    assert dispatched_runs(job(next_run_at=far, queued_run_at=NOW), NOW, ahead) == [NOW]
    assert dispatched_runs(job(next_run_at=soon, queued_run_at=NOW), NOW, ahead) == [NOW, soon]


def test_every_occurrence_up_to_the_one_enqueued_last_may_be_in_a_message() -> None:
    # Given an every-minute job whose scanner sent three occurrences ahead: queued_run_at names the last
    every_minute = job({"type": "rate", "every_seconds": 60}, anchor_at=NOW + timedelta(seconds=30))
    queued = replace(
        every_minute, queued_run_at=NOW + timedelta(seconds=150), next_run_at=NOW + timedelta(seconds=210)
    )
    first, second, third = (NOW + timedelta(seconds=s) for s in (30, 90, 150))
    # Then a change records itself against each of them (and the next run), not only the last
    assert dispatched_runs(queued, NOW, timedelta(seconds=200)) == [first, second, third]
    assert dispatched_runs(queued, NOW, timedelta(seconds=300)) == [
        first,
        second,
        third,
        NOW + timedelta(seconds=210),
    ]
    # and the next run users see is the first of them, then each in turn until the last has come
    assert queued.upcoming_run(NOW) == first
    assert queued.upcoming_run(first) == second
    assert queued.upcoming_run(third - timedelta(milliseconds=1)) == third
    assert queued.upcoming_run(third) == NOW + timedelta(seconds=210)


def test_a_recurring_run_under_way_shows_while_a_later_one_is_queued_too() -> None:
    # Given an every-minute job with its 09:00:30 and 09:01:30 runs sent, at 09:00:40
    every_minute = job({"type": "rate", "every_seconds": 60}, anchor_at=NOW + timedelta(seconds=30))
    queued = replace(
        every_minute, queued_run_at=NOW + timedelta(seconds=90), next_run_at=NOW + timedelta(seconds=150)
    )
    running = in_flight(queued, NOW + timedelta(seconds=40))
    # Then the 09:00:30 run is the one under way
    assert running is not None and running.scheduled_at == NOW + timedelta(seconds=30)
    assert running.id == execution_id_for("job1", NOW + timedelta(seconds=30), 3)
    # and before its instant none is
    assert in_flight(queued, NOW + timedelta(seconds=29)) is None


def test_no_run_from_before_a_jobs_schedule_began_counts_as_queued() -> None:
    # Given an every-minute cron job created at 09:00:20, its 09:01 run in the queue
    created = NOW + timedelta(seconds=20)
    fresh = job(
        {"type": "cron", "expression": "* * * * *"},
        created_at=created,
        queued_run_at=NOW + timedelta(minutes=1),
        next_run_at=NOW + timedelta(minutes=2),
    )
    # Then its 09:00 occurrence, from before its creation, is neither under way nor next
    assert in_flight(fresh, created + timedelta(seconds=1)) is None
    assert fresh.upcoming_run(created + timedelta(seconds=1)) == NOW + timedelta(minutes=1)
    assert dispatched_runs(fresh, created, timedelta(minutes=3)) == [
        NOW + timedelta(minutes=1),
        NOW + timedelta(minutes=2),
    ]
    # and likewise from before it was resumed (or given a new schedule) at 09:00:20
    resumed = replace(fresh, created_at=NOW - timedelta(days=1), runs_since=created)
    assert in_flight(resumed, created + timedelta(seconds=1)) is None
    assert resumed.upcoming_run(created + timedelta(seconds=1)) == NOW + timedelta(minutes=1)
    # and a spread job's occurrence from before its creation is not its next run, though its spread
    # instant comes after it
    spread_job = replace(fresh, policy=JobPolicy(flexible_window_seconds=50))
    first = spread("job1", spread_job.schedule, NOW + timedelta(minutes=1), None, 50)
    queued = replace(spread_job, queued_run_at=first)
    assert queued.upcoming_run(created) == first


def test_the_first_queued_run_of_a_spread_job_is_its_spread_instant() -> None:
    # Given an hourly job spread over a 15-minute window, its 10:00 and 11:00 runs in the queue
    hourly = job(policy=JobPolicy(flexible_window_seconds=900))
    ten = spread(hourly.id, hourly.schedule, NOW + timedelta(hours=1), None, 900)
    eleven = spread(hourly.id, hourly.schedule, NOW + timedelta(hours=2), None, 900)
    assert ten is not None and eleven is not None and ten > NOW + timedelta(hours=1)
    queued = replace(hourly, queued_run_at=eleven, next_run_at=NOW + timedelta(hours=3))
    # Then the next run, seen at 10:00 before its spread instant, is that instant, not 11:00's
    assert queued.upcoming_run(NOW + timedelta(hours=1)) == ten
    assert queued.upcoming_run(ten) == eleven
    assert dispatched_runs(queued, NOW + timedelta(hours=1), timedelta(minutes=90)) == [ten, eleven]
