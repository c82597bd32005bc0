"""Filtered lists at size, and another owner's ids, through the API on moto: each filter reads its own
access path (docs/scaling.md, "Filtered lists"), one that most jobs match the owner's jobs, a
bounded read a request; and another owner's job costs the reads of a missing one (docs/api.md,
security). Counted in items read and calls made, not in time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import JobStatus, Outcome
from punctual.platform.timefmt import to_rfc3339
from tests.world import World

CRON = {"type": "cron", "expression": "0 0 1 1 *"}  # (never due in the test)
FAIL = {"type": "fail", "params": {"message": "no"}}
ONCE = {"max_attempts": 1}


class _Reads:
    """The DynamoDB calls made, in order, and what they read: index or table entries (Queries'
    ScannedCount) and items returned by GetItem and BatchGetItem."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.entries = 0
        self.items = 0

    def __call__(self, event_name: str, parsed: dict[str, Any], **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[1]
        self.calls.append(operation)
        if operation == "Query":
            self.entries += int(parsed.get("ScannedCount", 0))
        elif operation == "BatchGetItem":
            self.items += sum(len(found) for found in parsed.get("Responses", {}).values())


@contextmanager
def reading(world: World) -> Iterator[_Reads]:
    reads = _Reads()
    for client in world.store.clients:
        client.meta.events.register("after-call.dynamodb.*", reads)
    try:
        yield reads
    finally:
        for client in world.store.clients:
            client.meta.events.unregister("after-call.dynamodb.*", reads)


def _others(world: World, count: int) -> None:
    """`count` of alice's active cron jobs, named plain-…, created just after the jobs made so far."""
    template = world.store.jobs.get(world.create(CRON, name="plain")["id"])
    world.store.jobs.put_new_many(
        [
            replace(
                template, id=f"job_other{i:04d}", created_at=template.created_at + timedelta(milliseconds=i)
            )
            for i in range(count)
        ]
    )


def _pages(world: World, query: str) -> list[tuple[list[str], int]]:
    """Each page's job ids, and the index entries its request read, following the cursors."""
    pages: list[tuple[list[str], int]] = []
    cursor = None
    while True:
        with reading(world) as reads:
            answer = world.api("GET", "/jobs", query=query + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status == 200, answer.body
        pages.append(([j["id"] for j in answer.body["items"]], reads.entries))
        cursor = answer.body["next_cursor"]
        if cursor is None:
            return pages


def test_a_filtered_list_over_many_other_jobs_reads_only_the_jobs_it_lists(world: World) -> None:
    # Given 600 of alice's jobs that match none of the filters below (more than a request's read budget)
    _others(world, 600)
    # and two jobs, named zzz-…, tagged team:x, whose one-time runs failed
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=5))}
    failed = [world.create(at, task=FAIL, retry=ONCE, name=f"zzz-{i}", tags={"team": "x"}) for i in range(2)]
    world.run_for(30)
    for query in ("outcome=failed", "name_prefix=zzz", "tag=team:x", "tag=team"):
        # When alice lists her jobs with a filter
        with reading(world) as reads:
            answer = world.api("GET", "/jobs", query=query)
        # Then one page holds both, with no cursor, and the request read their two index entries
        # and their two jobs (which carry their runs), not the 600 others
        assert answer.status == 200, answer.body
        assert sorted(j["id"] for j in answer.body["items"]) == sorted(j["id"] for j in failed), query
        assert answer.body["next_cursor"] is None, query
        assert reads.entries == 2, query
        assert reads.items == 2, query  # two jobs, each with its run on its item
    # and a filter that matches none reads nothing past its (empty) path: no job read
    for query in ("status=CANCELLED", "status=PAUSED", "name_prefix=nope", "tag=nope"):
        with reading(world) as reads:
            answer = world.api("GET", "/jobs", query=query)
        assert answer.body == {"items": [], "next_cursor": None}, query
        assert (reads.entries, reads.items) == (0, 0), query


def test_a_status_or_outcome_most_jobs_have_is_read_from_the_owners_jobs_a_bounded_page_at_a_time(
    world: World,
) -> None:
    # Given two one-time jobs that failed and one that succeeded, then 60 active jobs, and lists that
    # read at most 50 jobs a request
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=5))}
    failed = [world.create(at, task=FAIL, retry=ONCE) for _ in range(2)]
    succeeded = world.create(at)
    world.run_for(30)
    _others(world, 60)
    world.store.list_read_budget = 50
    for query, expected in (
        ("status=COMPLETED", [*failed, succeeded]),
        ("outcome=succeeded", [succeeded]),
        ("status=ACTIVE&outcome=succeeded", []),
    ):
        # When alice lists them by a status or an outcome that no index holds (most jobs have it)
        pages = _pages(world, query)
        # Then the pages, followed by their cursors, hold exactly those jobs, newest first
        listed = [job_id for ids, _ in pages for job_id in ids]
        assert sorted(listed) == sorted(j["id"] for j in expected), query
        # each request reading at most the read budget of the owner's jobs (a page short, even empty)
        assert all(entries <= world.store.list_read_budget for _, entries in pages), (query, pages)
    assert len(_pages(world, "status=COMPLETED")) == 2


