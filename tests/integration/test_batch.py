"""POST /jobs/batch: 1 to 100 jobs in one request, all validated before any is written."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from punctual import tasks
from punctual.api import bodies, responses
from punctual.api.responses import ANSWER_MAX_BYTES
from punctual.api.routes import jobs as jobs_routes
from punctual.domain.errors import RetryableStoreError
from punctual.domain.models import DueMarker
from punctual.platform.timefmt import to_epoch_ms, to_rfc3339
from punctual.store.codec.markers import markers_from
from punctual.store.table import from_wire
from tests.world import World

CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
NOOP = {"type": "noop"}


def items(world: World, kind: str = "") -> list[dict[str, Any]]:
    """The table's items of a kind: "JOB" (jobs), "EXEC" (executions), "DUE" (markers), "" (all)."""
    scan = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    kinds = {
        "JOB": lambda i: i["sk"]["S"] == "JOB",
        "EXEC": lambda i: i["sk"]["S"].startswith("EXEC#"),
        "DUE": lambda i: i["pk"]["S"].startswith("DUE#"),
        "": lambda i: True,
    }
    return [i for i in scan if kinds[kind](i)]


def filed_markers(world: World) -> list[DueMarker]:
    """The markers filed, a group item's each."""
    return [m for item in items(world, "DUE") for m in markers_from(from_wire(item))]


def in_minutes(world: World, minutes: float) -> dict[str, str]:
    return {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(minutes=minutes))}


def batch(world: World, jobs: list[dict[str, Any]], **kwargs: Any) -> Any:
    return world.api("POST", "/jobs/batch", {"jobs": jobs}, **kwargs)


def test_a_batch_creates_every_job_in_request_order(world: World) -> None:
    # Given three different jobs
    jobs = [
        {"name": "first", "task": NOOP, "schedule": CRON},
        {"name": "second", "task": NOOP, "schedule": in_minutes(world, 10), "timeout_seconds": 5},
        {
            "task": {"type": "sleep", "params": {"seconds": 1}},
            "schedule": {"type": "rate", "every_seconds": 600},
        },
    ]
    # When they are posted as one batch
    answer = batch(world, jobs)
    # Then all are created, answered in request order in the Job shape, and readable one by one
    assert answer.status == 201, answer.body
    created = answer.body["items"]
    assert [j["name"] for j in created[:2]] == ["first", "second"]
    assert created[2]["name"] == created[2]["id"]
    assert created[1]["timeout_seconds"] == 5
    assert created[0]["next_run_at"] == "2026-12-01T09:00:00.000Z"
    assert all(j["status"] == "ACTIVE" for j in created)
    for job in created:
        assert world.job(job["id"]) == job
    # and each job has its one marker, the two due at the same instant in one item
    assert len(items(world, "JOB")) == 3
    markers = filed_markers(world)
    assert Counter(m.job_id for m in markers) == Counter(j["id"] for j in created)
    assert len(items(world, "DUE")) == 2


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"task": NOOP, "schedule": {"type": "cron", "expression": "* * *"}}, "jobs[3].schedule.expression"),
        ({"task": NOOP}, "jobs[3].schedule"),
        ({"task": {"type": "nope"}, "schedule": {"type": "now"}}, "jobs[3].task.type"),
        (
            {"task": {"type": "http", "params": {"url": "http://10.0.0.1/"}}, "schedule": {"type": "now"}},
            "jobs[3].task.params.url",
        ),
        ({"task": NOOP, "schedule": {"type": "at", "at": "2026-11-30T10:00:00Z"}}, "jobs[3].schedule.at"),
        ({"task": NOOP, "schedule": {"type": "now"}, "colour": "red"}, "jobs[3].colour"),
    ],
)
def test_one_invalid_job_refuses_the_batch_naming_it_and_nothing_is_written(
    world: World, bad: dict[str, Any], field: str
) -> None:
    # Given a batch whose fourth job is invalid (by the body's schema, or by the domain's checks)
    good = {"task": NOOP, "schedule": {"type": "now"}}
    # When it is posted
    answer = batch(world, [good, good, good, bad, good], headers={"Idempotency-Key": "k"})
    # Then it is refused naming the job's index and field, and nothing at all is written
    assert answer.status == 422, answer.body
    assert answer.body["field"] == field
    assert field in answer.body["message"]
    assert items(world) == []
    assert world.drain() == 0


