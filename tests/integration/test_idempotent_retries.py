"""Idempotency-Key (docs/api.md): a retry with the same key and body returns the same job, even once
its instant has passed; another body, or a key sent empty, is refused and stores nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest

from punctual.domain.errors import RetryableStoreError
from punctual.domain.schedules import PAST_TOLERANCE
from punctual.platform.timefmt import to_rfc3339
from tests.integration.api_edges import BOTH_FORMATS, CRON, NOOP, call, seconds_ahead, snapshot
from tests.world import Answer, World


# ------------------------------------------------------------------------------------------------
# Idempotency-Key: a retry with the same key and body returns the same job, even once its
# instant has passed.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["at", "end_at"])
def test_an_idempotent_retry_after_the_instant_passed_returns_the_job(world: World, which: str) -> None:
    now = world.clock.now()
    if which == "at":
        schedule = {"type": "at", "at": to_rfc3339(now + timedelta(minutes=1))}
    else:
        schedule = {
            "type": "cron",
            "expression": "* * * * *",
            "end_at": to_rfc3339(now + timedelta(minutes=3)),
        }
    body = {"task": NOOP, "schedule": schedule}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": f"k-{which}"})
    assert first.status == 201
    world.run_for(600)  # the client's retry comes 10 minutes later (keys are kept 24 hours)
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": f"k-{which}"})
    assert (again.status, (again.body or {}).get("id")) == (201, first.body["id"]), again.body


def test_a_partly_stored_batch_retried_once_invalid_is_409_naming_what_was_stored(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose first attempt stored one of its two jobs, then failed (503)
    real = world.store.jobs.put_new_many

    def partly(jobs: Any) -> None:
        real(jobs[:1])
        raise RetryableStoreError("BatchWriteItem left items unprocessed")

    monkeypatch.setattr(world.store.jobs, "put_new_many", partly)
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(minutes=2))}
    body = {"jobs": [{"name": f"j{i}", "task": NOOP, "schedule": at} for i in range(2)]}
    key = {"Idempotency-Key": "k"}
    assert world.api("POST", "/jobs/batch", body, headers=key).status == 503
    monkeypatch.setattr(world.store.jobs, "put_new_many", real)
    # When it is retried with the key once its instant has passed (more than 5 minutes: refused)
    world.clock.advance(600)
    retried = world.api("POST", "/jobs/batch", body, headers=key)
    # Then the answer is not 422 ("nothing created": one job was), but 409 saying what happened
    assert retried.status == 409, retried.body
    assert "stored 1 of its 2 jobs" in retried.body["message"]
    assert "schedule.at" in retried.body["message"]
    # and a single create whose first attempt failed before storing its job answers the same way
    soon = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(minutes=2))}
    single = {"task": NOOP, "schedule": soon}
    monkeypatch.setattr(world.store.jobs, "put_new", mock.Mock(side_effect=RetryableStoreError("throttled")))
    assert world.api("POST", "/jobs", single, headers={"Idempotency-Key": "s"}).status == 503
    monkeypatch.undo()
    world.clock.advance(600)
    assert (
        "stored 0 of its 1 jobs"
        in world.api("POST", "/jobs", single, headers={"Idempotency-Key": "s"}).body["message"]
    )


def test_a_retry_while_the_first_attempt_is_still_storing_is_told_to_wait(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request whose instant is just within the past tolerance, slow to store its job
    at = world.clock.now() - PAST_TOLERANCE + timedelta(seconds=2)
    body = {"task": NOOP, "schedule": {"type": "at", "at": to_rfc3339(at)}}
    key = {"Idempotency-Key": "k"}
    real = world.store.jobs.put_new
    retried: list[Answer] = []

    def slow(job: Any) -> Any:
        if not retried:  # the key claimed, the marker filed, the job not yet stored
            world.clock.advance(3)  # the client gives up and retries: the instant is now refused
            retried.append(world.api("POST", "/jobs", body, headers=key))
        return real(job)

    monkeypatch.setattr(world.store.jobs, "put_new", slow)
    first = world.api("POST", "/jobs", body, headers=key)
    # Then the first attempt creates the job, and the retry is told to wait, not that it cannot be
    assert first.status == 201, first.body
    [answer] = retried
    assert answer.status == 409, answer.body
    assert "still in progress" in answer.body["message"], answer.body
    assert "cannot be created" not in answer.body["message"]
    # and once it has, a retry answers the job
    again = world.api("POST", "/jobs", body, headers=key)
    assert (again.status, again.body["id"]) == (201, first.body["id"])


def test_an_idempotency_key_is_remembered_for_24_hours_no_longer(world: World) -> None:
    # (DynamoDB's TTL may keep an expired item for days: the store looks at its expiry itself)
    body = {"task": NOOP, "schedule": CRON}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "day"})
    world.clock.advance(timedelta(hours=23).total_seconds())
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "day"})
    assert (again.status, again.body["id"]) == (201, first.body["id"])
    world.clock.advance(timedelta(hours=2).total_seconds())
    other = world.api("POST", "/jobs", {**body, "name": "another"}, headers={"Idempotency-Key": "day"})
    assert other.status == 201 and other.body["id"] != first.body["id"], other.body
    # and the key now stands for the new request
    repeated = world.api("POST", "/jobs", {**body, "name": "another"}, headers={"Idempotency-Key": "day"})
    assert repeated.body["id"] == other.body["id"]


def test_an_idempotency_key_with_another_body_is_409_and_stores_nothing(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "k"})
    before = snapshot(world)
    for other in [
        {**body, "name": "x"},
        {**body, "timeout_seconds": 5},
        {"task": NOOP, "schedule": {"type": "now"}},
    ]:
        answer = world.api("POST", "/jobs", other, headers={"Idempotency-Key": "k"})
        assert answer.status == 409, answer.body
        assert "message" in answer.body
    batch = world.api("POST", "/jobs/batch", {"jobs": [body]}, headers={"Idempotency-Key": "k"})
    assert batch.status == 409
    assert snapshot(world) == before
    same = world.api("POST", "/jobs", {"schedule": CRON, "task": NOOP}, headers={"Idempotency-Key": "k"})
    assert same.status == 201 and same.body["id"] == first.body["id"]


def test_a_refused_request_does_not_use_up_its_idempotency_key(world: World) -> None:
    # Given a request refused with 422 (a yearly cron whose window holds no run: refused only once
    # its runs are computed), sent with a key
    window = {"start_at": seconds_ahead(world, 0), "end_at": seconds_ahead(world, 3600)}
    bad = {"task": NOOP, "schedule": {"type": "cron", "expression": "0 0 1 1 *", **window}}
    good = {"task": NOOP, "schedule": {"type": "now"}}
    assert world.api("POST", "/jobs", bad, headers={"Idempotency-Key": "k"}).status == 422
    # When another request comes with the same key, Then it is taken
    assert world.api("POST", "/jobs", good, headers={"Idempotency-Key": "k"}).status == 201


# ------------------------------------------------------------------------------------------------
# An Idempotency-Key sent empty is refused (400), not read as no key.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_an_empty_idempotency_key_is_400_and_stores_nothing(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    for key in ["", " ", "\t"]:
        for path, data in [("/jobs", body), ("/jobs/batch", {"jobs": [body]})]:
            answer = call(world, "POST", path, data, headers={"Idempotency-Key": key})
            assert answer.status == 400, (path, repr(key), answer.status, answer.body)
            assert answer.body["field"] == "header idempotency-key", answer.body
            assert "Idempotency-Key is empty" in answer.body["message"]
    too_long = call(world, "POST", "/jobs", body, headers={"Idempotency-Key": "k" * 201})
    assert (too_long.status, too_long.body["field"]) == (400, "header idempotency-key"), too_long.body
    assert snapshot(world) == []
    # and one key of the largest size is a key
    longest = {"Idempotency-Key": "k" * 200}
    first, again = (world.api("POST", "/jobs", body, headers=longest) for _ in range(2))
    assert (first.status, again.body["id"]) == (201, first.body["id"])
