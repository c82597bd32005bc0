"""A batch's runs at one instant end in one item (store/batch_ends.py): one write for a pack's ends,
not one a run; every read shows each job completed with its run; a change that lands while the run
is under way sends its end to its job's item; a pack whose ends were not written runs again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from punctual.execution.receipts import Disposition
from punctual.notify import execution_events
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.store.streams import execution_change
from tests.integration.test_api import pages
from tests.integration.test_execution_events import (
    _bus_with_queue,
    _executions,
    _received,
    _stream_records,
    streamed,
)
from tests.integration.test_packs import runs_counted, take_the_pack
from tests.integration.test_prepared_start import HoldingClock, take_before_the_instant
from tests.world import World, mocked_world

NOOP = {"type": "noop"}


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(HoldingClock(clock.now()), shard_count=1) as made:
        yield made


def ten_in_a_batch(world: World, seconds: int = 240) -> list[str]:
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=seconds))}
    answer = world.api("POST", "/jobs/batch", {"jobs": [{"task": NOOP, "schedule": at}] * 10})
    assert answer.status == 201, answer.body
    return [job["id"] for job in answer.body["items"]]


def items(world: World, prefix: str) -> list[dict[str, Any]]:
    scan = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in scan if i["pk"]["S"].startswith(prefix)]


def ends_written(world: World) -> dict[str, str]:
    """Each job whose end an ends item holds (e:) or that a change marked (m:), by job id."""
    found: dict[str, str] = {}
    for item in items(world, "ENDS#"):
        for name in item:
            if name[:2] in ("e:", "m:"):
                found[name[2:]] = name[:2]
    return found


def raw_job(world: World, job_id: str) -> dict[str, Any]:
    [item] = items(world, f"JOB#{job_id}")
    return item


def test_a_packs_runs_end_in_one_write_and_every_read_shows_them_completed(world: World) -> None:
    # Given ten jobs created in one batch for one instant
    ids = ten_in_a_batch(world)
    # When their instant comes and they run
    with world.counting_calls() as calls:
        world.run_for(300)
    # Then their ends are one write to their batch's ends item, none on their jobs' items
    assert calls["dynamodb.UpdateItem"] == 1
    assert ends_written(world) == dict.fromkeys(ids, "e:")
    assert {raw_job(world, job_id)["status"]["S"] for job_id in ids} == {"ACTIVE"}
    assert all("run" not in raw_job(world, job_id) for job_id in ids)
    # and every read shows each job completed with its run: its view, its executions, lists and
    # their filters
    for job_id in ids:
        job = world.job(job_id)
        assert (job["status"], job["outcome"]["status"]) == ("COMPLETED", "SUCCEEDED")
        [execution] = world.executions(job_id)
        assert (execution["status"], execution["attempts"], execution["lateness_ms"]) == ("SUCCEEDED", 1, 0)
    assert sorted(j for page in pages(world, "status=COMPLETED&limit=3") for j in page) == sorted(ids)
    assert [j for page in pages(world, "status=ACTIVE") for j in page] == []
    assert sorted(j for page in pages(world, "outcome=succeeded&limit=4") for j in page) == sorted(ids)


def test_a_job_s_item_expires_from_its_creation_and_a_change_keeps_it_again(world: World) -> None:
    ids = ten_in_a_batch(world, seconds=3600)
    retention = world.punctual.store.retention
    due = world.clock.now() + timedelta(seconds=3600)
    expected = int((due + timedelta(days=1) + retention).timestamp())
    assert {int(raw_job(world, job_id)["expires_at"]["N"]) for job_id in ids} == {expected}
    # (a change, which moves the job off its batch's ends item, keeps it as any active job is kept)
    later = to_rfc3339(due + timedelta(days=30))
    assert world.api("PATCH", f"/jobs/{ids[0]}", {"schedule": {"type": "at", "at": later}}).status == 200
    assert "expires_at" not in raw_job(world, ids[0])


def at_write(world: World, before: Any) -> list[set[str]]:
    """Call `before` as a pack writes its batch's ends, then write them; what each write left apart."""
    ends = world.punctual.worker.store.batch_ends
    real = ends.write
    apart: list[set[str]] = []

    def write(*args: Any) -> set[str]:
        before()
        left = real(*args)
        apart.append(left)
        return left

    ends.write = write  # type: ignore[method-assign]
    return apart


