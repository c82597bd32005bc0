"""A hand-off cut short by the death of its request: a retry of the request, or the local stack's
restart, enqueues the job at once instead of leaving it to wait for its claim to run out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual.platform.timefmt import to_rfc3339
from punctual.scheduling.handoff import HANDOFF_CLAIM
from punctual_local.persistence import withdraw_claims
from tests.world import World

KEY = {"Idempotency-Key": "create-once"}


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def soon_markers(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("DUE#SOON#")]


def dies_before_enqueueing(world: World, monkeypatch: pytest.MonkeyPatch, path: str, body: Any) -> None:
    """The request files its claimed marker(s) and stores its job(s), then dies."""
    monkeypatch.setattr(
        world.punctual.dispatcher, "dispatch", lambda *args: (_ for _ in ()).throw(SystemExit)
    )
    with pytest.raises(SystemExit):
        world.api("POST", path, body, headers=KEY)
    monkeypatch.undo()
    assert all("handoff_until_ms" in m for m in soon_markers(world))


def job_body(world: World, seconds: float) -> dict[str, Any]:
    return {"task": {"type": "noop"}, "schedule": {"type": "at", "at": at(world, seconds)}}


def test_a_retried_create_enqueues_the_job_its_first_attempt_stored_but_did_not_hand_off(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a create that stored its job, due in 5 s, and died before enqueueing it
    world.tick()
    body = job_body(world, 5)
    dies_before_enqueueing(world, monkeypatch, "/jobs", body)
    # When the client retries it with the same Idempotency-Key
    answer = world.api("POST", "/jobs", body, headers=KEY)
    # Then it answers the stored job, and the job runs at its time, long before the claim runs out
    assert answer.status == 201, answer.body
    assert soon_markers(world) == []
    world.run_for(HANDOFF_CLAIM.total_seconds() / 2)
    [execution] = world.executions(answer.body["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] < 1000


def test_a_retry_after_the_instant_has_passed_enqueues_the_job_at_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a create that stored its job, due in 2 s, and died before enqueueing it
    world.tick()
    body = job_body(world, 2)
    dies_before_enqueueing(world, monkeypatch, "/jobs", body)
    # When the client retries it with the same key 5 s later, its instant past (a replay: the body
    # would now be refused)
    world.clock.advance(5)
    answer = world.api("POST", "/jobs", body, headers=KEY)
    assert answer.status == 201, answer.body
    # Then the job runs at once, late by the wait for the retry only
    world.run_for(2)
    [execution] = world.executions(answer.body["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] < 7000


def test_a_retried_batch_enqueues_the_jobs_its_first_attempt_stored_but_did_not_hand_off(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch that stored its two jobs, due in 5 and 6 s, and died before enqueueing them
    world.tick()
    body = {"jobs": [job_body(world, 5), job_body(world, 6)]}
    dies_before_enqueueing(world, monkeypatch, "/jobs/batch", body)
    # When the client retries it with the same Idempotency-Key
    answer = world.api("POST", "/jobs/batch", body, headers=KEY)
    assert answer.status == 201, answer.body
    # Then both run at their time
    world.run_for(HANDOFF_CLAIM.total_seconds() / 2)
    for job in answer.body["items"]:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["lateness_ms"] < 1000


def test_a_retry_of_a_create_that_finished_sends_nothing_again(world: World) -> None:
    # Given a create, due in 5 s, that answered (its hand-off done)
    world.tick()
    body = job_body(world, 5)
    first = world.api("POST", "/jobs", body, headers=KEY)
    assert first.status == 201
    # When the client retries it anyway
    with world.counting_calls() as calls:
        again = world.api("POST", "/jobs", body, headers=KEY)
    # Then it answers the same job, and only looks for a claim left behind: nothing is sent
    assert again.body["id"] == first.body["id"]
    assert not [call for call in calls if call.startswith("sqs.")], calls
    assert calls["dynamodb.BatchGetItem"] == 1
    world.run_for(10)
    [execution] = world.executions(first.body["id"])
    assert execution["status"] == "SUCCEEDED" and execution["attempts"] == 1


def test_withdrawn_claims_are_sent_by_the_next_tick(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a create that stored its job, due in 5 s, and died before enqueueing it (the local stack
    # killed with its API process), and a job due in an hour, filed in its minute's bucket
    world.tick()
    dies_before_enqueueing(world, monkeypatch, "/jobs", job_body(world, 5))
    [job_id] = [m["job_id"]["S"] for m in soon_markers(world)]
    later = world.create({"type": "at", "at": at(world, 3600)})
    # When the claims are withdrawn (the stack starting again)
    settings = world.punctual.settings
    soon = world.punctual.dispatcher.soon
    withdrawn = withdraw_claims(world.store, range(settings.shard_count), world.clock.now() + soon)
    # Then the next tick sends the job, which runs at its time; the later job is left as it was
    assert withdrawn == 1
    report = world.tick()
    assert report["enqueued"] == 1 and report["deferred"] == 0
    world.run_for(10)
    [execution] = world.executions(job_id)
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] < 1000
    assert world.executions(later["id"]) == []


def test_a_run_by_hand_whose_request_died_after_filing_it_runs_and_is_listed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run by hand whose request filed its marker and died before storing the run
    job = world.create({"type": "cron", "expression": "0 10 * * *"})
    monkeypatch.setattr(
        world.punctual.store.executions, "put_if_absent", lambda *args: (_ for _ in ()).throw(SystemExit)
    )
    with pytest.raises(SystemExit):
        world.api("POST", f"/jobs/{job['id']}/run")
    monkeypatch.undo()
    assert world.executions(job["id"]) == []
    # When the scanner comes to its marker, once the request's claim has run out
    world.run_for(HANDOFF_CLAIM.total_seconds() + 30)
    # Then the run is stored and runs: no run stored that nothing sends, none filed and lost
    [execution] = world.executions(job["id"])
    assert (execution["manual"], execution["status"]) == (True, "SUCCEEDED")