def test_a_job_paused_while_failing_is_listed_by_its_status_and_by_its_outcome(world: World) -> None:
    # Given an every-minute job whose runs fail, read before its first run
    every_minute = {"type": "cron", "expression": "* * * * *"}
    job = world.create(every_minute, task=FAIL, retry=ONCE)
    read_before = world.store.jobs.get(job["id"])
    world.run_for(70)
    assert world.job(job["id"])["outcome"]["status"] == "FAILED"

    def listed(query: str) -> list[str]:
        return [ids for page, _ in _pages(world, query) for ids in page]

    assert listed("outcome=failed") == [job["id"]] and listed("status=PAUSED") == []
    # When it is paused by a write that read it before its outcome (a pause racing the run's end)
    world.store.jobs.update(
        read_before, {"status": JobStatus.PAUSED, "next_run_at": None}, allowed_statuses=[JobStatus.ACTIVE]
    )
    # Then it is listed both as paused and as failed
    assert listed("status=PAUSED") == [job["id"]]
    assert listed("outcome=failed") == [job["id"]]
    assert listed("status=PAUSED&outcome=failed") == [job["id"]]
    # and once resumed, as failed only
    assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    assert listed("status=PAUSED") == [] and listed("outcome=failed") == [job["id"]]
    # and once it succeeds, in neither
    assert world.api("PATCH", f"/jobs/{job['id']}", {"task": {"type": "noop"}}).status == 200
    world.run_for(60)
    assert world.job(job["id"])["outcome"]["status"] == "SUCCEEDED"
    assert listed("outcome=failed") == [] and listed("outcome=succeeded") == [job["id"]]


def test_a_status_held_under_two_flags_pages_newest_first_across_both(world: World) -> None:
    # Given ten paused jobs, created a millisecond apart, every third also failing (flagged apart)
    template = world.store.jobs.get(world.create(CRON)["id"])
    failing = Outcome(ExecutionStatus.FAILED, template.created_at, "x", template.created_at)
    paused = [
        replace(
            template,
            id=f"job_paused{i:02d}",
            status=JobStatus.PAUSED,
            next_run_at=None,
            created_at=template.created_at + timedelta(milliseconds=i),
            outcome=failing if i % 3 == 0 else None,
        )
        for i in range(10)
    ]
    world.store.jobs.put_new_many(paused)
    world.store.list_read_budget = 4
    # When they are listed two a page, a request reading at most four entries
    pages = _pages(world, "status=PAUSED&limit=2")
    # Then each comes once, newest first, whichever flag it is under
    assert [job_id for ids, _ in pages for job_id in ids] == [j.id for j in reversed(paused)]
    assert all(entries <= 4 for _, entries in pages)


def test_a_job_without_a_name_of_its_own_is_found_by_its_id(world: World) -> None:
    # Given a job named by its id (the default: no by_name entry) and one named after that id
    plain = world.create(CRON)
    named = world.create(CRON, name=f"{plain['id']}-copy")
    # When listed by a name prefix that is the first job's id
    pages = _pages(world, f"name_prefix={plain['id']}&limit=1")
    # Then both come, the one named by its id first, a page each
    assert [ids for ids, _ in pages if ids] == [[plain["id"]], [named["id"]]]


def test_another_owners_job_answers_404_with_the_calls_of_a_missing_one(world: World) -> None:
    # Given bob's job, which has run, and has an extra run queued (its newest execution not ended)
    cron = {"type": "cron", "expression": "* * * * *"}
    bobs = world.api("POST", "/jobs", {"task": {"type": "noop"}, "schedule": cron}, owner="bob").body
    world.run_for(70)
    assert world.api("POST", f"/jobs/{bobs['id']}/run", owner="bob").status == 202
    for method, path, body in [
        ("GET", "/jobs/{id}", None),
        ("GET", "/jobs/{id}/executions", None),
        ("PATCH", "/jobs/{id}", {"name": "mine"}),
        ("POST", "/jobs/{id}/pause", None),
        ("DELETE", "/jobs/{id}", None),
    ]:
        # When alice asks for it, and for an id that does not exist
        with reading(world) as theirs:
            answer = world.api(method, path.format(id=bobs["id"]), body)
        with reading(world) as missing:
            other = world.api(method, path.format(id="job_00000000000000000000"), body)
        # Then both answer the same 404, after the same store calls
        assert answer.status == other.status == 404, (method, path)
        assert answer.body["message"].replace(bobs["id"], "x") == other.body["message"].replace(
            "job_00000000000000000000", "x"
        )
        assert theirs.calls == missing.calls, (method, path)


def test_a_name_prefix_with_a_tag_at_a_value_still_lists_by_name(world: World) -> None:
    # Given jobs created out of their names' order, each tagged t:1, and one tagged t:2
    for name, value in (("m3", "1"), ("m1", "1"), ("m2", "1"), ("m0", "2")):
        world.create({"type": "cron", "expression": "0 10 * * *"}, name=name, tags={"t": value})
    # When they are listed by a name prefix and the tag's value, a page at a time
    pages = _pages(world, "name_prefix=m&tag=t:1&limit=2")
    names = [world.job(job_id)["name"] for ids, _ in pages for job_id in ids]
    # Then they come by name, as with the prefix alone, and only those with that value
    assert names == ["m1", "m2", "m3"]