def test_every_jobs_problem_is_listed_the_first_named(world: World) -> None:
    # Given a batch whose second and fourth jobs are each wrong in their content
    good = {"task": NOOP, "schedule": {"type": "now"}}
    unknown = {"task": {"type": "nope"}, "schedule": {"type": "now"}}
    past = {"task": NOOP, "schedule": {"type": "at", "at": "2026-11-30T10:00:00Z"}}
    # When it is posted
    answer = batch(world, [good, unknown, good, past])
    # Then the answer names the first, and lists both
    assert answer.status == 422, answer.body
    assert answer.body["field"] == "jobs[1].task.type"
    errors = answer.body["errors"]
    assert [e["field"] for e in errors] == ["jobs[1].task.type", "jobs[3].schedule.at"]
    assert errors[0]["message"].startswith("unknown task type 'nope'"), errors
    assert items(world) == []


@pytest.mark.parametrize(("count", "status"), [(0, 422), (101, 422), (100, 201)])
def test_a_batch_holds_1_to_100_jobs(world: World, count: int, status: int) -> None:
    answer = batch(world, [{"task": NOOP, "schedule": CRON}] * count)
    assert answer.status == status, answer.body
    if status == 422:
        assert answer.body["field"] == "jobs"
        assert items(world) == []
    else:
        assert len(answer.body["items"]) == count == len(items(world, "JOB"))


@pytest.mark.parametrize(
    "body", [{}, {"jobs": "x"}, [{"task": NOOP, "schedule": CRON}], {"jobs": [], "x": 1}]
)
def test_a_malformed_batch_is_a_422(world: World, body: Any) -> None:
    answer = world.api("POST", "/jobs/batch", body)
    assert answer.status == 422, answer.body
    assert items(world) == []


def test_batch_jobs_belong_to_their_owner(world: World) -> None:
    # Given alice's batch
    created = batch(world, [{"task": NOOP, "schedule": CRON}] * 2).body["items"]
    # Then bob sees none of it, alice sees all of it
    for job in created:
        assert world.api("GET", f"/jobs/{job['id']}", owner="bob").status == 404
    assert world.api("GET", "/jobs", owner="bob").body["items"] == []
    listed = world.api("GET", "/jobs").body["items"]
    assert {j["id"] for j in listed} == {j["id"] for j in created}
    # and a request without a caller creates nothing
    assert batch(world, [{"task": NOOP, "schedule": CRON}], owner=None).status == 401
    assert len(items(world, "JOB")) == 2


def test_jobs_due_within_the_hand_off_window_run_without_waiting_for_a_tick(world: World) -> None:
    # Given a batch of jobs due now and one due in ten minutes
    jobs = [{"task": NOOP, "schedule": {"type": "now"}}] * 3 + [
        {"task": NOOP, "schedule": in_minutes(world, 10)}
    ]
    created = batch(world, jobs).body["items"]
    # When the workers drain the queue, with no scanner tick
    world.drain()
    # Then the jobs due now ran and completed; the later one waits for the scanner, its marker filed
    for job in created[:3]:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert world.job(job["id"])["status"] == "COMPLETED"
    assert world.executions(created[3]["id"]) == []
    assert [m["job_id"]["S"] for m in items(world, "DUE")] == [created[3]["id"]]
    # and it runs once when its time comes
    world.run_for(11 * 60)
    assert [e["status"] for e in world.executions(created[3]["id"])] == ["SUCCEEDED"]


def test_idempotency_key_covers_the_whole_batch(world: World) -> None:
    jobs = [{"task": NOOP, "schedule": CRON}, {"task": NOOP, "schedule": in_minutes(world, 10)}]
    first = batch(world, jobs, headers={"Idempotency-Key": "b1"})
    again = batch(world, jobs, headers={"Idempotency-Key": "b1"})
    reordered = batch(world, list(reversed(jobs)), headers={"Idempotency-Key": "b1"})
    fewer = batch(world, jobs[:1], headers={"Idempotency-Key": "b1"})
    single = world.api("POST", "/jobs", jobs[0], headers={"Idempotency-Key": "b1"})
    bobs = batch(world, jobs, headers={"Idempotency-Key": "b1"}, owner="bob")
    # The same key and body answers the same jobs; another body (even reordered, or a single
    # create) answers 409; another owner's key is another key
    assert first.status == again.status == 201
    assert again.body == first.body
    assert reordered.status == fewer.status == single.status == 409
    assert bobs.status == 201
    assert {j["id"] for j in bobs.body["items"]}.isdisjoint(j["id"] for j in first.body["items"])
    assert len(items(world, "JOB")) == 4


