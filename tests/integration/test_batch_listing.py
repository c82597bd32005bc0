"""A batch's jobs without names of their own are listed by one list entry of the batch's: every list
and filter shows each of them once, in by_owner's order, across pages, before and after they change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual.platform.timefmt import to_rfc3339
from punctual.store import keys
from tests.integration.test_api import pages
from tests.integration.test_batch import stores_only_the_first_job
from tests.world import World

NOOP = {"type": "noop"}


def at(world: World, seconds: float) -> dict[str, str]:
    return {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=seconds))}


def batch(world: World, jobs: list[dict[str, Any]], **kwargs: Any) -> list[str]:
    answer = world.api("POST", "/jobs/batch", {"jobs": jobs}, **kwargs)
    assert answer.status == 201, answer.body
    return [job["id"] for job in answer.body["items"]]


def list_entries(world: World) -> list[dict[str, Any]]:
    scan = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in scan if keys.is_list_entry_pk(i["pk"]["S"])]


def created_mixed(world: World) -> list[str]:
    """A job, a batch of 20, a job, a batch of 15 with one named job: ids newest first, as listed."""
    first = world.create(at(world, 600))["id"]
    world.clock.advance(1)
    b1 = batch(world, [{"task": NOOP, "schedule": at(world, 600)}] * 20)
    world.clock.advance(1)
    middle = world.create(at(world, 600))["id"]
    world.clock.advance(1)
    b2 = batch(world, [{"task": NOOP, "schedule": at(world, 600 + i)} for i in range(14)])
    world.clock.advance(1)
    named = batch(world, [{"name": "named", "task": NOOP, "schedule": at(world, 600)}])
    # (same-millisecond jobs list by id, newest first)
    return [*named, *sorted(b2, reverse=True), middle, *sorted(b1, reverse=True), first]


@pytest.mark.parametrize("limit", [1, 7, 16])  # (16: a page ends just before a batch)
def test_a_list_pages_through_batches_and_single_jobs_each_once_newest_first(
    world: World, limit: int
) -> None:
    # Given single jobs and two batches, created a second apart
    expected = created_mixed(world)
    # Then the batches wrote one list entry each, and no by_owner entry a job
    assert len(list_entries(world)) == 2
    # When alice pages through her jobs
    seen = [job_id for page in pages(world, f"limit={limit}") for job_id in page]
    # Then she sees every job once, newest first, across page ends inside a batch's entry
    assert seen == expected
    assert all(len(page) <= limit for page in pages(world, f"limit={limit}"))
    # and bob sees none of them
    assert pages(world, "limit=10", owner="bob") == [[]]


def test_filters_show_a_batch_job_once_whatever_happens_to_it(world: World) -> None:
    # Given a batch of six jobs due in four minutes, one of which fails and one of which is paused
    ids = batch(
        world,
        [
            {
                "task": {"type": "fail"} if i == 0 else NOOP,
                "schedule": at(world, 240),
                "retry": {"max_attempts": 1},
            }
            for i in range(6)
        ],
    )
    failing = ids[0]
    paused = ids[1]
    assert world.api("POST", f"/jobs/{paused}/pause").status == 200
    # When they run
    world.run_for(300)
    everyone = [job_id for page in pages(world, "limit=4") for job_id in page]
    # Then the plain list shows each once; the paused one and the failed one have entries of their own
    assert sorted(everyone) == sorted(ids)
    assert [j for page in pages(world, "status=PAUSED") for j in page] == [paused]
    assert [j for page in pages(world, "outcome=failed") for j in page] == [failing]
    succeeded = [j for page in pages(world, "outcome=succeeded&limit=2") for j in page]
    assert sorted(succeeded) == sorted(set(ids) - {failing, paused})
    completed = [j for page in pages(world, "status=COMPLETED&limit=3") for j in page]
    assert sorted(completed) == sorted(set(ids) - {paused})
    # and a job that succeeded wrote no index entry of its own
    stored = {
        i["id"]["S"]: i
        for i in world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
        if i["sk"]["S"] == keys.JOB_SK
    }
    assert {job_id for job_id in ids if "owner_pk" in stored[job_id]} == {failing, paused}


def test_a_cursor_inside_a_batch_names_its_entry_and_a_forged_one_is_refused(world: World) -> None:
    # Given a batch of five
    batch(world, [{"task": NOOP, "schedule": at(world, 600)}] * 5)
    # When a page ends part way through it
    first = world.api("GET", "/jobs", query="limit=2").body
    cursor = first["next_cursor"]
    assert cursor is not None
    rest = world.api("GET", "/jobs", query=f"limit=10&cursor={cursor}").body
    # Then the next page goes on from the third job
    assert len(first["items"]) + len(rest["items"]) == 5 and rest["next_cursor"] is None
    # and a cursor of this list is refused by a filter that reads another path
    refused = world.api("GET", "/jobs", query=f"status=PAUSED&cursor={cursor}")
    assert refused.status == 400, refused.body


def test_a_batch_retried_after_failing_part_way_lists_each_job_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch of four whose write stored its list entry and first job, then failed
    store = world.store
    real = stores_only_the_first_job(world, monkeypatch)
    jobs = [{"task": NOOP, "schedule": at(world, 600)}] * 4
    failed = world.api("POST", "/jobs/batch", {"jobs": jobs}, headers={"Idempotency-Key": "again"})
    assert failed.status == 503
    monkeypatch.setattr(store.jobs, "put_new_many", real)
    # When it is retried with its key
    ids = batch(world, jobs, headers={"Idempotency-Key": "again"})
    # Then the list shows the four, each once
    assert sorted(j for page in pages(world, "limit=3") for j in page) == sorted(ids)


def follow(world: World, first: dict[str, Any], query: str) -> list[str]:
    """The ids of a first page and of every page after it, following next_cursor."""
    seen = [job["id"] for job in first["items"]]
    cursor = first["next_cursor"]
    while cursor:
        page = world.api("GET", "/jobs", query=f"{query}&cursor={cursor}").body
        seen += [job["id"] for job in page["items"]]
        cursor = page["next_cursor"]
    return seen


def test_a_job_paused_while_a_list_pages_through_its_batch_is_listed_once(world: World) -> None:
    # Given a batch of three, and a first page of one that stops inside the batch's entry
    ids = sorted(batch(world, [{"task": NOOP, "schedule": at(world, 600)}] * 3), reverse=True)
    first = world.api("GET", "/jobs", query="limit=1").body
    assert [job["id"] for job in first["items"]] == [ids[0]]
    # When the next job is paused meanwhile (it moves to an entry of its own)
    assert world.api("POST", f"/jobs/{ids[1]}/pause").status == 200
    # Then paging on still shows every job, once
    assert sorted(follow(world, first, "limit=1")) == sorted(ids)


def test_jobs_failing_while_a_list_pages_through_their_batch_are_listed_once(world: World) -> None:
    # Given a batch of three that will fail, and a first page of one
    fail = {"task": {"type": "fail"}, "schedule": at(world, 240), "retry": {"max_attempts": 1}}
    ids = batch(world, [fail] * 3)
    first = world.api("GET", "/jobs", query="limit=1").body
    # When they all fail meanwhile (each gains an owner_pk for by_flag)
    world.run_for(300)
    # Then paging on shows each once, and the failed filter shows all three
    assert sorted(follow(world, first, "limit=1")) == sorted(ids)
    assert sorted(j for page in pages(world, "outcome=failed&limit=2") for j in page) == sorted(ids)


def test_a_name_prefix_that_is_a_batch_jobs_id_finds_it(world: World) -> None:
    ids = batch(world, [{"task": NOOP, "schedule": at(world, 600)}] * 3)
    answer = world.api("GET", "/jobs", query=f"name_prefix={ids[0]}&limit=1")
    assert answer.status == 200, answer.body
    assert [job["id"] for job in answer.body["items"]] == [ids[0]]


def test_a_filtered_list_reads_at_most_its_budget_a_request_inside_a_batch_too(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given six batches of a hundred (600 jobs, over a request's read budget of 500)
    ids: list[str] = []
    for _ in range(6):
        ids += batch(world, [{"task": NOOP, "schedule": at(world, 600)}] * 100)
        world.clock.advance(1)
    read: list[int] = []
    real = world.store.jobs.get_many

    def counting(job_ids: Any) -> Any:
        wanted = list(job_ids)
        read.append(len(wanted))
        return real(wanted)

    monkeypatch.setattr(world.store.jobs, "get_many", counting)
    budget = world.store.table.list_read_budget
    # When a filter that no job matches pages through them, and one that every job matches
    cursor: str | None = ""
    requests = 0
    while cursor is not None:
        read.clear()
        answer = world.api(
            "GET", "/jobs", query="status=COMPLETED&limit=100" + (f"&cursor={cursor}" if cursor else "")
        )
        assert answer.status == 200 and answer.body["items"] == []
        # Then each request reads at most the budget, and the cursor goes on from inside a batch
        assert sum(read) <= budget
        cursor = answer.body["next_cursor"]
        requests += 1
    assert requests == 2
    active = [j for page in pages(world, "status=ACTIVE&limit=100") for j in page]
    assert sorted(active) == sorted(ids)
