"""Starts before bookkeeping (punctual.starts_first): an ended attempt's outcome waits for the starts."""

from __future__ import annotations

import threading
import time

from punctual import call_class
from punctual.local.stack import api_invoker
from punctual.starts_first import StartsFirst


def waiting(starts: StartsFirst) -> threading.Event:
    """An outcome's wait, in a thread of its own: the event is set when it has gone."""
    written = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), written.set()), daemon=True).start()
    return written


def test_with_nothing_starting_an_outcome_goes_at_once() -> None:
    starts = StartsFirst(limit_seconds=10)
    done = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), done.set())).start()
    assert done.wait(5)


def test_an_outcome_waits_while_an_execution_is_starting_and_goes_when_it_has_started() -> None:
    starts = StartsFirst(limit_seconds=30)
    # Given an execution whose instant has come, not started yet
    leave = starts.enter()
    written = waiting(starts)
    # Then another's outcome waits
    assert not written.wait(0.1)
    # When it starts (its task begins), Then the outcome goes
    leave()
    assert written.wait(5)


def test_an_outcome_waits_no_longer_than_the_limit() -> None:
    starts = StartsFirst(limit_seconds=0.05)
    starts.enter()  # never leaves (a stuck read, say)
    written = threading.Event()
    threading.Thread(target=lambda: (starts.wait(), written.set())).start()
    assert written.wait(5)


def test_leaving_twice_counts_once() -> None:
    starts = StartsFirst()
    first, second = starts.enter(), starts.enter()
    first()
    first()  # (its task started, then its handler's finally leaves again)
    assert starts.starting == 1
    second()
    assert starts.starting == 0


def test_a_wait_can_be_given_a_shorter_limit_than_its_own() -> None:
    starts = StartsFirst(limit_seconds=30)
    starts.enter()  # never leaves
    waited = threading.Event()
    threading.Thread(target=lambda: (starts.wait(0.05), waited.set())).start()
    assert waited.wait(5)


def test_a_local_api_request_lets_the_executions_starting_go_first_and_then_runs() -> None:
    starts = StartsFirst(limit_seconds=30)
    calls: list[dict[str, object]] = []

    def handler(event: dict[str, object], context: object) -> dict[str, object]:
        calls.append(event)
        return {"statusCode": 201}

    invoke = api_invoker(handler, lambda: starts, yield_seconds=30, floor_per_second=0)
    # Given an execution whose instant has come, not started yet
    leave = starts.enter()
    answered: list[dict[str, object]] = []
    request = threading.Thread(target=lambda: answered.append(invoke({"path": "/jobs"})))
    request.start()
    # Then a request waits for it
    request.join(0.1)
    assert not calls
    # When it starts, Then the request runs
    leave()
    request.join(5)
    assert calls == [{"path": "/jobs"}] and answered == [{"statusCode": 201}]


def test_a_local_api_request_waits_no_longer_than_its_limit() -> None:
    starts = StartsFirst(limit_seconds=30)
    starts.enter()  # never leaves
    invoke = api_invoker(
        lambda event, context: {"statusCode": 200}, lambda: starts, yield_seconds=0.05, floor_per_second=0
    )
    assert invoke({}) == {"statusCode": 200}


def test_below_its_floor_of_requests_a_second_the_api_does_not_wait_for_the_starts() -> None:
    starts = StartsFirst(limit_seconds=30)
    leave = starts.enter()  # an execution starting, until told otherwise
    now = [100.0]
    invoke = api_invoker(
        lambda event, context: {"statusCode": 200},
        lambda: starts,
        yield_seconds=30,
        floor_per_second=3,
        monotonic=lambda: now[0],
    )
    # Given three requests let in within one second: none waited
    for _ in range(3):
        assert invoke({}) == {"statusCode": 200}
        now[0] += 0.3
    # Then a fourth within that second waits for the start
    answered: list[dict[str, object]] = []
    fourth = threading.Thread(target=lambda: answered.append(invoke({})))
    fourth.start()
    fourth.join(0.2)
    assert not answered
    leave()
    fourth.join(5)
    assert answered == [{"statusCode": 200}]
    # And once fewer than three were let in over the last second, one goes in at once again
    starts.enter()  # another, which never starts
    now[0] += 0.5  # the first two were let in 1.4 and 1.1 s ago
    started = time.monotonic()
    assert invoke({}) == {"statusCode": 200}
    assert time.monotonic() - started < 5


def test_the_api_s_calls_go_first_and_while_moto_s_calls_queue_at_its_prompt_pace_at_most() -> None:
    now = [100.0]
    slept: list[float] = []
    prompt: list[bool] = []
    congested = [False]

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    invoke = api_invoker(
        lambda event, context: prompt.append(call_class.is_prompt()) or {"statusCode": 200},
        lambda: StartsFirst(limit_seconds=30),
        lambda: congested[0],
        floor_per_second=100,
        prompt_per_second=2,
        monotonic=lambda: now[0],
        sleep=sleep,
    )
    # Given three requests within a second while nothing queues for moto: none waits
    for _ in range(3):
        assert invoke({}) == {"statusCode": 200}
        now[0] += 0.1
    assert slept == []
    # When calls queue for moto, Then a request past two in the last second waits until it is the
    # second (the second-last one let in leaves the window 1 s after it was let in)
    congested[0] = True
    assert invoke({}) == {"statusCode": 200}
    assert slept == [0.8]
    # And every request made its calls as prompt ones, the mark off the thread after each
    assert prompt == [True] * 4 and not call_class.is_prompt()


def test_a_wait_is_for_the_starts_under_way_when_it_began_not_for_those_after() -> None:
    starts = StartsFirst(limit_seconds=30)
    # Given an execution starting when an outcome begins to wait
    earlier = starts.enter()
    written = waiting(starts)
    assert not written.wait(0.1)
    # When another comes due meanwhile, and the first starts
    later = starts.enter()
    earlier()
    # Then the outcome goes, though the later one is still starting
    assert written.wait(5)
    assert starts.starting == 1
    later()
    assert starts.starting == 0


def test_a_wait_goes_only_once_every_earlier_start_has_left_in_any_order() -> None:
    starts = StartsFirst(limit_seconds=30)
    first, second, third = starts.enter(), starts.enter(), starts.enter()
    written = waiting(starts)
    # When they leave out of order, Then the wait goes only after the last of them
    third()
    second()
    assert not written.wait(0.1)
    first()
    assert written.wait(5)
