"""A one-time job's run in a pack, stored on its job's item with the job's completion (one write for
both), reads as any execution: listed, filtered, shown as the job's last, and never run again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.domain.executions import Execution, execution_id_for
from punctual.domain.work import Pack
from punctual.execution.packs import PACK_LEASE_MIN
from punctual.execution.receipts import Disposition
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from punctual.store import keys
from punctual.store.streams import execution_change
from tests.integration.test_execution_events import _stream_records
from tests.integration.test_packs import runs_counted, take_the_pack
from tests.store.test_run_on_job_contract import sent_again_once_applied
from tests.world import World, mocked_world


@pytest.fixture
def one_shard(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, shard_count=1) as world:
        yield world


def at_one_instant(
    world: World, *tasks: dict[str, Any], **extra: Any
) -> tuple[datetime, list[dict[str, Any]]]:
    """One-time jobs due together 4 minutes ahead (a pack, taken under its lease)."""
    at = world.clock.now().replace(microsecond=0) + timedelta(seconds=240)
    jobs = [
        world.create({"type": "at", "at": to_rfc3339(at)}, task=task, retry={"max_attempts": 1}, **extra)
        for task in tasks
    ]
    return at, jobs


def stored(world: World, job_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job's item, and its executions' own items."""
    items = world.dynamodb_client.query(
        TableName=world.punctual.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.job_pk(job_id)}},
        ConsistentRead=True,
    )["Items"]
    [job] = [i for i in items if i["sk"]["S"] == keys.JOB_SK]
    return job, [i for i in items if keys.is_execution_sk(i["sk"]["S"])]


def listed(world: World, job_id: str, query: str) -> list[dict[str, Any]]:
    answer = world.api("GET", f"/jobs/{job_id}/executions", query=query)
    assert answer.status == 200, answer.body
    return list(answer.body["items"])


def test_a_packed_run_is_stored_on_its_job_and_listed_filtered_and_shown_as_any_execution(
    one_shard: World,
) -> None:
    world = one_shard
    # Given four one-time jobs due together, one of them failing
    noop = {"type": "noop"}
    sleep = {"type": "sleep", "params": {"seconds": 0}}
    at, jobs = at_one_instant(world, noop, noop, sleep, {"type": "fail"})
    assert len(jobs) >= PACK_LEASE_MIN
    failing = jobs[-1]
    # When their pack runs
    world.run_for(300)
    # Then each run is stored on its job's item, with the job's completion, and on no item of its own
    for job in jobs:
        item, executions = stored(world, job["id"])
        assert "run" in item and executions == []
        assert item["status"]["S"] == "COMPLETED"
    # and it is listed as its execution, with its status, times, lateness, attempts and error
    [execution] = listed(world, failing["id"], "")
    assert execution["id"] == execution_id_for(failing["id"], at, 1)
    assert (execution["status"], execution["attempts"], execution["error"]) == (
        "FAILED",
        1,
        "failed on purpose",
    )
    assert parse_rfc3339(execution["scheduled_at"]) == at
    started, finished = parse_rfc3339(execution["started_at"]), parse_rfc3339(execution["finished_at"])
    assert at <= started <= finished
    assert execution["lateness_ms"] == (started - at) // timedelta(milliseconds=1)
    [slept] = listed(world, jobs[2]["id"], "")
    assert (slept["status"], slept["result"]) == ("SUCCEEDED", {"slept_seconds": 0})
    # and the filters apply to it: a status, and a range of instants
    assert [e["id"] for e in listed(world, failing["id"], "status=FAILED")] == [execution["id"]]
    assert listed(world, failing["id"], "status=SUCCEEDED") == []
    assert listed(world, failing["id"], "status=RUNNING") == []
    assert [e["id"] for e in listed(world, failing["id"], f"since={to_rfc3339(at)}")] == [execution["id"]]
    assert listed(world, failing["id"], f"since={to_rfc3339(at + timedelta(milliseconds=1))}") == []
    assert listed(world, failing["id"], f"until={to_rfc3339(at)}") == []
    # and it is the job's last execution, named by its outcome
    shown = world.job(failing["id"])
    assert shown["last_execution"]["id"] == execution["id"]
    assert shown["last_execution"]["status"] == "FAILED" and shown["outcome"]["status"] == "FAILED"
    listed_jobs = {j["id"]: j for j in world.api("GET", "/jobs", query="limit=50").body["items"]}
    assert listed_jobs[jobs[0]["id"]]["last_execution"]["status"] == "SUCCEEDED"
    assert listed_jobs[failing["id"]]["last_execution"]["id"] == execution["id"]
    # and a later run by hand is listed with it, newest first
    assert world.api("POST", f"/jobs/{failing['id']}/run").status == 202
    world.run_for(10)
    assert [e["status"] for e in listed(world, failing["id"], "")] == ["FAILED", "FAILED"]
    assert [e["id"] for e in listed(world, failing["id"], "limit=1")] != [execution["id"]]


def test_a_page_of_one_goes_on_past_a_run_stored_on_its_job(one_shard: World) -> None:
    world = one_shard
    noop = {"type": "noop"}
    _, jobs = at_one_instant(world, *[noop] * PACK_LEASE_MIN)
    world.run_for(300)
    job_id = jobs[0]["id"]
    # Given a job with its run on its item and two runs by hand after it
    for _ in range(2):
        assert world.api("POST", f"/jobs/{job_id}/run").status == 202
        world.run_for(2)
    # When its executions are read a page of one at a time
    seen: list[str] = []
    query = "limit=1"
    while True:
        answer = world.api("GET", f"/jobs/{job_id}/executions", query=query)
        seen += [e["id"] for e in answer.body["items"]]
        cursor = answer.body.get("next_cursor")
        if not cursor:
            break
        query = f"limit=1&cursor={cursor}"
    # Then each shows once, newest first, the run on the job's item last
    assert len(seen) == len(set(seen)) == 3
    assert seen[-1] == execution_id_for(job_id, parse_rfc3339(jobs[0]["next_run_at"]), 1)


