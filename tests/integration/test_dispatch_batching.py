"""Dispatch in batches: no execution is overwritten, nothing is sent twice without need, and a
marker an API request is enqueueing is left to it until its claim runs out."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.errors import UnreadableItem
from punctual.domain.executions import execution_id_for
from punctual.domain.models import DueMarker, marker_for
from punctual.domain.work import WorkItem
from punctual.execution.dead_letters import dead_letter
from punctual.execution.receipts import UNREADABLE_RETRY_SECONDS
from punctual.platform.timefmt import parse_rfc3339, to_epoch_ms, to_rfc3339
from punctual.scheduling import dispatch
from punctual.scheduling.dispatch import DispatchResult, release_quarantined
from punctual.scheduling.handoff import HANDOFF_CLAIM
from tests.receiver import receiver
from tests.world import World


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def markers(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("DUE#")]


def hooked_job(world: World, url: str) -> dict[str, Any]:
    """A job due in 240 s calling `url`."""
    return world.create({"type": "at", "at": at(world, 240)}, task={"type": "http", "params": {"url": url}})


def marker_of(world: World, job: dict[str, Any]) -> DueMarker:
    scheduled = parse_rfc3339(job["next_run_at"])
    stored = world.store.jobs.get(job["id"])
    return DueMarker(
        job["id"],
        execution_id_for(job["id"], scheduled, stored.schedule_version),
        scheduled,
        stored.schedule_version,
    )


def dispatch_stored(world: World, marker: DueMarker) -> DispatchResult:
    """Dispatch the marker as an extra run's is: its execution read first, and stored as QUEUED
    before its message is sent."""
    return world.punctual.dispatcher.dispatch([replace(marker, manual=True)])


@pytest.mark.usefixtures("claim_path")
def test_a_repeated_dispatch_leaves_a_finished_execution_as_it_is_and_sends_nothing(world: World) -> None:
    # Given a job that ran to SUCCEEDED, and its marker filed again (an interrupted dispatch's leftover)
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    marker = marker_of(world, job)
    world.run_for(300)
    assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"
    marker = replace(marker, soon=True)
    world.store.markers.put(marker)
    # When it is dispatched again as an execution stored before its send is (an extra run's)
    with world.counting_calls() as calls:
        result = dispatch_stored(world, marker)
    # Then nothing is written over it or sent, and the marker is gone
    assert [m.execution_id for m in result.skipped] == [marker.execution_id]
    assert calls["sqs.SendMessageBatch"] == 0
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1
    assert world.unread_markers() == []


def test_a_repeated_dispatch_of_a_finished_execution_sends_a_duplicate_the_worker_drops(
    world: World,
) -> None:
    # Given a job that ran to SUCCEEDED, and its marker filed again (an interrupted dispatch's leftover)
    with receiver() as hook:
        world.tick()
        job = hooked_job(world, hook.url)
        marker = marker_of(world, job)
        world.run_for(300)
        assert len(hook.deliveries) == 1
        marker = replace(marker, soon=True)
        world.store.markers.put(marker)
        # When the scanner's dispatcher (which stores no executions, so reads none) dispatches it again
        with world.counting_calls() as calls:
            result = world.punctual.dispatcher.dispatch([marker])
        world.drain()
        # Then it sent the message again, and the worker dropped it: nothing ran twice or changed
        assert [m.execution_id for m in result.enqueued] == [marker.execution_id]
        assert calls["sqs.SendMessageBatch"] == 1
        assert len(hook.deliveries) == 1
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
        assert world.unread_markers() == []


def test_a_marker_dispatched_again_after_its_run_never_resets_the_execution(world: World) -> None:
    with receiver() as hook:
        # Given a job that ran
        job = world.create(
            {"type": "at", "at": at(world, 5)}, task={"type": "http", "params": {"url": hook.url}}
        )
        world.run_for(10)
        [done] = world.executions(job["id"])
        assert done["status"] == "SUCCEEDED"
        # When its marker is dispatched again (an overlapping tick, a retried hand-off)
        stored = world.store.jobs.get(job["id"])
        world.punctual.dispatcher.dispatch(
            [marker_for(job["id"], parse_rfc3339(done["scheduled_at"]), stored.schedule_version)]
        )
        world.run_for(10)
        # Then the execution stays finished and the task did not run again
        [again] = world.executions(job["id"])
        assert (again["status"], again["attempts"]) == ("SUCCEEDED", 1)
        assert len(hook.deliveries) == 1


def test_an_execution_whose_send_was_lost_is_sent_again(world: World) -> None:
    # Given a dispatch that could not send the execution (SQS refused every attempt)
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    marker = marker_of(world, job)
    dispatcher = world.punctual.dispatcher
    real = world.punctual.queue.send_packs
    world.punctual.queue.send_packs = lambda packs, attempts=4: [pack for pack, _ in packs]  # type: ignore[method-assign]
    result = dispatcher.dispatch([marker])
    world.punctual.queue.send_packs = real  # type: ignore[method-assign]
    assert [m.execution_id for m in result.failed] == [marker.execution_id]
    assert world.executions(job["id"]) == []
    # When the scanner comes to the marker, which stayed
    world.run_for(300)
    # Then the execution is sent and runs, once
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1


def test_the_scanner_leaves_a_marker_to_the_request_enqueueing_it_until_its_claim_runs_out(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request that filed a marker for a job due in 20 s and died before enqueueing it
    world.tick()
    monkeypatch.setattr(
        world.punctual.dispatcher, "dispatch", lambda *args: (_ for _ in ()).throw(SystemExit)
    )
    with pytest.raises(SystemExit):
        world.create({"type": "at", "at": at(world, 20)})
    monkeypatch.undo()
    [stored] = markers(world)
    assert "handoff_until_ms" in stored
    job_id = stored["job_id"]["S"]
    # When the scanner ticks while the claim runs
    report = world.tick()
    # Then it leaves the marker alone
    assert report["deferred"] == 1 and report["enqueued"] == 0
    assert len(markers(world)) == 1
    # and once the claim has run out, the next tick enqueues it, and it runs
    world.clock.advance(HANDOFF_CLAIM.total_seconds())
    world.run_for(60)
    assert world.executions(job_id)[0]["status"] == "SUCCEEDED"
    assert markers(world) == []


def test_a_failed_hand_off_withdraws_its_claim_so_the_next_tick_enqueues_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request whose hand-off fails (SQS down), for a job due in 20 s
    world.tick()

    def down(markers: Any) -> Any:
        raise RuntimeError("SQS unavailable")

    monkeypatch.setattr(world.punctual.dispatcher, "dispatch", down)
    job = world.create({"type": "at", "at": at(world, 20)})
    monkeypatch.undo()
    # Then the request still succeeded, and its marker no longer carries a claim
    [stored] = markers(world)
    assert int(stored["handoff_until_ms"]["N"]) <= to_epoch_ms(world.clock.now())  # run out
    # When the scanner's next tick comes
    world.run_for(90)
    # Then the job ran, late by no more than the wait for that tick
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] <= world.punctual.settings.tick_seconds * 1000


def set_stored_schedule(world: World, job_id: str, schedule: dict[str, Any]) -> None:
    """Write a job item's schedule attribute directly, as the store keeps it (JSON)."""
    world.dynamodb_client.update_item(
        TableName=world.punctual.settings.table_name,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET schedule = :s",
        ExpressionAttributeValues={":s": {"S": json.dumps(schedule)}},
    )


