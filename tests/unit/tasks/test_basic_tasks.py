"""The basic task types: noop succeeds, sleep sleeps on the context's clock, fail fails."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy
from tests.unit.tasks.webhook import CLOCK_START, context


def run_basic(task_type: str, params: dict[str, Any], ctx: TaskContext) -> Any:
    return tasks.run(tasks.validate(TaskSpec(type=task_type, params=params), TaskPolicy()), ctx)


def test_noop_succeeds_at_once() -> None:
    ctx = context()
    assert run_basic("noop", {}, ctx) is None
    assert ctx.clock.now() == CLOCK_START


def test_sleep_sleeps_on_the_context_clock() -> None:
    # Given a manual clock / When a 42.5 s sleep runs under a 60 s timeout
    clock = ManualClock(CLOCK_START)
    result = run_basic("sleep", {"seconds": 42.5}, context(clock=clock, timeout_seconds=60))

    # Then it returns at once, the clock moved by exactly that much
    assert result == {"slept_seconds": 42.5}
    assert clock.now() == CLOCK_START + timedelta(seconds=42.5)


def test_sleep_longer_than_the_timeout_times_out_retryably_at_the_timeout() -> None:
    # Given a 100 s sleep under a 10 s timeout
    clock = ManualClock(CLOCK_START)
    with pytest.raises(TaskFailed) as caught:
        run_basic("sleep", {"seconds": 100}, context(clock=clock, timeout_seconds=10))

    # Then it fails retryably once the timeout has passed, not after the full sleep
    assert caught.value.retryable is True
    assert "timed out" in str(caught.value)
    assert clock.now() == CLOCK_START + timedelta(seconds=10)


@pytest.mark.parametrize(("params", "message"), [({}, "failed on purpose"), ({"message": "boom"}, "boom")])
def test_fail_always_fails_retryably(params: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskFailed) as caught:
        run_basic("fail", params, context())
    assert caught.value.retryable is True
    assert str(caught.value) == message