def test_a_pack_taken_again_after_its_runs_are_on_their_jobs_runs_none_of_them_again(
    one_shard: World,
) -> None:
    world = one_shard
    noop = {"type": "noop"}
    _, jobs = at_one_instant(world, *[noop] * 6)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    world.clock.set(pack.scheduled_at)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    assert all("run" in stored(world, job["id"])[0] for job in jobs)
    # When the same pack comes back once its lease ran out (its worker seemed to die), and again
    # guarded, and one member alone (a marker sent again)
    world.clock.advance(15 * 60)
    again = [
        pack,
        Pack(pack.scheduled_at, pack.items, pack.shard, guarded=True),
        Pack(pack.scheduled_at, pack.items[:1], pack.shard, guarded=True),
    ]
    # Then each finds its members ended: none runs again, nothing more is stored
    for copy in again:
        assert world.punctual.packs.handle(copy, "receipt") is Disposition.DONE
    assert sorted(counts[item.execution_id] for item in pack.items) == [1] * 6
    for job in jobs:
        assert stored(world, job["id"])[1] == []
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"


def test_a_run_that_would_make_its_job_item_over_a_write_unit_is_stored_on_its_own(
    one_shard: World,
) -> None:
    world = one_shard
    # Given one-time jobs due together: two plain, one whose tags make its item large, and one whose
    # run fails with a long error
    noop = {"type": "noop"}
    at, jobs = at_one_instant(world, noop, noop)
    tags = {f"tag{n}": "x" * 100 for n in range(8)}
    large = world.create({"type": "at", "at": to_rfc3339(at)}, task=noop, tags=tags)
    long_error = world.create(
        {"type": "at", "at": to_rfc3339(at)},
        task={"type": "fail", "params": {"message": "e" * 300}},
        retry={"max_attempts": 1},
    )
    # When their pack runs
    world.run_for(300)
    # Then the large job's run and the long error each have an item of their own, as before (the
    # job completed by its own write), the plain ones are on their jobs
    for job in (large, long_error):
        item, executions = stored(world, job["id"])
        assert "run" not in item and item["status"]["S"] == "COMPLETED"
        assert [e["status"]["S"] for e in executions] == ["SUCCEEDED" if job is large else "FAILED"]
    for job in jobs:
        item, executions = stored(world, job["id"])
        assert "run" in item and executions == []
    # and all read alike
    assert world.executions(large["id"])[0]["status"] == "SUCCEEDED"
    [failed] = world.executions(long_error["id"])
    assert (failed["status"], failed["error"]) == ("FAILED", "e" * 300)


def test_a_run_whose_job_was_paused_meanwhile_is_stored_on_its_own_and_noted(one_shard: World) -> None:
    world = one_shard
    noop = {"type": "noop"}
    _, jobs = at_one_instant(world, *[noop] * PACK_LEASE_MIN)
    pack, receipt = take_the_pack(world)
    paused = jobs[0]
    # Given one job paused while its run is under way (after the worker read it)
    attempts = world.punctual.worker._attempts
    real = attempts.run

    def run(job: Any, execution: Any, *args: Any, **kwargs: Any) -> Any:
        if job.id == paused["id"]:
            assert world.api("POST", f"/jobs/{paused['id']}/pause").status == 200
        return real(job, execution, *args, **kwargs)

    attempts.run = run  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    # Then its run is stored on an item of its own and the job notes that it ran (resuming it runs
    # nothing), as before
    item, executions = stored(world, paused["id"])
    assert "run" not in item and item["status"]["S"] == "PAUSED" and "ran_at" in item
    assert [e["status"]["S"] for e in executions] == ["SUCCEEDED"]
    assert world.api("POST", f"/jobs/{paused['id']}/resume").body["status"] == "COMPLETED"


def test_a_completing_write_retried_after_it_applied_leaves_one_record_one_event_one_outcome(
    one_shard: World,
) -> None:
    world = one_shard
    world.dynamodb_client.update_table(
        TableName=world.punctual.settings.table_name,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    noop = {"type": "noop"}
    _, jobs = at_one_instant(world, *[noop] * PACK_LEASE_MIN)
    pack, receipt = take_the_pack(world)
    outcomes: list[str] = []
    job_store = world.punctual.worker.store.jobs
    for name in ("complete", "record_outcome", "note_ran_while_paused"):
        real = getattr(job_store, name)

        def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            outcomes.append(_name)
            return _real(*args, **kwargs)

        setattr(job_store, name, spy)
    # Given the client sending a member's completing write again after it applied (its answer lost)
    world.clock.set(pack.scheduled_at)
    with sent_again_once_applied(world.punctual.store, naming='"#run"') as retried:
        # When the pack runs
        assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    assert retried
    # Then every run is stored once, on its job, with no item of its own
    for job in jobs:
        item, executions = stored(world, job["id"])
        assert "run" in item and item["status"]["S"] == "COMPLETED" and executions == []
        assert item.get("failures") is None
    # and the stream carries one end of each, and no outcome was written again
    ends: list[str] = []
    for record in _stream_records(world):
        change = execution_change(record)
        if isinstance(change, Execution):
            ends.append(change.id)
        elif change is not None:
            ends.append(str(change[0]["id"]))
    assert sorted(ends) == sorted(item.execution_id for item in pack.items)
    assert outcomes == []