def corrupt_job(world: World, job_id: str) -> None:
    """Make a job's item unreadable, as a time zone dropped from tzdata would."""
    set_stored_schedule(
        world, job_id, {"type": "cron", "expression": "0 * * * *", "timezone": "Mars/Olympus_Mons"}
    )


def test_a_job_that_cannot_be_read_is_quarantined_and_holds_nothing_up(world: World) -> None:
    # Given two jobs due in the same minute, one of whose items can no longer be read
    world.tick()
    broken = world.create({"type": "at", "at": at(world, 240)})
    fine = world.create({"type": "at", "at": at(world, 240)})
    corrupt_job(world, broken["id"])
    # When the scanner comes to them, and their minute settles
    world.run_for(600)
    # Then the readable one ran, the other's execution is set aside with the reason, and its bucket
    # no longer holds the scanner's checkpoint back
    assert world.executions(fine["id"])[0]["status"] == "SUCCEEDED"
    [(marker, reason)] = world.store.markers.quarantined()
    assert marker.job_id == broken["id"]
    assert "Mars/Olympus_Mons" in reason or "timezone" in reason
    assert world.unread_markers() == []
    positions = world.store.scanner.positions(range(world.punctual.settings.shard_count))
    due = parse_rfc3339(broken["next_run_at"])
    assert all(p is not None and p.minute > due for p in positions.values())


