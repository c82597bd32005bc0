"""A one-time job paused while its run is under way: the run ends while the job is paused, and resuming
the job completes it instead of running it again — also once that execution has expired from the
history (DynamoDB's TTL, `retention_days` after it), when no execution is left to say it ran."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest

from tests.faults import Crash, once
from tests.integration.paused_runs import (
    at,
    dead_lettered,
    during_the_run,
    expire_executions,
    first_attempt_fails,
    pause,
    resume,
    stored_status,
)
from tests.world import World

# Lone executions going the claim path (a guarded one, a retry, a run by hand take it too).
pytestmark = pytest.mark.usefixtures("claim_path")


def test_a_run_that_ended_while_paused_is_not_repeated_once_its_history_expired(world: World) -> None:
    # Given a job to run now, paused while its task runs
    job = world.create({"type": "now"})
    with during_the_run(world, lambda: pause(world, job["id"])) as ran:
        world.run_for(10)
    assert ran == [job["id"]]
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert world.job(job["id"])["status"] == "PAUSED"
    # When it stays paused past the history's retention (its execution expires) and is resumed
    world.clock.advance(timedelta(days=31).total_seconds())
    expire_executions(job["id"])
    assert world.executions(job["id"]) == []
    with during_the_run(world, lambda: None) as ran_again:
        resumed = resume(world, job["id"])
        world.drain()  # (no scanner tick: its position would catch up on a month of minutes)
    # Then it completes without running again, and files nothing to run later
    assert resumed["status"] == "COMPLETED"
    assert resumed["next_run_at"] is None
    assert ran_again == []
    assert world.executions(job["id"]) == []
    assert world.unread_markers() == []


def test_a_run_that_ended_while_paused_completes_the_job_on_resume(world: World) -> None:
    # Given a job due in a minute, paused while its task runs (history kept)
    job = world.create(at(world, 60))
    with during_the_run(world, lambda: pause(world, job["id"])):
        world.run_for(90)
    # When it is resumed before its instant would have passed anyway... (a "now" job: it never passes)
    resumed = resume(world, job["id"])
    world.run_for(60)
    # Then it is complete, with the one run it had
    assert resumed["status"] == "COMPLETED"
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]


def test_a_paused_job_given_a_new_instant_runs_then_even_though_an_earlier_run_ended(world: World) -> None:
    # Given a job that ran once while being paused, then rescheduled (still paused) to a later instant
    job = world.create({"type": "now"})
    with during_the_run(world, lambda: pause(world, job["id"])):
        world.run_for(10)
    later = at(world, 300)
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": later})
    assert answer.status == 200 and answer.body["status"] == "PAUSED", answer.body
    # When it is resumed
    resumed = resume(world, job["id"])
    # Then the new instant stands: it runs then
    assert resumed["status"] == "ACTIVE"
    assert resumed["next_run_at"] == later["at"]
    world.run_for(400, step=5)
    executions = world.executions(job["id"])
    assert [e["status"] for e in executions] == ["SUCCEEDED", "SUCCEEDED"], executions
    assert executions[0]["scheduled_at"] == later["at"]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_run_superseded_before_the_pause_does_not_count_as_the_run(world: World) -> None:
    # Given a job whose run is under way when it is given a later instant, then paused
    job = world.create({"type": "now"})
    later = at(world, 600)

    def reschedule_then_pause() -> None:
        answer = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": later})
        assert answer.status == 200, answer.body
        pause(world, job["id"])

    with during_the_run(world, reschedule_then_pause):
        world.run_for(10)
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    # When it is resumed before the later instant
    resumed = resume(world, job["id"])
    # Then the later run is still to come: the run that ended was the superseded instant's
    assert resumed["status"] == "ACTIVE"
    assert resumed["next_run_at"] == later["at"]


def test_a_redelivered_message_notes_the_run_on_a_job_paused_since(world: World) -> None:
    # Given a worker that recorded the outcome and died before completing the job
    job = world.create({"type": "now"})
    calls = once(world.store.jobs, "complete", Crash("worker died"))
    world.run_for(5)
    assert stored_status(world, job["id"]) == "ACTIVE"
    # and the job paused before the message came back
    pause(world, job["id"])
    world.run_for(400, step=5)
    # When its history expires and it is resumed
    expire_executions(job["id"])
    resumed = resume(world, job["id"])
    # Then the redelivery had noted the run: nothing runs again
    assert calls["n"] >= 2
    assert resumed["status"] == "COMPLETED"


def test_the_dead_letter_handler_completes_the_job_of_an_execution_that_already_ended(world: World) -> None:
    # Given a job whose execution succeeded, the worker dying before it completed the job
    job = world.create({"type": "now"})
    real = world.store.jobs.complete
    world.store.jobs.complete = mock.Mock(side_effect=RuntimeError("worker died"))
    world.run_for(5)
    world.store.jobs.complete = real
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert stored_status(world, job["id"]) == "ACTIVE"
    # When its message reaches the dead-letter queue
    dead_lettered(world, execution)
    # Then the execution stands as it ended, and the job completes
    [after] = world.executions(job["id"])
    assert after["status"] == "SUCCEEDED"
    assert stored_status(world, job["id"]) == "COMPLETED"


def test_a_skipped_execution_does_not_count_as_a_run(world: World) -> None:
    # Given a job to run now, paused before its message reached a worker (the execution is skipped:
    # CANCELLED)
    job = world.create({"type": "now"})
    pause(world, job["id"])
    world.run_for(10)
    [skipped] = world.executions(job["id"])
    assert skipped["status"] == "CANCELLED"
    # When that message comes back (from the dead-letter queue) while the job is still paused
    dead_lettered(world, skipped)
    # Then the job is not taken for one that ran: resumed, it runs
    assert resume(world, job["id"])["status"] == "ACTIVE"
    world.run_for(20)
    assert world.job(job["id"])["status"] == "COMPLETED"
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED", "CANCELLED"]


def test_a_job_resumed_while_its_run_is_still_under_way_runs_once(world: World) -> None:
    # Given a job to run now, paused and resumed while its task runs
    job = world.create({"type": "now"})
    resumed: list[dict[str, Any]] = []

    def pause_and_resume() -> None:
        pause(world, job["id"])
        resumed.append(resume(world, job["id"]))

    with during_the_run(world, pause_and_resume) as ran:
        world.run_for(120)
    # Then the run under way stands for the job's run: it is not run again, and completes the job
    assert resumed[0]["status"] == "ACTIVE"
    assert resumed[0]["next_run_at"] == job["next_run_at"]  # the run's instant, as before the pause
    assert ran == [job["id"]]
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_retrying_run_goes_on_once_its_job_is_resumed(world: World) -> None:
    # Given a job whose first attempt fails (to be retried) while the job is paused and resumed
    job = world.create({"type": "now"}, retry={"max_attempts": 3})

    def pause_and_resume() -> None:
        pause(world, job["id"])
        resume(world, job["id"])

    with first_attempt_fails(world, pause_and_resume) as attempts:
        world.run_for(300, step=5)
    # Then its retry runs, and completes the job: one execution, two attempts
    assert attempts == [1, 2]
    [execution] = world.executions(job["id"])
    assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 2)
    assert world.job(job["id"])["status"] == "COMPLETED"
