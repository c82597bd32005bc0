"""A job's last execution is read from its executions: the job item keeps no copy of it.

An occurrence of a recurring job therefore writes nothing to the job, and a one-time job's item
stays small enough (under 1 KB) for its completion to cost one write unit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

from punctual.domain.executions import Execution, ExecutionStatus, manual_execution_id
from punctual.platform import resources
from punctual.platform.timefmt import to_rfc3339
from tests.world import World


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def job_item(job_id: str) -> dict[str, Any]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    key = {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}}
    return dict(client.get_item(TableName=resources.TABLE.name, Key=key, ConsistentRead=True)["Item"])


def claimed_by_hand(world: World, job_id: str, tag: str) -> Execution:
    """A run by hand of the job, now, claimed by a worker (RUNNING)."""
    now = world.clock.now()
    run = Execution(
        id=manual_execution_id(job_id, now, tag),
        job_id=job_id,
        owner="alice",
        scheduled_at=now,
        status=ExecutionStatus.QUEUED,
        schedule_version=0,
        manual=True,
    )
    return world.store.executions.claim(run, now=now, lease_until=now + timedelta(minutes=5), lateness_ms=0)


def test_the_last_execution_is_the_newest_that_ran_to_its_end(world: World) -> None:
    # Given an every-minute job that has run a few times, the last of them failing
    job = world.create(
        {"type": "cron", "expression": "* * * * *"}, task={"type": "noop"}, retry={"max_attempts": 1}
    )
    world.run_for(150)
    world.api("PATCH", f"/jobs/{job['id']}", {"task": {"type": "fail"}})
    world.run_for(60)
    executions = world.executions(job["id"])
    newest = executions[0]
    assert newest["status"] == "FAILED", executions
    # When the job is read, alone and in a list
    read = world.job(job["id"])
    [listed] = [j for j in world.api("GET", "/jobs").body["items"] if j["id"] == job["id"]]
    # Then both show the newest execution, as GET /jobs/{id}/executions has it (less its result)
    for shown in (read["last_execution"], listed["last_execution"]):
        assert (shown["id"], shown["status"], shown["attempts"]) == (newest["id"], "FAILED", 1)
        assert shown["scheduled_at"] == newest["scheduled_at"]
    # and the job item holds no copy of it
    assert "last_execution" not in job_item(job["id"])


def test_a_running_execution_is_not_the_last(world: World) -> None:
    # Given a job that ran once by hand, then has a newer execution that a worker is running
    job = world.create({"type": "at", "at": at(world, 600)})
    first = world.api("POST", f"/jobs/{job['id']}/run").body
    world.run_for(5)
    claimed_by_hand(world, job["id"], "beef")
    statuses = [e["status"] for e in world.executions(job["id"])]
    assert statuses == ["RUNNING", "SUCCEEDED"], statuses
    # Then the last execution is the one that finished
    assert world.job(job["id"])["last_execution"]["id"] == first["id"]


def test_a_now_job_paused_before_it_ran_runs_when_resumed(world: World) -> None:
    # Given a job to run now, paused before its message reached a worker
    job = world.create({"type": "at", "at": at(world, 5)})
    world.api("POST", f"/jobs/{job['id']}/pause")
    # When its message arrives (the execution is skipped: CANCELLED) and the job is resumed
    world.run_for(10)
    assert [e["status"] for e in world.executions(job["id"])] == ["CANCELLED"]
    assert world.job(job["id"])["last_execution"] is None  # skipped is not run
    world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "now"}})
    world.api("POST", f"/jobs/{job['id']}/resume")
    world.run_for(10)
    # Then it runs, and completes
    done = world.job(job["id"])
    assert done["status"] == "COMPLETED"
    assert done["last_execution"]["status"] == "SUCCEEDED"


def test_a_job_item_written_by_an_earlier_version_sheds_its_copy(world: World) -> None:
    # Given a job item as earlier versions left it: with a (stale) copy of a last execution
    job = world.create({"type": "cron", "expression": "* * * * *"})
    client = boto3.client("dynamodb", region_name="us-east-1")
    key = {"pk": {"S": f"JOB#{job['id']}"}, "sk": {"S": "JOB"}}
    stale = '{"id":"old","scheduled_at":"2026-01-01T00:00:00.000Z","status":"SUCCEEDED","attempts":1}'
    client.update_item(
        TableName=resources.TABLE.name,
        Key=key,
        UpdateExpression="SET last_execution = :e, last_execution_ms = :ms",
        ExpressionAttributeValues={":e": {"S": stale}, ":ms": {"N": "1767225600000"}},
    )
    # Then it reads as before, the copy ignored (no execution has run yet)
    assert world.job(job["id"])["last_execution"] is None
    # and once the scanner moves the job on, the copy is gone
    world.run_for(120)
    item = job_item(job["id"])
    assert "last_execution" not in item and "last_execution_ms" not in item
    assert world.job(job["id"])["last_execution"]["status"] == "SUCCEEDED"


@pytest.mark.usefixtures("claim_path")
def test_a_job_read_between_its_runs_end_and_its_outcome_shows_the_run_ended(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose only run fails, and an every-minute job whose runs fail
    once = world.create({"type": "at", "at": at(world, 5)}, task={"type": "fail"}, retry={"max_attempts": 1})
    cron = world.create(
        {"type": "cron", "expression": "* * * * *"}, task={"type": "fail"}, retry={"max_attempts": 1}
    )
    seen: dict[str, dict[str, Any]] = {}
    real_complete, real_record = world.store.jobs.complete, world.store.jobs.record_outcome

    def complete(job: Any, execution: Any) -> Any:
        seen[job.id] = world.job(job.id)  # read after the run's end is written, before the job's
        return real_complete(job, execution)

    def record_outcome(execution: Any) -> Any:
        seen.setdefault(execution.job_id, world.job(execution.job_id))
        return real_record(execution)

    monkeypatch.setattr(world.store.jobs, "complete", complete)
    monkeypatch.setattr(world.store.jobs, "record_outcome", record_outcome)
    # When each is read right after its run ended FAILED, before the job's own write
    world.run_for(70)
    # Then the job says what its run did: the one-time job completed, both with a failed outcome
    read_once, read_cron = seen[once["id"]], seen[cron["id"]]
    for read in (read_once, read_cron):
        last, outcome = read["last_execution"], read["outcome"]
        assert last["status"] == "FAILED", read
        assert outcome is not None, read
        assert (outcome["status"], outcome["execution_id"]) == ("FAILED", last["id"])
        assert outcome["consecutive_failures"] == 1
    assert read_once["status"] == "COMPLETED" and read_once["next_run_at"] is None
    assert read_cron["status"] == "ACTIVE"
    # and once written, the job reads the same
    stored = world.job(once["id"])
    assert stored["status"] == "COMPLETED" and stored["outcome"] == read_once["outcome"]


@pytest.mark.usefixtures("claim_path")
def test_a_job_paused_between_its_runs_end_and_its_outcome_answers_with_the_run_ended(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose only run fails
    job = world.create({"type": "at", "at": at(world, 5)}, task={"type": "fail"}, retry={"max_attempts": 1})
    answers: list[dict[str, Any]] = []
    real_complete = world.store.jobs.complete

    def complete(job: Any, execution: Any) -> Any:
        # When it is paused after the run's end is written, before the job's own write
        answer = world.api("POST", f"/jobs/{job.id}/pause")
        assert answer.status == 200, answer.body
        answers.append(answer.body)
        return real_complete(job, execution)

    monkeypatch.setattr(world.store.jobs, "complete", complete)
    world.run_for(10)
    # Then the pause answers the job paused, with the run that ended as its outcome
    [paused] = answers
    assert paused["status"] == "PAUSED" and paused["last_execution"]["status"] == "FAILED"
    assert paused["outcome"] is not None and paused["outcome"]["status"] == "FAILED"
    # and resumed, the job completes without running again
    assert world.api("POST", f"/jobs/{job['id']}/resume").body["status"] == "COMPLETED"
    assert [e["status"] for e in world.executions(job["id"])] == ["FAILED"]


def test_runs_ending_out_of_order_show_the_one_that_ended_last_read_alone_or_listed(world: World) -> None:
    # Given a job with two runs by hand under way, the later one scheduled ending first (SUCCEEDED),
    # then the earlier one (FAILED): its outcome is the run that ended last
    job = world.create({"type": "cron", "expression": "0 10 * * *"})
    runs = []
    for tag in ("aaaa", "bbbb"):
        runs.append(claimed_by_hand(world, job["id"], tag))
        world.clock.advance(1)
    first, second = runs
    for run, status in ((second, ExecutionStatus.SUCCEEDED), (first, ExecutionStatus.FAILED)):
        ended = world.store.executions.finish_attempt(
            run, status=status, finished_at=world.clock.now(), error=None, result=None
        )
        world.store.jobs.record_outcome(ended)
        world.clock.advance(1)
    # When the job is read, alone and in a list
    read = world.job(job["id"])
    [listed] = [j for j in world.api("GET", "/jobs").body["items"] if j["id"] == job["id"]]
    # Then each shows the run its outcome names, the one that ended last
    for shown in (read, listed):
        assert shown["outcome"]["execution_id"] == first.id, shown
        assert (shown["last_execution"]["id"], shown["last_execution"]["status"]) == (first.id, "FAILED")
