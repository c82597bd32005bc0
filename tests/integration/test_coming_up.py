"""GET /coming-up: the caller's scheduled runs in the coming hour, minute by minute."""

from __future__ import annotations

from datetime import timedelta

import pytest

from punctual.api.routes import coming_up as coming_up_route
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from tests.world import World


def _counts(body: dict) -> dict[str, int]:
    return {minute["at"]: minute["count"] for minute in body["minutes"] if minute["count"]}


def test_the_coming_hour_counts_each_minutes_runs_of_the_callers_active_jobs_only(world: World) -> None:
    # Given, 10 minutes ahead, three one-time jobs in one minute and one in the next; a job every
    # 15 minutes; a paused job; a job due in two hours; and another owner's burst in the same minute
    now = world.clock.now()
    burst = (now + timedelta(minutes=10)).replace(second=5, microsecond=0)
    for _ in range(3):
        world.create({"type": "at", "at": to_rfc3339(burst)}, name="burst")
    world.create({"type": "at", "at": to_rfc3339(burst + timedelta(minutes=1))}, name="after")
    every = world.create({"type": "rate", "every_seconds": 900}, name="quarterly")
    paused = world.create({"type": "at", "at": to_rfc3339(burst)}, name="paused")
    assert world.api("POST", f"/jobs/{paused['id']}/pause").status == 200
    world.create({"type": "at", "at": to_rfc3339(now + timedelta(hours=2))}, name="later")
    for _ in range(5):
        job = {"task": {"type": "noop"}, "schedule": {"type": "at", "at": to_rfc3339(burst)}}
        assert world.api("POST", "/jobs", job, owner="bob").status == 201

    # When alice asks what comes in the next hour
    answer = world.api("GET", "/coming-up")

    # Then every minute of the hour is listed, and the counts are hers alone: the burst's minute holds
    # three runs named by their job, the rate job runs three times, the paused and later jobs not at all
    assert answer.status == 200, answer.body
    body = answer.body
    assert len(body["minutes"]) in (60, 61)
    assert parse_rfc3339(body["minutes"][0]["at"]) == now.replace(second=0, microsecond=0)
    counts = _counts(body)
    burst_minute = to_rfc3339(burst.replace(second=0))
    assert counts[burst_minute] == 3
    assert counts[to_rfc3339(burst.replace(second=0) + timedelta(minutes=1))] == 1
    named = next(m for m in body["minutes"] if m["at"] == burst_minute)["jobs"]
    assert [(job["name"], job["count"]) for job in named] == [("burst", 1)] * 3
    quarterly = [m for m in body["minutes"] if any(j["id"] == every["id"] for j in m["jobs"])]
    assert len(quarterly) == 3  # 15, 30 and 45 minutes ahead; the hour's end is not in it
    assert sum(counts.values()) == 3 + 1 + 3
    assert body["jobs_read"] == 6 and body["complete"] is True


def test_a_recurring_job_stops_counting_at_its_run_limit(world: World) -> None:
    # Given a job every minute that may run three times
    world.create({"type": "cron", "expression": "* * * * *"}, policy={"max_runs": 3})
    # When the coming hour is asked for
    body = world.api("GET", "/coming-up").body
    # Then it counts three runs, in three minutes
    assert sum(_counts(body).values()) == 3


def test_an_owner_with_many_jobs_that_are_not_active_has_a_bounded_read(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an ACTIVE job due in ten minutes, then twelve newer jobs cancelled, and lists that read at
    # most four jobs a page
    due = to_rfc3339(world.clock.now() + timedelta(minutes=10))
    world.create({"type": "at", "at": due}, name="oldest")
    world.clock.advance(1)
    for _ in range(12):
        job = world.create({"type": "at", "at": due}, name="cancelled")
        assert world.api("DELETE", f"/jobs/{job['id']}").status == 200
    world.store.list_read_budget = 4
    # When the coming hour is asked for with at most two pages
    monkeypatch.setattr(coming_up_route, "MAX_PAGES", 2)
    bounded = world.api("GET", "/coming-up").body
    # Then it stops after eight jobs read, and says its answer may be incomplete
    assert bounded["jobs_read"] == 0 and bounded["complete"] is False
    assert sum(_counts(bounded).values()) == 0
    # and with pages enough it reaches the ACTIVE job
    monkeypatch.setattr(coming_up_route, "MAX_PAGES", 4)
    whole = world.api("GET", "/coming-up").body
    assert whole["jobs_read"] == 1 and whole["complete"] is True
    assert sum(_counts(whole).values()) == 1