def test_a_single_creates_key_is_a_conflict_for_a_batch(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    assert world.api("POST", "/jobs", body, headers={"Idempotency-Key": "s1"}).status == 201
    assert batch(world, [body], headers={"Idempotency-Key": "s1"}).status == 409
    assert len(items(world, "JOB")) == 1


def test_a_batch_that_fails_after_its_markers_leaves_no_job_behind(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the table throttles the jobs' writes past every retry
    def throttled(jobs: Any) -> None:
        raise RetryableStoreError("BatchWriteItem left items unprocessed")

    monkeypatch.setattr(world.store.jobs, "put_new_many", throttled)
    jobs = [{"task": NOOP, "schedule": {"type": "now"}}, {"task": NOOP, "schedule": in_minutes(world, 2)}]
    # When a batch is posted
    answer = batch(world, jobs)
    # Then it answers 503, no job exists, and the markers filed first come to nothing
    assert answer.status == 503
    assert items(world, "JOB") == []
    assert len(items(world, "DUE")) == 2
    world.run_for(4 * 60)
    assert items(world, "DUE") == []
    assert items(world, "EXEC") == []


def stores_only_the_first_job(world: World, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make a batch's job write store its first job only, then fail; returns the real write."""
    real = world.store.jobs.put_new_many

    def partly(jobs: Any) -> None:
        real(jobs[:1])
        raise RetryableStoreError("BatchWriteItem left items unprocessed")

    monkeypatch.setattr(world.store.jobs, "put_new_many", partly)
    return real


def test_a_retry_with_the_key_finishes_a_batch_that_failed_part_way(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose write stored only its first job, after all markers, then failed
    store = world.store
    real = stores_only_the_first_job(world, monkeypatch)
    jobs = [{"name": f"j{i}", "task": NOOP, "schedule": in_minutes(world, 2)} for i in range(3)]
    jobs.append({"task": NOOP, "schedule": {"type": "now"}})  # unnamed, and handed off
    failed = batch(world, jobs, headers={"Idempotency-Key": "retry-me"})
    assert failed.status == 503
    assert len(items(world, "JOB")) == 1
    monkeypatch.setattr(store.jobs, "put_new_many", real)
    # When the client retries with the same key, a little later (the "now" job's first marker, filed
    # for the earlier instant, must not run it a second time)
    world.clock.advance(5)
    retried = batch(world, jobs, headers={"Idempotency-Key": "retry-me"})
    # Then it gets all four, the stored one unchanged, and each job runs exactly once
    assert retried.status == 201, retried.body
    created = retried.body["items"]
    assert [j["name"] for j in created] == ["j0", "j1", "j2", created[3]["id"]]
    assert len(items(world, "JOB")) == 4
    assert batch(world, jobs, headers={"Idempotency-Key": "retry-me"}).body == retried.body
    world.run_for(4 * 60)
    for job in created:
        assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"], job["name"]


def test_a_batch_of_30_costs_four_batch_writes(world: World) -> None:
    # Given 30 jobs due in four minutes (filed for the scanner, not handed off), at one instant
    jobs = [{"task": NOOP, "schedule": in_minutes(world, 4)}] * 30
    # When they are created in one batch, with and without an idempotency key
    with world.counting_calls() as plain:
        assert batch(world, jobs).status == 201
    with world.counting_calls() as keyed:
        assert batch(world, jobs, headers={"Idempotency-Key": "k"}).status == 201
    # Then the markers go in one group item, the batch's list entry in one more, then the jobs in
    # BatchWriteItems of 25; the key is one PutItem
    assert plain == Counter({"dynamodb.BatchWriteItem": 4})
    assert keyed == Counter({"dynamodb.BatchWriteItem": 4, "dynamodb.PutItem": 1})
    assert len(items(world, "DUE")) == 2
    assert len(filed_markers(world)) == 60


def test_a_handed_off_batch_is_dispatched_together(world: World) -> None:
    # Given the calls a batch of one job due now costs
    now = {"task": NOOP, "schedule": {"type": "now"}}
    with world.counting_calls() as one:
        assert batch(world, [now]).status == 201
    # When ten jobs due now are created in one batch
    with world.counting_calls() as ten:
        assert batch(world, [now] * 10).status == 201
    # Then they are dispatched together: the same reads and one SendMessageBatch, not a dispatch each
    assert ten["sqs.SendMessageBatch"] == one["sqs.SendMessageBatch"] == 1
    assert ten["dynamodb.BatchGetItem"] == one["dynamodb.BatchGetItem"] >= 1


def test_a_batch_claims_the_markers_it_hands_off_and_withdraws_the_claims_if_the_hand_off_fails(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the queue is down while a batch of two jobs due in 20 s and one due in 10 minutes is posted
    world.tick()

    def down(markers: Any) -> Any:
        raise RuntimeError("SQS unavailable")

    monkeypatch.setattr(world.punctual.dispatcher, "dispatch", down)
    soon = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=20))}
    jobs = [{"task": NOOP, "schedule": soon}] * 2 + [{"task": NOOP, "schedule": in_minutes(world, 10)}]
    answer = batch(world, jobs)
    monkeypatch.undo()
    # Then the request still succeeded, and no marker carries a live claim any more (one withdrawn
    # has run out: the scanner sends it, guarded, as it may have been sent)
    assert answer.status == 201
    assert len(items(world, "DUE")) == 3
    now_ms = to_epoch_ms(world.clock.now())
    assert all(int(m.get("handoff_until_ms", {"N": "0"})["N"]) <= now_ms for m in items(world, "DUE"))
    # and the scanner's next tick enqueues the two due soon: they run, late by at most a tick
    world.run_for(90)
    for job in answer.body["items"][:2]:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["lateness_ms"] <= world.punctual.settings.tick_seconds * 1000


def test_a_batch_files_the_markers_it_hands_off_with_a_claim(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch request that dies while enqueueing its jobs due in 20 s (after filing them)
    world.tick()
    monkeypatch.setattr(
        world.punctual.dispatcher, "dispatch", lambda *args: (_ for _ in ()).throw(SystemExit)
    )
    soon = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=20))}
    later = in_minutes(world, 10)
    with pytest.raises(SystemExit):
        batch(world, [{"task": NOOP, "schedule": soon}, {"task": NOOP, "schedule": later}])
    monkeypatch.undo()
    # Then the marker due soon carries the request's claim, the later one none
    claims = {m["job_id"]["S"]: "handoff_until_ms" in m for m in items(world, "DUE")}
    assert sorted(claims.values()) == [False, True]
    # and the job still runs once the claim has run out
    world.run_for(120)
    [soon_job] = [job_id for job_id, claimed in claims.items() if claimed]
    assert [e["status"] for e in world.executions(soon_job)] == ["SUCCEEDED"]