def test_a_released_quarantined_execution_runs_once_its_job_is_fixed(world: World) -> None:
    # Given a quarantined execution
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    schedule = world.store.jobs.get(job["id"]).schedule.model_dump(mode="json")
    corrupt_job(world, job["id"])
    world.run_for(300)
    assert len(world.store.markers.quarantined()) == 1
    # When releasing it before the job is fixed / Then it stays quarantined
    result = release_quarantined(world.store, world.punctual.dispatcher, world.clock, job["id"])
    assert len(result.quarantined) == 1 and len(world.store.markers.quarantined(job["id"])) == 1
    # When the job is fixed and the execution released
    set_stored_schedule(world, job["id"], schedule)
    result = release_quarantined(world.store, world.punctual.dispatcher, world.clock, job["id"])
    world.run_for(5)
    # Then it ran, late, and nothing is left in quarantine
    assert len(result.enqueued) == 1
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] > 0
    assert world.store.markers.quarantined() == []


def test_recurring_chains_survive_a_scanner_outage_of_several_minutes(world: World) -> None:
    # Given three every-minute jobs running in their rhythm
    jobs = [world.create({"type": "cron", "expression": "* * * * *"}) for _ in range(3)]
    world.run_for(120)
    # When the scanner does not tick for 10 minutes, then ticks again for 10
    world.clock.advance(600)
    world.run_for(600)
    # Then every chain goes on: each job ran in the last minutes, and its next run is ahead
    for job in jobs:
        latest = world.executions(job["id"])[0]
        assert parse_rfc3339(latest["scheduled_at"]) >= world.clock.now() - timedelta(minutes=2)
        assert parse_rfc3339(world.job(job["id"])["next_run_at"]) > world.clock.now()


def test_a_released_recurring_job_picks_its_schedule_up_from_now(world: World) -> None:
    # Given a job every five minutes, quarantined for half an hour
    world.tick()
    job = world.create({"type": "cron", "expression": "*/5 * * * *"})
    corrupt_job(world, job["id"])
    world.run_for(1800)
    assert world.store.markers.quarantined(job["id"])
    # When it is fixed and released
    set_stored_schedule(world, job["id"], {"type": "cron", "expression": "*/5 * * * *", "timezone": "UTC"})
    release_quarantined(world.store, world.punctual.dispatcher, world.clock, job["id"])
    world.run_for(1200)
    # Then the quarantined occurrence ran, and the schedule goes on every five minutes from now
    statuses = [e["status"] for e in world.executions(job["id"])]
    assert statuses.count("SUCCEEDED") >= 4
    assert parse_rfc3339(world.job(job["id"])["next_run_at"]) > world.clock.now()


def test_a_second_tick_on_the_same_shards_leaves_them_to_the_first(world: World) -> None:
    # Given a job soon due, and a tick in progress on every shard (its lease taken)
    world.create({"type": "at", "at": at(world, 240)})
    world.clock.advance(200)
    shards = list(range(world.punctual.settings.shard_count))
    now = world.clock.now()
    assert world.store.scanner.acquire_leases(shards, "first", now, now + timedelta(seconds=58))
    # When another tick starts / Then it does nothing
    report = world.tick()
    assert report["busy"] is True and report["enqueued"] == 0
    # and once the first lets go, the next tick does the work
    world.store.scanner.release_leases(shards, "first")
    assert world.tick()["enqueued"] == 1


def test_a_lease_left_by_a_tick_that_died_runs_out(world: World) -> None:
    # Given a tick that died holding its shards
    shards = list(range(world.punctual.settings.shard_count))
    now = world.clock.now()
    assert world.store.scanner.acquire_leases(shards, "dead", now, now + timedelta(seconds=58))
    # When the next minute's tick comes / Then the lease has run out and it proceeds
    world.clock.advance(60)
    assert world.tick()["busy"] is False