def paused_at_write(world: World, pack: Any, receipt: str, job_id: str) -> tuple[list[int], list[set[str]]]:
    """Fire the pack, `job_id` paused just before it writes its ends: the pause's answers, and what
    each write left apart."""
    paused: list[int] = []

    def pause() -> None:
        if not paused:
            paused.append(world.api("POST", f"/jobs/{job_id}/pause").status)

    apart = at_write(world, pause)
    take_before_the_instant(world, pack, receipt, lambda: None)
    return paused, apart


def test_a_pause_landing_while_the_runs_are_under_way_sends_that_run_s_end_to_its_job(world: World) -> None:
    ids = ten_in_a_batch(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given a job paused after its run started, just before its pack writes the ends
    paused, apart = paused_at_write(world, pack, receipt, ids[0])
    # Then the pause was acknowledged, and the write left that job's end apart: it went to its job
    # (the pause protocol's way: the run is kept, and resuming does not run it again)
    assert paused == [200]
    assert apart == [{ids[0]}]
    assert ends_written(world) == {**dict.fromkeys(ids[1:], "e:"), ids[0]: "m:"}
    assert sum(counts.values()) == 10
    [execution] = [e for e in world.executions(ids[0]) if e["status"] != "CANCELLED"]
    assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.job(ids[0])["status"] == "PAUSED"
    assert world.api("POST", f"/jobs/{ids[0]}/resume").status == 200
    world.run_for(300)
    assert sum(counts.values()) == 10
    for job_id in ids[1:]:
        assert world.job(job_id)["status"] == "COMPLETED"


def test_a_change_after_the_run_ended_finds_the_job_complete(world: World) -> None:
    ids = ten_in_a_batch(world)
    world.run_for(300)
    # When a job whose run ended in its batch's ends item is paused
    # Then it is complete: the pause does not apply, and it stays completed with its run
    assert world.api("POST", f"/jobs/{ids[0]}/pause").status == 409
    assert world.job(ids[0])["status"] == "COMPLETED"
    # and one cancelled is, as a completed job is (CANCELLED until it expires), its run kept
    assert world.api("DELETE", f"/jobs/{ids[1]}").status == 200
    assert world.job(ids[1])["status"] == "CANCELLED"
    for job_id in ids[:2]:
        [execution] = world.executions(job_id)
        assert execution["status"] == "SUCCEEDED"
    # and a change a completed job takes (its tags) applies, its run then on its item
    answer = world.api("PATCH", f"/jobs/{ids[2]}", {"tags": {"team": "a"}})
    assert answer.status == 200, answer.body
    assert (answer.body["status"], answer.body["tags"]) == ("COMPLETED", {"team": "a"})
    assert "run" in raw_job(world, ids[2])
    [execution] = world.executions(ids[2])
    assert execution["status"] == "SUCCEEDED"


def test_a_pack_whose_ends_could_not_be_written_runs_again_and_ends_once(world: World) -> None:
    ids = ten_in_a_batch(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    store = world.punctual.worker.store
    real = store.batch_ends.write

    def failing(*args: Any) -> set[str]:
        raise RuntimeError("store unreachable")

    # Given a worker whose write of the ends fails after its runs
    store.batch_ends.write = failing  # type: ignore[method-assign]
    clock = world.clock
    assert isinstance(clock, HoldingClock)
    clock.set(pack.scheduled_at - timedelta(seconds=2))
    clock.at_hold = lambda: None
    # Then its members are sent again, on their own (the message itself is done with)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    assert ends_written(world) == {}
    # When they come, the store working again
    store.batch_ends.write = real  # type: ignore[method-assign]
    world.run_for(600)
    # Then each ran again with the same id (at least once), and ended once, on its job
    assert Counter(counts.values()) == Counter({2: 10})
    for job_id in ids:
        [execution] = world.executions(job_id)
        assert execution["status"] == "SUCCEEDED"
        assert world.job(job_id)["status"] == "COMPLETED"


def test_a_pack_taken_again_after_its_ends_were_written_runs_none_of_them(world: World) -> None:
    ids = ten_in_a_batch(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    take_before_the_instant(world, pack, receipt, lambda: None)
    assert ends_written(world) == dict.fromkeys(ids, "e:")
    # When its message comes again, its lease run out
    world.clock.advance(600)
    assert world.punctual.packs.handle(pack, receipt, receive_count=2) is Disposition.DONE
    # Then nothing ran again
    assert sum(counts.values()) == 10


def test_the_ends_item_s_write_is_one_event_a_run(clock: ManualClock) -> None:
    with mocked_world(clock, shard_count=1) as world:
        streamed(world)
        events, sqs, queue = _bus_with_queue("punctual-batch-ends")
        ids = ten_in_a_batch(world)
        world.run_for(300)
        # (and a change to one of them after, which writes its run on its job's item)
        assert world.api("PATCH", f"/jobs/{ids[0]}", {"tags": {"team": "a"}}).status == 200
        assert "run" in raw_job(world, ids[0])
        execution_events.publish(_stream_records(world), execution_change, events, "punctual-batch-ends")
        every = _executions(_received(sqs, queue))
        by_job = {d["job_id"]: d for d in every}
        assert len(every) == len(by_job) == len(ids)
        for job_id in ids:
            [execution] = world.executions(job_id)
            detail = by_job[job_id]
            assert (detail["execution_id"], detail["status"], detail["owner"]) == (
                execution["id"],
                "SUCCEEDED",
                "alice",
            )
            assert (detail["started_at"], detail["finished_at"]) == (
                execution["started_at"],
                execution["finished_at"],
            )
        # and so with only final changes deployed (the records the mapping lets through then)
        final = execution_events.FINAL_STATUS_VALUES
        execution_events.publish(
            _stream_records(world, final),
            execution_change,
            events,
            "punctual-batch-ends",
            execution_events.FINAL,
        )
        assert sorted(d["job_id"] for d in _executions(_received(sqs, queue))) == sorted(ids)


def test_a_batch_s_jobs_of_a_named_task_end_on_their_own_items(world: World) -> None:
    # Given a batch of jobs running a named task (their items say it is in use while they are active)
    assert world.api("POST", "/tasks", {"name": "ping", "type": "noop"}).status == 201
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))}
    answer = world.api("POST", "/jobs/batch", {"jobs": [{"task": "ping", "schedule": at}] * 10})
    assert answer.status == 201, answer.body
    ids = [job["id"] for job in answer.body["items"]]
    # When they run
    world.run_for(300)
    # Then each end completed its job on its item (which no longer says the task is in use)
    assert ends_written(world) == {}
    for job_id in ids:
        assert raw_job(world, job_id)["status"]["S"] == "COMPLETED"
        assert "task_ref" not in raw_job(world, job_id)