def test_the_api_docs_batch_file_is_a_valid_batch(world: World) -> None:
    # The JSON block after "A batch file for" in docs/api.md, as a user would copy it
    doc = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    block = doc.split("A batch file for", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    answer = world.api("POST", "/jobs/batch", json.loads(block))
    assert answer.status == 201, answer.body
    assert [job["status"] for job in answer.body["items"]] == ["ACTIVE"] * 3


def test_a_batch_at_one_instant_is_read_as_one_item_and_runs_each_job_once(world: World) -> None:
    # Given a scanner that has ticked, and 40 jobs due at one instant four minutes ahead, in one batch
    world.tick()
    jobs = [{"task": NOOP, "schedule": in_minutes(world, 4)}] * 40
    answer = batch(world, jobs)
    assert answer.status == 201, answer.body
    [group] = items(world, "DUE")
    # When the instant comes, counting the scanner's calls
    with world.counting_calls() as calls:
        world.run_for(300)
    # Then every job ran once, from one message (a pack of the 40), and nothing is left to read
    for job in answer.body["items"]:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert calls["sqs.SendMessageBatch"] == 1
    assert world.unread_markers() == []
    assert int(group["count"]["N"]) == 40


def a_group_about_to_be_read(world: World) -> Any:
    """12 jobs due at one instant four minutes ahead, created in one batch, and the clock moved to
    where the next tick reads their group."""
    world.tick()
    answer = batch(world, [{"task": NOOP, "schedule": in_minutes(world, 4)}] * 12)
    world.clock.advance(200)
    return answer


def test_a_group_whose_send_fails_is_sent_from_the_soon_partition_each_member_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a group about to be read, and SQS refusing every send for one tick
    answer = a_group_about_to_be_read(world)
    monkeypatch.setattr(
        world.punctual.queue, "send_packs", lambda items, attempts=4: [item for item, _ in items]
    )
    report = world.tick()
    monkeypatch.undo()
    # Then the group's members wait in its shard's soon partition, one marker each
    assert report["failed"] == 12
    waiting = world.unread_markers()
    assert len(waiting) == 12 and all("#SOON#" in m["pk"]["S"] for m in waiting)
    assert len({m["pk"]["S"] for m in waiting}) == 1
    # When the next ticks run, each job ran once
    world.run_for(120)
    for job in answer.body["items"]:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.unread_markers() == []


def test_a_group_sent_by_a_tick_that_died_before_its_position_is_sent_again_and_runs_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a group about to be read, and a tick that sends it but dies before it records its positions
    answer = a_group_about_to_be_read(world)

    def dies(*_: Any, **__: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(world.store.scanner, "save_positions", dies)
    with pytest.raises(RuntimeError):
        world.tick()
    monkeypatch.undo()
    # When the next tick reads the group again and sends it again
    with world.counting_calls() as calls:
        world.tick()
    assert calls["sqs.SendMessageBatch"] == 1
    world.run_for(120)
    # Then each job ran once: the second message is the same pack, which the worker recognises
    for job in answer.body["items"]:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.unread_markers() == []


def big_http_job(world: World, body: Any) -> dict[str, Any]:
    return {
        "task": {"type": "http", "params": {"url": "https://hooks.example.com/run", "body": body}},
        "schedule": in_minutes(world, 30),
    }


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"task": {"type": "nope"}, "schedule": {"type": "now"}}, "jobs[9].task.type"),
        ({"task": NOOP, "schedule": {"type": "at", "at": "2020-01-01T00:00:00Z"}}, "jobs[9].schedule.at"),
        ({"task": NOOP, "schedule": CRON, "policy": {"max_runs": 0}}, "jobs[9].policy.max_runs"),
    ],
)
def test_a_job_refused_late_in_a_batch_costs_no_reading_of_the_others_params(
    world: World, bad: dict[str, Any], field: str
) -> None:
    # Given nine jobs with large parameters, and a tenth wrong in its shape
    jobs = [big_http_job(world, [{}] * 20_000) for _ in range(9)] + [bad]
    # When the batch is posted, each check of a task's parameters counted
    with mock.patch.object(tasks, "validate", wraps=tasks.validate) as validated:
        answer = batch(world, jobs)
    # Then it is refused naming the tenth job, without any job's parameters read, and nothing stored
    assert answer.status == 422, answer.body
    assert answer.body["field"] == field, answer.body
    assert validated.call_count == 0
    assert items(world) == []
    # and with the tenth put right, every job's parameters are read once
    with mock.patch.object(tasks, "validate", wraps=tasks.validate) as validated:
        assert batch(world, [*jobs[:9], {"task": NOOP, "schedule": CRON}]).status == 201
    assert validated.call_count == 10