def test_a_hand_off_that_could_not_send_withdraws_its_claim(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given SQS refusing every message (no exception: the send reports them failed)
    world.tick()
    monkeypatch.setattr(
        world.punctual.queue, "send_packs", lambda items, attempts=4: [item for item, _ in items]
    )
    job = world.create({"type": "at", "at": at(world, 20)})
    monkeypatch.undo()
    # Then the marker no longer carries a claim, and the next tick enqueues it
    [stored] = markers(world)
    assert int(stored["handoff_until_ms"]["N"]) <= to_epoch_ms(world.clock.now())  # run out
    world.run_for(90)
    assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"


def stored_with_a_future_status(world: World, job: dict[str, Any]) -> tuple[DueMarker, dict[str, Any]]:
    """The job's execution, stored (and sent) as QUEUED, then given a status a newer version wrote;
    its marker (filed as soon) and the execution's key."""
    marker = replace(marker_of(world, job), soon=True)
    dispatch_stored(world, marker)
    key = {
        "pk": {"S": f"JOB#{job['id']}"},
        "sk": {"S": f"EXEC#{to_epoch_ms(marker.scheduled_at):013d}#{marker.execution_id}"},
    }
    world.dynamodb_client.update_item(
        TableName=world.punctual.settings.table_name,
        Key=key,
        UpdateExpression="SET #st = :s",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":s": {"S": "PAUSED_BY_FUTURE"}},
    )
    return marker, key


def test_an_execution_with_a_status_this_version_does_not_know_is_left_as_it_is(world: World) -> None:
    # Given an execution recorded by a newer version of Punctual, with a status this one does not know,
    # and its marker still filed
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    marker, key = stored_with_a_future_status(world, job)
    world.store.markers.put(marker)
    # When it is dispatched again / Then it is neither overwritten nor sent, and the marker is done with
    with world.counting_calls() as calls:
        result = dispatch_stored(world, marker)
    assert [m.execution_id for m in result.skipped] == [marker.execution_id]
    assert calls["sqs.SendMessageBatch"] == 0
    assert [m for m in markers(world) if "#SOON#" in m["pk"]["S"]] == []
    stored = world.dynamodb_client.get_item(TableName=world.punctual.settings.table_name, Key=key)["Item"]
    assert stored["status"]["S"] == "PAUSED_BY_FUTURE"


def test_the_worker_leaves_an_execution_it_cannot_read_as_it_is_and_its_message_for_later(
    world: World,
) -> None:
    # Given an execution stored with a status a newer version wrote, and its message coming due
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    marker, key = stored_with_a_future_status(world, job)
    world.clock.advance(241)
    # When a worker receives it
    assert world.work.drain() == 1
    # Then the execution is left as it is, and the message comes back only after UNREADABLE_RETRY_SECONDS
    # (not after the queue's visibility timeout, as for a failure)
    stored = world.dynamodb_client.get_item(TableName=world.punctual.settings.table_name, Key=key)["Item"]
    assert stored["status"]["S"] == "PAUSED_BY_FUTURE"
    world.clock.advance(UNREADABLE_RETRY_SECONDS - 10)
    assert world.work.drain() == 0
    world.clock.advance(20)
    assert world.work.drain() == 1
    # and the dead-letter handler leaves it as it is too, failing so that the message stays on the
    # dead-letter queue for a version that can read it
    with pytest.raises(UnreadableItem):
        dead_letter(
            world.store, world.clock, WorkItem(job["id"], marker.execution_id, marker.scheduled_at, 1)
        )
    stored = world.dynamodb_client.get_item(TableName=world.punctual.settings.table_name, Key=key)["Item"]
    assert stored["status"]["S"] == "PAUSED_BY_FUTURE"


def test_marker_writes_are_paced_per_bucket_partition(world: World) -> None:
    # Given a pacer that records what it is asked for
    asked: list[tuple[str, float]] = []

    class Spy:
        def wait(self, key: str, units: float) -> float:
            asked.append((key, units))
            return 0.0

    world.store.marker_pacer = Spy()  # type: ignore[assignment]
    due = world.clock.now() + timedelta(minutes=5)
    markers_ = [DueMarker(f"job_{i}", f"job_{i}.e", due, 1, shard=i % 2) for i in range(60)]
    # When 60 markers are filed into two buckets, then deleted
    world.store.markers.put_many(markers_)
    world.store.markers.delete_many(markers_)
    # Then every one of them was paced against its own bucket's partition, and nothing else was
    per_key: dict[str, float] = {}
    for key, units in asked:
        per_key[key] = per_key.get(key, 0) + units
    minute = due.strftime("%Y%m%d%H%M")
    assert per_key == {f"DUE#{minute}#000": 60, f"DUE#{minute}#001": 60}
    # and in a batch creation (markers, then jobs, both by BatchWriteItem) only the markers are paced:
    # three due at one instant, one group item
    asked.clear()
    job = {"task": {"type": "noop"}, "schedule": {"type": "at", "at": at(world, 600)}}
    assert world.api("POST", "/jobs/batch", {"jobs": [job, job, job]}).status == 201
    assert sum(units for _, units in asked) == 1
    assert all(key.startswith("DUE#") for key, _ in asked)


