"""Bugs found in review, each pinned by the test that would have caught it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual.errors import RetryableStoreError
from punctual.models import marker_for
from punctual.timefmt import parse_rfc3339, to_rfc3339
from tests.faults import once
from tests.receiver import receiver
from tests.world import World


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def test_an_extra_run_then_pause_and_resume_keeps_the_scheduled_run(world: World) -> None:
    # Given a one-time job for 10 minutes ahead that was also run once by hand
    job = world.create({"type": "at", "at": at(world, 600)})
    world.api("POST", f"/jobs/{job['id']}/run")
    world.run_for(5)
    # When it is paused and resumed before its time
    world.api("POST", f"/jobs/{job['id']}/pause")
    resumed = world.api("POST", f"/jobs/{job['id']}/resume").body
    world.run_for(660)
    # Then its scheduled run still happened
    assert resumed["status"] == "ACTIVE"
    scheduled = [e for e in world.executions(job["id"]) if not e["manual"] and e["status"] == "SUCCEEDED"]
    assert [e["scheduled_at"] for e in scheduled] == [job["next_run_at"]]


def test_a_change_that_loses_a_race_leaves_no_run_behind(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two clients that read the same one-time job
    job = world.create({"type": "at", "at": at(world, 600)})
    stale = world.punctual.service.get("alice", job["id"])
    first = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": at(world, 700)}})
    # When the second changes it from its stale read
    monkeypatch.setattr(world.punctual.service, "get", lambda owner, job_id: stale)
    second = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": at(world, 800)}})
    monkeypatch.undo()
    world.run_for(900)
    # Then it is refused, and only the first change runs
    assert first.status == 200
    assert second.status == 409
    ran = [e["scheduled_at"] for e in world.executions(job["id"]) if e["status"] == "SUCCEEDED"]
    assert ran == [first.body["next_run_at"]]


def test_dispatching_a_marker_twice_never_resets_a_finished_execution(world: World) -> None:
    with receiver() as hook:
        # Given a job that ran
        job = world.create(
            {"type": "at", "at": at(world, 5)}, task={"type": "http", "params": {"url": hook.url}}
        )
        world.run_for(10)
        [done] = world.executions(job["id"])
        assert done["status"] == "SUCCEEDED"
        # When its marker is dispatched again (an overlapping tick, a retried hand-off)
        stored = world.store.jobs.get(job["id"])
        world.punctual.dispatcher.dispatch(
            [marker_for(job["id"], parse_rfc3339(done["scheduled_at"]), stored.schedule_version)]
        )
        world.run_for(10)
        # Then the execution stays finished and the task did not run again
        [again] = world.executions(job["id"])
        assert (again["status"], again["attempts"]) == ("SUCCEEDED", 1)
        assert len(hook.deliveries) == 1


def test_a_throttled_outcome_write_still_completes_the_job(world: World) -> None:
    job = world.create({"type": "now"})
    once(world.store.jobs, "complete", RetryableStoreError("ThrottlingException"))
    world.run_for(5)
    current = world.job(job["id"])
    assert current["status"] == "COMPLETED"
    assert current["last_execution"]["status"] == "SUCCEEDED"


def test_a_worker_dying_before_updating_the_job_is_made_good_on_redelivery(world: World) -> None:
    # Given a worker that dies after finishing the execution, before completing the job
    job = world.create({"type": "now"})
    real = world.store.jobs.complete

    def dies_once(*args: Any, **kwargs: Any) -> Any:
        world.store.jobs.complete = real
        raise RuntimeError("worker died")

    world.store.jobs.complete = dies_once
    # When the message comes back after its visibility timeout
    world.run_for(420, step=10)
    # Then the duplicate completes the job without running the task again
    [execution] = world.executions(job["id"])
    assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_an_old_run_finishing_does_not_complete_a_rescheduled_job(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose run is in progress
    job = world.create({"type": "now"}, task={"type": "sleep", "params": {"seconds": 30}})
    real_run = world.punctual.worker._run

    def reschedule_mid_run(*args: Any, **kwargs: Any) -> Any:
        world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": at(world, 3600)}})
        return real_run(*args, **kwargs)

    monkeypatch.setattr(world.punctual.worker, "_run", reschedule_mid_run)
    # When it is rescheduled while it runs, and the run then finishes
    world.run_for(60)
    # Then the job stays ACTIVE with its new run to come
    current = world.job(job["id"])
    assert current["status"] == "ACTIVE"
    assert current["next_run_at"] is not None


def test_a_cancel_between_the_workers_read_and_its_claim_still_stops_the_run(world: World) -> None:
    with receiver() as hook:
        job = world.create({"type": "now"}, task={"type": "http", "params": {"url": hook.url}})
        real_claim = world.store.executions.claim

        def cancel_then_claim(*args: Any, **kwargs: Any) -> Any:
            world.api("DELETE", f"/jobs/{job['id']}")
            return real_claim(*args, **kwargs)

        world.store.executions.claim = cancel_then_claim
        world.run_for(5)
        assert hook.deliveries == []
        assert world.executions(job["id"])[0]["status"] == "CANCELLED"


@pytest.mark.parametrize("instant", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_out_of_range_timestamps_are_refused_not_crashed_on(world: World, instant: str) -> None:
    answer = world.api("POST", "/jobs", {"task": {"type": "noop"}, "schedule": {"type": "at", "at": instant}})
    assert answer.status == 422
    assert "schedule.at" in answer.body["message"]
    preview = world.api(
        "POST", "/schedules/preview", {"schedule": {"type": "rate", "every_seconds": 60, "start_at": instant}}
    )
    assert preview.status == 422


def test_a_refused_request_does_not_use_up_its_idempotency_key(world: World) -> None:
    # (a yearly cron whose window holds no run: refused only once its runs are computed)
    window = {"start_at": at(world, 0), "end_at": at(world, 3600)}
    bad = {"task": {"type": "noop"}, "schedule": {"type": "cron", "expression": "0 0 1 1 *", **window}}
    good = {"task": {"type": "noop"}, "schedule": {"type": "now"}}
    assert world.api("POST", "/jobs", bad, headers={"Idempotency-Key": "k"}).status == 422
    assert world.api("POST", "/jobs", good, headers={"Idempotency-Key": "k"}).status == 201
