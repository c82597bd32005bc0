"""The flexible window's spread: deterministic, never early, never past the next run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.domain.models import spread
from punctual.domain.policies import JobPolicy, check_policy
from punctual.domain.schedules import AtSchedule, CronSchedule, RateSchedule, next_run

START = datetime(2027, 3, 27, 22, 0, tzinfo=UTC)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["* * * * *", "*/2 * * * *", "0 * * * *", "30 2 * * *", "*/5 1-3 * * *"]),
    st.sampled_from(["UTC", "Europe/Paris", "Australia/Lord_Howe"]),
    st.integers(0, 900),
    st.text(alphabet="abcdef0123456789", min_size=4, max_size=12),
)
def test_spread_runs_keep_their_order_and_stay_between_nominal_runs(
    expression: str, zone: str, window: int, job_id: str
) -> None:
    schedule = CronSchedule(type="cron", expression=expression, timezone=zone)
    nominal = next_run(schedule, START)
    assert nominal is not None
    previous = None
    for _ in range(6):
        following = next_run(schedule, nominal + timedelta(milliseconds=1))
        assert following is not None
        moved = spread(job_id, schedule, nominal, None, window)
        assert moved is not None
        assert nominal <= moved < following
        assert (moved - nominal).total_seconds() <= window
        assert moved == spread(job_id, schedule, nominal, None, window)  # deterministic
        if previous is not None:
            assert moved > previous
        previous, nominal = moved, following


def test_spread_differs_between_jobs_and_leaves_one_time_and_zero_windows_alone() -> None:
    schedule = RateSchedule(type="rate", every_seconds=600, start_at=START)
    shifts = {spread(f"job-{i}", schedule, START, START, 300) for i in range(20)}
    assert len(shifts) > 10
    assert spread("a", schedule, START, START, 0) == START
    once = AtSchedule(type="at", at=START)
    assert spread("a", once, START, None, 300) == START


def test_recurring_only_policies() -> None:
    check_policy(JobPolicy(max_lateness_seconds=5), AtSchedule(type="at", at=START))
    for policy in (JobPolicy(overlap="skip"), JobPolicy(max_runs=1), JobPolicy(flexible_window_seconds=1)):
        try:
            check_policy(policy, AtSchedule(type="at", at=START))
        except ValueError as exc:
            assert str(exc).startswith("policy.")
        else:
            raise AssertionError(f"{policy} accepted on a one-time job")
