"""Listing jobs: page limits, and cursors refused when altered, overlong, or carrying a key their list
could not have returned.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any
from unittest import mock

import boto3
import pytest

from punctual.api.responses import ANSWER_MAX_BYTES
from punctual.jobs import named_tasks
from punctual.platform import aws
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.ports import pages as page_budget
from punctual.ports.pages import PAGE_BYTES
from punctual.store import job_views
from tests.integration.api_edges import CRON, assert_bad_input, call
from tests.world import World, mocked_world


# ------------------------------------------------------------------------------------------------
# Listing and cursors.
# ------------------------------------------------------------------------------------------------
def test_list_limits_and_cursors(world: World) -> None:
    ids = []
    for _ in range(3):
        ids.append(world.create(CRON)["id"])
        world.clock.advance(1)
    for query in ["limit=0", "limit=101", "limit=-1", "limit=", "limit=x", "status=", "status=active"]:
        assert_bad_input(world.api("GET", "/jobs", query=query), query.split("=")[0])
    full = world.api("GET", "/jobs", query="limit=100").body
    assert [j["id"] for j in full["items"]] == list(reversed(ids)) and full["next_cursor"] is None
    one = world.api("GET", "/jobs", query="limit=1").body
    cursor = one["next_cursor"]
    assert cursor and [j["id"] for j in one["items"]] == [ids[2]]
    execs_cursor = None
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.run_for(150)
    execs_cursor = world.api("GET", f"/jobs/{job['id']}/executions", query="limit=1").body["next_cursor"]
    assert execs_cursor
    for owner, path, query in [
        ("bob", "/jobs", f"cursor={cursor}"),
        ("alice", "/jobs", f"cursor={execs_cursor}"),
        ("alice", f"/jobs/{ids[0]}/executions", f"cursor={execs_cursor}"),
        ("alice", f"/jobs/{job['id']}/executions", f"cursor={cursor}"),
        ("alice", "/jobs", "cursor=%C3%A9%00"),
        ("alice", "/jobs", "cursor=" + cursor[:-4]),
    ]:
        answer = world.api("GET", path, owner=owner, query=query)
        assert answer.status == 400, (owner, path, query, answer.body)
        assert "items" not in answer.body
    bob_execs = world.api("GET", f"/jobs/{job['id']}/executions", owner="bob", query=f"cursor={execs_cursor}")
    assert bob_execs.status in (400, 404) and "items" not in bob_execs.body


def test_an_altered_or_overlong_cursor_is_400(world: World) -> None:
    for _ in range(3):
        world.create(CRON)
        world.clock.advance(1)
    cursor = world.api("GET", "/jobs", query="limit=1").body["next_cursor"]
    # docs/api.md: "an altered or foreign cursor answers 400"
    padded = world.api("GET", "/jobs", query="cursor=" + cursor + "A" * 5000)  # too long: 422
    junk = world.api("GET", "/jobs", query="cursor=" + cursor[:5] + "." + cursor[5:])  # b64 skips '.': 200
    assert (padded.status, junk.status) == (400, 400), (padded.body, junk.body)


# ------------------------------------------------------------------------------------------------
# A cursor signed by this deployment but carrying a key its list could not have returned: 400.
# ------------------------------------------------------------------------------------------------
def test_a_signed_cursor_with_a_malformed_key_is_400(world: World) -> None:
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.clock.advance(1)
    other = world.create(CRON)
    world.run_for(150)
    cursors = world.punctual.cursors
    jobs_key = {"pk": f"JOB#{job['id']}", "sk": "JOB", "owner_pk": "OWNER#alice", "owner_sk": "1#x"}
    execs_key = {"pk": f"JOB#{job['id']}", "sk": "EXEC#2026-12-01T09:00:00.000Z#x"}
    bad_jobs_keys = [
        {"pk": 5, "sk": "JOB", "owner_pk": "OWNER#alice", "owner_sk": "x"},
        {**jobs_key, "owner_sk": {"S": "x"}},
        {**jobs_key, "owner_sk": ["x"]},
        {**jobs_key, "owner_sk": None},
        {**jobs_key, "owner_sk": ""},
        {**jobs_key, "owner_pk": "OWNER#bob"},
        {**jobs_key, "pk": "IDEM#x"},
        {**jobs_key, "sk": "EXEC#x"},
        {**jobs_key, "extra": "x"},
        {"pk": f"JOB#{job['id']}", "sk": "JOB"},
        {"x": "y"},
    ]
    bad_execs_keys = [
        {**execs_key, "sk": 1},
        {**execs_key, "sk": {"nested": True}},
        {**execs_key, "pk": f"JOB#{other['id']}"},
        {**execs_key, "sk": "JOB"},
        {**execs_key, "owner_pk": "OWNER#alice"},
        {"pk": execs_key["pk"]},
    ]
    for key in bad_jobs_keys:
        for status in ["", "ACTIVE"]:
            cursor = cursors.encode(key, owner="alice", scope=f"jobs:{status}")
            query = f"cursor={cursor}" + (f"&status={status}" if status else "")
            answer = call(world, "GET", "/jobs", query=query)
            assert (answer.status, answer.body.get("field")) == (400, "cursor"), (key, status, answer.body)
    for key in bad_execs_keys:
        cursor = cursors.encode(key, owner="alice", scope=f"executions:{job['id']}")
        answer = call(world, "GET", f"/jobs/{job['id']}/executions", query=f"cursor={cursor}")
        assert (answer.status, answer.body.get("field")) == (400, "cursor"), (key, answer.body)
    # while the cursors the API hands out still page on
    page = world.api("GET", "/jobs", query="limit=1").body
    assert world.api("GET", "/jobs", query=f"limit=1&cursor={page['next_cursor']}").status == 200
    page = world.api("GET", f"/jobs/{job['id']}/executions", query="limit=1").body
    assert page["next_cursor"], page
    follow = world.api("GET", f"/jobs/{job['id']}/executions", query=f"limit=1&cursor={page['next_cursor']}")
    assert follow.status == 200 and follow.body["items"], follow.body


def test_on_aws_the_cursor_secret_is_read_from_secrets_manager_once(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment told the secret's id, not its value (the value is in no configuration)
    reads: list[str] = []
    real = aws.secret_string
    monkeypatch.setattr(
        aws, "secret_string", lambda s, secret_id: reads.append(secret_id) or real(s, secret_id)
    )
    with mocked_world(clock, cursor_secret_arn="punctual-cursor-secret") as world:
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        secrets.create_secret(Name="punctual-cursor-secret", SecretString="a-deployed-secret")
        for _ in range(3):
            world.create(CRON)
        # When its jobs are listed a page at a time
        first = world.api("GET", "/jobs", query="limit=1").body
        second = world.api("GET", "/jobs", query=f"limit=1&cursor={first['next_cursor']}")
        # Then the pages follow on, signed with the deployed secret, read once
        assert second.status == 200 and second.body["items"][0]["id"] != first["items"][0]["id"]
        assert reads == ["punctual-cursor-secret"]
        # and the cursor is signed with the deployed secret, not the local stack's default
        assert signed_with("a-deployed-secret", first["next_cursor"])
        assert not signed_with(Settings().cursor_secret, first["next_cursor"])


def signed_with(secret: str, cursor: str) -> bool:
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    key = hashlib.sha256(secret.encode()).digest()
    return hmac.compare_digest(raw[:16], hmac.new(key, raw[16:], hashlib.sha256).digest()[:16])


def test_a_cursor_secret_that_cannot_be_read_answers_503_not_500(clock: ManualClock) -> None:
    # Given a deployment whose cursor secret cannot be read (here: none by that name)
    with mocked_world(clock, cursor_secret_arn="no-such-secret") as world:
        for _ in range(2):
            world.create(CRON)
        # When a page that needs a cursor is asked / Then it is 503 (retry), not a failure
        answer = world.api("GET", "/jobs", query="limit=1")
        assert answer.status == 503, answer.body


# ------------------------------------------------------------------------------------------------
# Pages within what Lambda answers: large jobs make a short page and a cursor.
# ------------------------------------------------------------------------------------------------
def carried(answer: Any) -> int:
    """An answer's bytes as Lambda carries it: its JSON inside the response's body string."""
    return len(json.dumps(json.dumps(answer, separators=(",", ":"))))


def every_page(world: World, path: str, query: str) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        answer = world.api("GET", path, query=query + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status == 200, answer.body
        pages.append(answer.body)
        cursor = answer.body["next_cursor"]
        if cursor is None:
            return pages


def test_a_page_of_large_jobs_stops_within_its_budget_and_goes_on_from_there(world: World) -> None:
    # Given twenty jobs, each with about 240 KB of parameters (about 4.8 MB in all), and a small one
    large = {"type": "http", "params": {"url": "https://hooks.example.com/run", "body": "x" * 240_000}}
    created = []
    for _ in range(2):
        answer = world.api("POST", "/jobs/batch", {"jobs": [{"task": large, "schedule": CRON}] * 10})
        assert answer.status == 201, answer.body
        created += [job["id"] for job in answer.body["items"]]
        world.clock.advance(1)
    created.append(world.create(CRON)["id"])
    # When they are listed a hundred at a time, following the cursor
    pages = every_page(world, "/jobs", "limit=100")
    # Then the first page stops once its jobs take the budget, short of the limit, with a cursor
    first = pages[0]
    assert 1 < len(first["items"]) < 21 and first["next_cursor"] is not None
    sizes = [answer_bytes_of(job) for job in first["items"]]
    assert sum(sizes[:-1]) < PAGE_BYTES <= sum(sizes)
    # and every page stays within what one answer may take
    assert all(carried(page) <= ANSWER_MAX_BYTES for page in pages)
    # and the pages list every job once, newest first
    listed = [job["id"] for page in pages for job in page["items"]]
    assert len(listed) == len(set(listed)) == len(created)
    assert set(listed) == set(created) and listed[0] == created[-1]


def answer_bytes_of(job: dict[str, Any]) -> int:
    text = json.dumps(job, separators=(",", ":"))
    return len(text) + text.count('"') + text.count("\\")


def test_a_page_of_large_named_tasks_stops_early_too(world: World) -> None:
    # Given five named tasks with large default parameters, and a budget of three of them
    for i in range(5):
        answer = world.api(
            "POST",
            "/tasks",
            {
                "name": f"t{i}",
                "type": "http",
                "params": {"url": "https://hooks.example.com/run", "body": "y" * 200_000},
            },
        )
        assert answer.status == 201, answer.body
    # When they are listed, following the cursor
    with mock.patch.object(named_tasks, "PAGE_BYTES", 500_000):
        pages = every_page(world, "/tasks", "limit=50")
    # Then pages of three and two list them all, once each, by name
    assert [len(page["items"]) for page in pages] == [3, 2]
    assert [t["name"] for page in pages for t in page["items"]] == [f"t{i}" for i in range(5)]


def test_a_page_of_executions_stops_early_too(world: World) -> None:
    # Given a job with eight executions, each failing with a long error, and a budget of three of them
    job = world.create(
        {"type": "rate", "every_seconds": 60}, task={"type": "fail", "params": {"message": "e" * 900}}
    )
    world.run_for(8 * 60 + 30)
    executions = world.executions(job["id"])
    assert len(executions) >= 8
    budget = sum(answer_bytes_of(e) for e in executions[:3]) - 1
    # When they are listed, following the cursor
    with mock.patch.object(page_budget, "PAGE_BYTES", budget):
        pages = every_page(world, f"/jobs/{job['id']}/executions", "limit=100")
    # Then each page but the last holds three, and the pages list every execution once, newest first
    assert len(pages) >= 3
    assert [len(page["items"]) for page in pages[:-1]] == [3] * (len(pages) - 1)
    listed = [e["id"] for page in pages for e in page["items"]]
    assert listed == [e["id"] for e in executions]


def test_pausing_by_tag_answers_a_page_within_its_budget_too(world: World) -> None:
    # Given six tagged jobs with large parameters, and a budget of two of them
    large = {"type": "http", "params": {"url": "https://hooks.example.com/run", "body": "z" * 100_000}}
    ids = [world.create(CRON, task=large, tags={"team": "a"})["id"] for _ in range(6)]
    budget = 2 * answer_bytes_of(world.job(ids[0])) - 1
    # When they are paused by their tag, following the cursor
    pages, cursor = [], None
    with mock.patch.object(job_views, "PAGE_BYTES", budget):
        while True:
            query = "tag=team:a" + (f"&cursor={cursor}" if cursor else "")
            answer = world.api("POST", "/jobs/pause", query=query)
            assert answer.status == 200, answer.body
            pages.append(answer.body)
            cursor = answer.body["next_cursor"]
            if cursor is None:
                break
    # Then each answer changes two, and every job is paused once
    assert [len(page["changed"]) for page in pages if page["changed"]] == [2, 2, 2]
    changed = [job["id"] for page in pages for job in page["changed"]]
    assert sorted(changed) == sorted(ids)
    assert {world.job(i)["status"] for i in ids} == {"PAUSED"}