def test_a_pack_with_few_of_a_batch_writes_their_ends_on_their_jobs(world: World) -> None:
    # Given three jobs of a batch at one instant (an ends item's write would cost its whole size)
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))}
    answer = world.api("POST", "/jobs/batch", {"jobs": [{"task": NOOP, "schedule": at}] * 3})
    ids = [job["id"] for job in answer.body["items"]]
    # When they run
    with world.counting_calls() as calls:
        world.run_for(300)
    # Then each end completed its job in a write of its own
    assert calls["dynamodb.UpdateItem"] == 3
    assert ends_written(world) == {}
    assert {raw_job(world, job_id)["status"]["S"] for job_id in ids} == {"COMPLETED"}


def test_a_pause_during_the_run_of_a_job_run_by_hand_before_marks_it_too(world: World) -> None:
    # Given a batch's job run by hand before its scheduled run (what it shows of its history is no
    # change: the API judges it as the worker does)
    ids = ten_in_a_batch(world)
    assert world.api("POST", f"/jobs/{ids[0]}/run").status in (200, 201, 202)
    world.run_for(5)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # When it is paused while its scheduled run is under way
    paused, apart = paused_at_write(world, pack, receipt, ids[0])
    # Then the pause marked it: its run's end went to its job, and a resume does not run it again
    assert paused == [200]
    assert apart == [{ids[0]}]
    assert world.api("POST", f"/jobs/{ids[0]}/resume").status == 200
    world.run_for(300)
    assert counts[pack.items[[i.job_id for i in pack.items].index(ids[0])].execution_id] == 1
    scheduled = [e for e in world.executions(ids[0]) if not e["manual"] and e["status"] != "CANCELLED"]
    assert [(e["status"], e["attempts"]) for e in scheduled] == [("SUCCEEDED", 1)]


def test_a_member_with_a_shorter_timeout_than_its_pack_s_longest_ends_on_its_job(world: World) -> None:
    # Given a batch at one instant whose jobs' timeouts differ (a pack writes its ends once all its
    # members have ended: a member's end must come no later than its own run's could)
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))}
    jobs = [{"task": NOOP, "schedule": at, "timeout_seconds": 30 if i else 300} for i in range(10)]
    answer = world.api("POST", "/jobs/batch", {"jobs": jobs})
    assert answer.status == 201, answer.body
    # When they run
    with world.counting_calls() as calls:
        world.run_for(300)
    # Then none of the ten deferred its end: too few share the longest timeout
    assert ends_written(world) == {}
    assert calls["dynamodb.UpdateItem"] == 10