def stale_reads(world: World, stale: dict[str, Any]) -> list[tuple[list[str], bool]]:
    """Make the scanner's eventually consistent reads of each job in `stale` answer it as it was
    (None: not written yet) until the scanner reads it consistently, as reads within a second of a
    write may (the worker's read comes long after); the scanner's reads, noted. A tick dispatches
    its shards side by side, and a job's markers (a resumed job's old and new) may sit in two."""
    real = world.store.jobs.get_many
    made: list[tuple[list[str], bool]] = []
    pending = dict(stale)
    lock = threading.Lock()

    def get_many(job_ids: Any, *, consistent: bool = True, **kwargs: Any) -> Any:
        ids = list(job_ids)
        read = real(ids, consistent=consistent, **kwargs)
        if sys._getframe(1).f_globals.get("__name__") != dispatch.__name__:
            return read
        with lock:
            made.append((ids, consistent))
            for job_id in [i for i in dict.fromkeys(ids) if i in pending]:
                if consistent:
                    del pending[job_id]
                elif (job := pending[job_id]) is None:
                    read.found.pop(job_id, None)
                else:
                    read.found[job_id] = job
        return read

    world.store.jobs.get_many = get_many  # type: ignore[method-assign]
    return made


def test_the_scanner_reads_jobs_at_half_the_units_and_again_only_a_job_that_would_stop_its_marker(
    world: World,
) -> None:
    # Given three jobs due at one instant, one of them read as not yet written by an eventually
    # consistent read (created within the last second), and one as paused (resumed within it)
    world.tick()
    fresh = world.create({"type": "at", "at": at(world, 240)})
    steady = world.create({"type": "at", "at": at(world, 240)})
    resumed = world.create({"type": "at", "at": at(world, 240)})
    assert world.api("POST", f"/jobs/{resumed['id']}/pause").status == 200
    paused = world.store.jobs.get(resumed["id"])
    assert world.api("POST", f"/jobs/{resumed['id']}/resume").status == 200
    made = stale_reads(world, {fresh["id"]: None, resumed["id"]: paused})
    # When the scanner dispatches them
    world.run_for(300)
    # Then each ran once: the stale reads were made again consistently, and only theirs
    # (the pause skipped the resumed job's first version: CANCELLED)
    for job in (fresh, steady, resumed):
        ran = [e for e in world.executions(job["id"]) if e["status"] != "CANCELLED"]
        assert [(e["status"], e["attempts"]) for e in ran] == [("SUCCEEDED", 1)]
    eventual = {i for read, consistent in made if not consistent for i in read}
    assert eventual == {fresh["id"], steady["id"], resumed["id"]}
    again = {i for read, consistent in made if consistent for i in read}
    assert again == {fresh["id"], resumed["id"]}


def test_a_job_cancelled_within_the_scanners_stale_read_is_sent_and_the_worker_drops_it(
    world: World,
) -> None:
    with receiver() as hook:
        # Given a job cancelled, which an eventually consistent read still shows active
        world.tick()
        job = hooked_job(world, hook.url)
        was = world.store.jobs.get(job["id"])
        assert world.api("DELETE", f"/jobs/{job['id']}").status == 200
        stale_reads(world, {job["id"]: was})
        # When the scanner dispatches its marker and the instant passes
        with world.counting_calls() as calls:
            world.run_for(300)
        # Then it was sent, and the worker's consistent read stopped it: it never ran
        assert calls["sqs.SendMessageBatch"] == 1
        assert hook.deliveries == []
        assert [e["status"] for e in world.executions(job["id"])] == ["CANCELLED"]
        assert world.api("GET", f"/jobs/{job['id']}").body["status"] == "CANCELLED"
