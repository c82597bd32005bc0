"""Filtered lists at size, and another owner's ids, through the API on moto: each filter reads its own
access path (docs/scaling.md, "Filtered lists"), and another owner's job costs the reads of a
missing one (docs/api.md, security). Counted in items read and calls made, not in time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

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


def test_a_filtered_list_over_many_other_jobs_reads_only_the_jobs_it_lists(world: World) -> None:
    # Given 600 of alice's jobs that match none of the filters below (more than a request's read budget)
    template = world.store.jobs.get(world.create(CRON, name="plain")["id"])
    others = [
        replace(template, id=f"job_other{i:04d}", created_at=template.created_at + timedelta(milliseconds=i))
        for i in range(600)
    ]
    world.store.jobs.put_new_many(others)
    # and two jobs, named zzz-…, tagged team:x, whose one-time runs failed
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=5))}
    failed = [world.create(at, task=FAIL, retry=ONCE, name=f"zzz-{i}", tags={"team": "x"}) for i in range(2)]
    world.run_for(30)
    for query in ("status=COMPLETED", "outcome=failed", "name_prefix=zzz", "tag=team:x", "tag=team"):
        # When alice lists her jobs with a filter
        with reading(world) as reads:
            answer = world.api("GET", "/jobs", query=query)
        # Then one page holds both, with no cursor, and the request read their two index entries
        # and their two jobs (and the executions their outcomes name), not the 600 others
        assert answer.status == 200, answer.body
        assert sorted(j["id"] for j in answer.body["items"]) == sorted(j["id"] for j in failed), query
        assert answer.body["next_cursor"] is None, query
        assert reads.entries == 2, query
        assert reads.items == 4, query  # two jobs, their two last executions
    # and a filter that matches none reads nothing past its (empty) path: one Query, no job read
    for query in ("status=CANCELLED", "outcome=succeeded", "name_prefix=nope", "tag=nope"):
        with reading(world) as reads:
            answer = world.api("GET", "/jobs", query=query)
        assert answer.body == {"items": [], "next_cursor": None}, query
        assert (reads.entries, reads.items) == (0, 0), query


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
