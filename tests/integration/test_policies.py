"""Job policies through the API, scanner, queue and worker: catch-up window, overlap, flexible window,
run limit."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.errors import LostRace
from punctual.domain.executions import ExecutionStatus, execution_id_for
from punctual.domain.models import Job, spread
from punctual.domain.work import WorkItem
from punctual.execution.run_records import unstored_execution
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from tests.world import World

EVERY_MINUTE = {"type": "cron", "expression": "* * * * *"}


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def _by_status(world: World, job_id: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in world.executions(job_id):
        out.setdefault(e["status"], []).append(e)
    return out


def _stored_job(world: World, job_id: str) -> Job:
    job = world.store.jobs.get(job_id)
    assert job is not None
    return job


def _first_run_taken(world: World, created: dict, minutes: float = 10) -> None:
    """The job's first run, enqueued by the scanner, is claimed by a worker elsewhere that is still
    at it at its instant (its lease live for `minutes`)."""
    first = created["next_run_at"]
    world.clock.advance((parse_rfc3339(first) - world.clock.now()).total_seconds() - 30)
    world.tick()
    world.clock.advance(30)
    _hold_running(world, created["id"], first, minutes)


def _hold_running(world: World, job_id: str, scheduled_at: str, minutes: float) -> None:
    job = _stored_job(world, job_id)
    when = parse_rfc3339(scheduled_at)
    item = WorkItem(
        job_id, execution_id_for(job_id, when, job.schedule_version), when, job.schedule_version, False
    )
    execution = unstored_execution(item, job, world.clock.now(), world.store.retention)
    assert execution is not None
    now = world.clock.now()
    world.store.executions.claim(
        execution, now=now, lease_until=now + timedelta(minutes=minutes), lateness_ms=0
    )


def test_a_run_later_than_its_catch_up_window_is_skipped_not_run(world: World) -> None:
    # Given a one-time job 5 minutes ahead that may start at most 60 s late, and one without a window
    strict = world.create({"type": "at", "at": at(world, 300)}, policy={"max_lateness_seconds": 60})
    lenient = world.create({"type": "at", "at": at(world, 300)})
    assert strict["policy"]["max_lateness_seconds"] == 60
    # When the scheduler, running, goes down past its instant (nothing ticks or polls for 10 minutes)
    world.run_for(30)
    world.clock.advance(600)
    world.run_for(120)
    # Then the strict job's run is SKIPPED with the reason and the job completes; the other ran late
    [skipped] = world.executions(strict["id"])
    assert skipped["status"] == "SKIPPED"
    assert "max_lateness_seconds (60)" in skipped["error"]
    assert world.job(strict["id"])["status"] == "COMPLETED"
    [late] = world.executions(lenient["id"])
    assert late["status"] == "SUCCEEDED"
    assert late["lateness_ms"] > 60_000


def test_missed_recurring_runs_are_skipped_and_the_schedule_goes_on(world: World) -> None:
    job = world.create(EVERY_MINUTE, policy={"max_lateness_seconds": 30})
    world.run_for(60)
    world.clock.advance(300)  # down for five minutes
    world.run_for(150)
    statuses = _by_status(world, job["id"])
    assert len(statuses["SKIPPED"]) >= 4  # the minutes missed
    assert all("max_lateness_seconds (30)" in e["error"] for e in statuses["SKIPPED"])
    # and the runs after the outage ran on time
    on_time = [e for e in statuses["SUCCEEDED"] if e["lateness_ms"] < 30_000]
    assert len(on_time) >= 2
    assert world.job(job["id"])["status"] == "ACTIVE"


def test_overlap_skip_does_not_start_a_run_while_the_previous_is_under_way(world: World) -> None:
    job = world.create(EVERY_MINUTE, policy={"overlap": "skip"})
    _first_run_taken(world, job, minutes=2)
    world.run_for(70)
    # The next minute's run found it under way: SKIPPED, naming it
    skipped = _by_status(world, job["id"]).get("SKIPPED", [])
    assert len(skipped) == 1
    assert "previous run" in skipped[0]["error"] and "overlap: skip" in skipped[0]["error"]
    # Once the first run's lease has run out (its worker died), runs start again
    world.run_for(120)
    assert _by_status(world, job["id"]).get("SUCCEEDED")


def test_overlap_allow_is_the_default_and_runs_alongside(world: World) -> None:
    job = world.create(EVERY_MINUTE)
    assert job["policy"]["overlap"] == "allow"
    _first_run_taken(world, job)
    world.run_for(70)
    assert "SKIPPED" not in _by_status(world, job["id"])
    assert _by_status(world, job["id"]).get("SUCCEEDED")


def test_overlap_buffer_one_waits_for_the_previous_run_and_skips_the_one_after(world: World) -> None:
    job = world.create(EVERY_MINUTE, policy={"overlap": "buffer_one"})
    _first_run_taken(world, job)
    # Two more minutes pass while the first run goes on
    world.run_for(125)
    statuses = _by_status(world, job["id"])
    [waiting] = statuses["QUEUED"]
    [skipped] = statuses["SKIPPED"]
    assert parse_rfc3339(waiting["scheduled_at"]) < parse_rfc3339(skipped["scheduled_at"])
    assert "already waits" in skipped["error"]
    # When the first run ends, the waiting one starts
    [running] = statuses["RUNNING"]
    stored = world.store.executions.get(job["id"], parse_rfc3339(running["scheduled_at"]), running["id"])
    world.store.executions.finish_attempt(
        stored, status=ExecutionStatus.SUCCEEDED, finished_at=world.clock.now(), error=None, result=None
    )
    world.run_for(65)
    ran = {e["id"]: e for e in world.executions(job["id"])}
    assert ran[waiting["id"]]["status"] == "SUCCEEDED"
    assert ran[waiting["id"]]["lateness_ms"] > 1000  # it waited


def test_overlap_buffer_one_starts_the_waiting_run_as_the_previous_one_ends(world: World) -> None:
    # Given an every-minute buffer_one job whose first run goes on, its second waiting for it
    job = world.create(EVERY_MINUTE, policy={"overlap": "buffer_one"})
    _first_run_taken(world, job)
    world.run_for(100)
    [waiting] = _by_status(world, job["id"])["QUEUED"]
    [running] = _by_status(world, job["id"])["RUNNING"]
    # (its looks are far apart by now: the next would be up to a minute away)
    world.run_for(40)
    assert _by_status(world, job["id"])["QUEUED"] == [waiting]
    # When the first run ends as its worker ends it (its end's hooks)
    stored = world.store.executions.get(job["id"], parse_rfc3339(running["scheduled_at"]), running["id"])
    assert stored.waiter is not None and stored.waiter.execution_id == waiting["id"]
    ended_at = world.clock.now()
    finished = world.store.executions.finish_attempt(
        stored, status=ExecutionStatus.SUCCEEDED, finished_at=ended_at, error=None, result=None
    )
    world.punctual.hooks.ended(_stored_job(world, job["id"]), finished)
    world.run_for(2)
    # Then the waiting run starts at once, not on its next look
    ran = {e["id"]: e for e in world.executions(job["id"])}[waiting["id"]]
    assert ran["status"] == "SUCCEEDED", ran
    assert parse_rfc3339(ran["started_at"]) - ended_at <= timedelta(seconds=2)
    # and its own message, coming back later, starts it no second time
    world.run_for(120)
    assert [e["id"] for e in world.executions(job["id"]) if e["id"] == waiting["id"]] == [waiting["id"]]
    assert {e["id"]: e for e in world.executions(job["id"])}[waiting["id"]]["attempts"] == 1


def test_a_duplicate_of_an_ended_run_does_not_send_its_waiting_run_on_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a buffer_one job's run that ended with a run waiting for it, which its end sent on
    job = world.create(EVERY_MINUTE, policy={"overlap": "buffer_one"})
    _first_run_taken(world, job)
    world.run_for(100)
    [running] = _by_status(world, job["id"])["RUNNING"]
    stored = world.store.executions.get(job["id"], parse_rfc3339(running["scheduled_at"]), running["id"])
    assert stored.waiter is not None
    finished = world.store.executions.finish_attempt(
        stored, status=ExecutionStatus.SUCCEEDED, finished_at=world.clock.now(), error=None, result=None
    )
    sent: list[Any] = []
    real_send = world.punctual.queue.send

    def send(items: Any, *args: Any, **kwargs: Any) -> Any:
        sent.extend(item for item, _ in items)
        return real_send(items, *args, **kwargs)

    monkeypatch.setattr(world.punctual.queue, "send", send)
    world.punctual.hooks.ended(_stored_job(world, job["id"]), finished)
    assert [item.execution_id for item in sent] == [stored.waiter.execution_id]
    # When its message comes again (a duplicate, or a redelivery), finding it ended
    world.punctual.hooks.found_ended(finished)
    # Then the waiting run is not sent on a second time
    assert len(sent) == 1


def test_a_run_cannot_wait_behind_one_that_has_ended(world: World) -> None:
    # Given a buffer_one job's run that has ended
    job = world.create(EVERY_MINUTE, policy={"overlap": "buffer_one"})
    _first_run_taken(world, job)
    [running] = _by_status(world, job["id"])["RUNNING"]
    stored = world.store.executions.get(job["id"], parse_rfc3339(running["scheduled_at"]), running["id"])
    world.store.executions.finish_attempt(
        stored, status=ExecutionStatus.SUCCEEDED, finished_at=world.clock.now(), error=None, result=None
    )
    # Then a later run is not named on it (its worker looks again at once instead)
    later = replace(stored, id="later", scheduled_at=stored.scheduled_at + timedelta(minutes=1))
    with pytest.raises(LostRace):
        world.store.executions.wait_behind(stored, later)
    ended = world.store.executions.get(job["id"], stored.scheduled_at, stored.id)
    assert ended is not None and ended.waiter is None


def test_overlap_buffer_one_starts_no_run_beside_the_one_waiting(world: World) -> None:
    # Given an every-minute buffer_one job whose first run goes on, and whose second waits for it
    job = world.create(EVERY_MINUTE, policy={"overlap": "buffer_one"})
    _first_run_taken(world, job)
    first = world.clock.now()
    world.run_for(110)
    [waiting] = _by_status(world, job["id"])["QUEUED"]
    # When the first run ends 50 s after the second's time, between two of the waiting run's looks
    [running] = _by_status(world, job["id"])["RUNNING"]
    stored = world.store.executions.get(job["id"], parse_rfc3339(running["scheduled_at"]), running["id"])
    world.store.executions.finish_attempt(
        stored, status=ExecutionStatus.SUCCEEDED, finished_at=world.clock.now(), error=None, result=None
    )
    # and the third run's time comes before the waiting run looks again
    world.run_for(30)
    runs = {parse_rfc3339(e["scheduled_at"]) - first: e for e in world.executions(job["id"])}
    # Then the third run is skipped, not started beside the waiting one, which starts on its own
    third = runs[timedelta(minutes=2)]
    assert third["status"] == "SKIPPED" and "waits to start before it" in third["error"], third
    assert runs[timedelta(minutes=1)]["id"] == waiting["id"]
    assert runs[timedelta(minutes=1)]["status"] == "SUCCEEDED"


def test_max_runs_completes_a_recurring_job(world: World) -> None:
    job = world.create(EVERY_MINUTE, policy={"max_runs": 3})
    world.run_for(300)
    runs = world.executions(job["id"])
    assert [e["status"] for e in runs] == ["SUCCEEDED"] * 3
    done = world.job(job["id"])
    assert done["status"] == "COMPLETED"
    assert done["next_run_at"] is None


@pytest.mark.parametrize("change", ["pause and resume", "a new schedule"])
def test_occurrences_a_change_supersedes_before_they_run_do_not_count_toward_max_runs(
    world: World, change: str
) -> None:
    # Given an every-minute job of three runs that has run once, its next occurrence queued
    job = world.create(EVERY_MINUTE, policy={"max_runs": 3})
    world.run_for(70)
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    following = parse_rfc3339(world.job(job["id"])["next_run_at"])
    world.run_for((following - world.clock.now()).total_seconds() - 20)
    assert _stored_job(world, job["id"]).queued_run_at is not None
    # When, 20 s before it, the job is paused and resumed, or given the same schedule anew
    if change == "pause and resume":
        assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
        world.run_for(10)
        assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    else:
        assert world.api("PATCH", f"/jobs/{job['id']}", {"schedule": EVERY_MINUTE}).status == 200
    world.run_for(300)
    # Then the superseded occurrence is cancelled, not counted: three runs still run
    statuses = [e["status"] for e in world.executions(job["id"])]
    assert statuses.count("SUCCEEDED") == 3, statuses
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_flexible_window_spreads_runs_deterministically_never_early(world: World) -> None:
    jobs = [world.create(EVERY_MINUTE, policy={"flexible_window_seconds": 40}) for _ in range(3)]
    world.run_for(200)
    offsets = set()
    for job in jobs:
        stored = _stored_job(world, job["id"])
        runs = [e for e in world.executions(job["id"]) if e["status"] == "SUCCEEDED"]
        assert len(runs) >= 2
        for e in runs:
            scheduled = parse_rfc3339(e["scheduled_at"])
            nominal = scheduled.replace(second=0, microsecond=0)
            assert spread(job["id"], stored.schedule, nominal, None, 40) == scheduled
            assert 0 <= (scheduled - nominal).total_seconds() <= 40
            assert parse_rfc3339(e["started_at"]) >= scheduled
            offsets.add(scheduled.second)
    assert len(offsets) > 1  # not all in the same second


def test_recurring_only_policies_are_refused_on_a_one_time_job(world: World) -> None:
    for policy, field in (
        ({"overlap": "skip"}, "policy.overlap"),
        ({"max_runs": 2}, "policy.max_runs"),
        ({"flexible_window_seconds": 10}, "policy.flexible_window_seconds"),
    ):
        answer = world.api(
            "POST", "/jobs", {"task": {"type": "noop"}, "schedule": {"type": "now"}, "policy": policy}
        )
        assert answer.status == 422, answer.body
        assert answer.body["field"] == field
    bad = world.api(
        "POST",
        "/jobs",
        {"task": {"type": "noop"}, "schedule": EVERY_MINUTE, "policy": {"overlap": "sometimes"}},
    )
    assert bad.status == 422
    assert world.api("GET", "/jobs").body["items"] == []


def test_a_policy_can_be_changed_and_cleared(world: World) -> None:
    job = world.create(EVERY_MINUTE)
    changed = world.api("PATCH", f"/jobs/{job['id']}", {"policy": {"overlap": "skip", "max_runs": 5}})
    assert changed.status == 200, changed.body
    assert changed.body["policy"]["overlap"] == "skip"
    assert _stored_job(world, job["id"]).policy.max_runs == 5
    cleared = world.api("PATCH", f"/jobs/{job['id']}", {"policy": {}})
    assert cleared.body["policy"] == {
        "max_lateness_seconds": None,
        "overlap": "allow",
        "flexible_window_seconds": 0,
        "max_runs": None,
        "pause_after_failures": None,
    }
    refused = world.api(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "now"}, "policy": {"max_runs": 1}}
    )
    assert refused.status == 422