def test_a_batch_whose_answer_lambda_could_not_carry_is_refused(world: World) -> None:
    # Given a batch well within the body's cap, whose parameters are characters beyond U+FFFF: one
    # character in the body, twelve in the answer's JSON (a pair of \u escapes), fourteen escaped
    # again in Lambda's answer
    jobs = [big_http_job(world, "\U0001f600" * 50_000) for _ in range(8)]
    body = json.dumps({"jobs": jobs}, ensure_ascii=False).encode()
    assert len(body.decode()) < bodies.BATCH_BODY_MAX_CHARS
    # When it is posted
    answer = world.api("POST", "/jobs/batch", raw=body)
    # Then it is refused 413 naming the jobs, before anything is stored
    assert answer.status == 413, answer.body
    assert answer.body["field"] == "jobs" and "smaller batches" in answer.body["message"]
    assert items(world) == []
    # and half of it is created, its answer within what Lambda answers
    half = world.api("POST", "/jobs/batch", raw=json.dumps({"jobs": jobs[:3]}, ensure_ascii=False).encode())
    assert half.status == 201, half.body
    carried = json.dumps(json.dumps(half.body, separators=(",", ":")))
    assert len(carried) <= ANSWER_MAX_BYTES


def test_a_batch_taken_before_its_answer_was_bounded_is_answered_again_when_retried(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch an earlier version created under an Idempotency-Key, its answer past today's bound
    jobs = [big_http_job(world, "\U0001f600" * 50_000) for _ in range(8)]
    body = json.dumps({"jobs": jobs}, ensure_ascii=False).encode()
    key = {"Idempotency-Key": "big-batch-1"}
    monkeypatch.setattr(responses, "ANSWER_MAX_BYTES", 10**9)
    monkeypatch.setattr(jobs_routes, "ANSWER_MAX_BYTES", 10**9)
    first = world.api("POST", "/jobs/batch", raw=body, headers=key)
    assert first.status == 201, first.body
    monkeypatch.undo()
    # When it is retried with the same key and body
    again = world.api("POST", "/jobs/batch", raw=body, headers=key)
    # Then it is answered with the jobs it created, not refused
    assert again.status == 201, again.body
    assert [job["id"] for job in again.body["items"]] == [job["id"] for job in first.body["items"]]
    # and without the key it is refused, as any batch whose answer Lambda could not carry
    assert world.api("POST", "/jobs/batch", raw=body).status == 413
