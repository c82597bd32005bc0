"""The scanner reads only due buckets, skips nothing, and hands off to the API without a gap."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.buckets import Position, shard_of
from punctual.domain.executions import execution_id_for
from punctual.domain.models import marker_for
from punctual.platform.timefmt import parse_rfc3339, to_epoch_ms, to_rfc3339
from punctual.scheduling import tick as tick_module
from punctual.scheduling.scanner import Scanner
from punctual.store.codec.markers import MARKER_TTL
from tests.world import World


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def markers(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("DUE#")]


def test_a_tick_reads_only_due_buckets_whatever_the_number_of_future_jobs(world: World) -> None:
    # Given a first tick (the checkpoint), and jobs far in the future, few or many
    world.tick()
    world.clock.advance(60)
    costs = []
    for future_jobs in (1, 20):
        for i in range(future_jobs):
            world.create({"type": "at", "at": at(world, 86400 + i * 60)})
        with world.counting_calls() as calls:
            world.tick()
        costs.append(calls["dynamodb.Query"])
        world.clock.advance(60)
    # Then a tick costs the same: one query per shard for its soon partition, and one for each minute
    # from its position (where the last tick stopped reading) to the horizon
    settings = world.punctual.settings
    minutes = (settings.tick_seconds + settings.lookahead_seconds) // 60 + 2
    assert costs[0] == costs[1]
    assert costs[0] <= (1 + minutes) * settings.shard_count


def test_missed_ticks_skip_nothing(world: World) -> None:
    # Given a job for 5 minutes ahead and a scanner that has ticked once
    world.tick()
    job = world.create({"type": "at", "at": at(world, 300)})
    # When the scanner does not run for 20 minutes
    world.clock.advance(20 * 60)
    world.run_for(5)
    # Then the next tick still finds it, and its lateness tells the truth
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] >= 15 * 60 * 1000
    assert world.unread_markers() == []


def test_the_next_occurrence_is_filed_when_the_current_one_is_enqueued(world: World) -> None:
    # Given an hourly job
    job = world.create({"type": "cron", "expression": "0 * * * *"})
    # When its 09:00 occurrence is enqueued (by the API's hand-off, 30 s ahead; stored when it starts)
    assert world.executions(job["id"]) == []
    # Then the 10:00 occurrence already has its marker, and the job shows 09:00 until then
    [marker] = markers(world)
    assert marker["pk"]["S"].startswith("DUE#202612011000#")
    assert world.job(job["id"])["next_run_at"] == "2026-12-01T09:00:00.000Z"
    world.clock.advance(31)
    assert world.job(job["id"])["next_run_at"] == "2026-12-01T10:00:00.000Z"
    world.drain()
    [execution] = world.executions(job["id"])
    assert (execution["scheduled_at"], execution["status"]) == ("2026-12-01T09:00:00.000Z", "SUCCEEDED")


def test_partial_send_failures_are_retried(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given SQS that rejects every other entry of the first batch sent
    real = world.sqs.send_message_batch
    state = {"failed_once": False}

    def flaky(**kwargs: Any) -> dict[str, Any]:
        if state["failed_once"]:
            return real(**kwargs)
        state["failed_once"] = True
        entries = kwargs["Entries"]
        sent = real(**{**kwargs, "Entries": entries[::2]})
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in entries[1::2]]
        return {"Successful": sent["Successful"], "Failed": failed}

    monkeypatch.setattr(world.sqs, "send_message_batch", flaky)
    # When six jobs come due in the same tick
    world.tick()
    jobs = [world.create({"type": "at", "at": at(world, 240)}) for _ in range(6)]
    world.clock.advance(200)
    world.run_for(60)
    # Then all six ran once
    assert state["failed_once"]
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["attempts"] == 1


def offsets() -> Iterator[float]:
    # Around the API's hand-off threshold, and around the scanner's lookahead
    handoff, lookahead = 180, 90
    for base in (handoff, lookahead, 60):
        for delta in (-1.5, -0.5, 0, 0.5, 1.5):
            yield base + delta


@pytest.mark.parametrize("tick_phase", [0, 15, 59])
def test_no_execution_falls_between_the_api_and_the_scanner(world: World, tick_phase: int) -> None:
    # Given jobs created at every offset around the thresholds, at various phases of the tick
    world.clock.advance(tick_phase)
    world.tick()
    created = [world.create({"type": "at", "at": at(world, d)}) for d in offsets()]
    # and another created while a tick is in the middle of reading its buckets
    real = world.store.markers.in_bucket
    late: list[dict[str, Any]] = []
    # The scanner reads its shards on several threads at once: one of them, and only one, creates the job.
    creating = threading.Lock()

    def interleaved(shard: int, start: Any, before: Any) -> Iterator[Any]:
        yield from real(shard, start, before)
        with creating:
            if not late:
                late.append(world.create({"type": "at", "at": at(world, 181)}))

    world.clock.advance(60)
    world.store.markers.in_bucket = interleaved  # type: ignore[method-assign]
    world.tick()
    world.store.markers.in_bucket = real  # type: ignore[method-assign]
    # When time runs on
    world.run_for(300)
    # Then every one of them ran exactly once, never early
    for job in [*created, *late]:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED", job
        assert execution["attempts"] == 1
        assert execution["started_at"] >= execution["scheduled_at"]
    assert world.unread_markers() == []


def positions_of(world: World) -> dict[int, Any]:
    return world.store.scanner.positions(range(world.punctual.settings.shard_count))


def test_a_failed_send_moves_its_markers_to_the_soon_partition_and_the_next_tick_sends_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given four jobs due in the same minute, and SQS refusing every send for one tick
    world.tick()
    jobs = [world.create({"type": "at", "at": at(world, 240 + i)}) for i in range(4)]
    world.clock.advance(200)
    monkeypatch.setattr(
        world.punctual.queue, "send_packs", lambda items, attempts=4: [item for item, _ in items]
    )
    report = world.tick()
    monkeypatch.undo()
    # Then the tick reports them failed, and they wait in their shards' soon partitions
    assert report["failed"] == 4 and not report["complete"]
    waiting = world.unread_markers()
    assert len(waiting) == 4 and all("#SOON#" in m["pk"]["S"] for m in waiting)
    # When the next tick runs
    world.clock.advance(60)
    world.run_for(60)
    # Then every job ran, once, and nothing is left to read
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.unread_markers() == []


def test_a_claimed_marker_in_a_minute_bucket_waits_for_its_claim_to_run_out(
    world: World,
) -> None:
    # Given a marker filed by an older version: in its minute's bucket, with a hand-off claim whose
    # request died
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    stored = world.store.jobs.get(job["id"])
    assert stored is not None and stored.next_run_at is not None
    marker = marker_for(job["id"], stored.next_run_at, stored.schedule_version)
    world.clock.advance(200)
    world.store.markers.put(replace(marker, handoff_until=world.clock.now() + timedelta(seconds=45)))
    # When a tick reads it while the claim runs
    report = world.tick()
    # Then it is left alone, set aside under its shard's soon partition with its claim
    assert report["deferred"] == 1 and report["enqueued"] == 0
    assert world.executions(job["id"]) == []
    [waiting] = world.unread_markers()
    assert "#SOON#" in waiting["pk"]["S"] and "handoff_until_ms" in waiting
    # and once the claim has run out, a tick sends it
    world.clock.advance(60)
    world.run_for(30)
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert world.unread_markers() == []


def test_minute_markers_expire_and_quarantined_ones_do_not(world: World) -> None:
    # Given a marker in a minute's bucket, and one set aside
    world.tick()
    job = world.create({"type": "at", "at": at(world, 240)})
    [item] = markers(world)
    due = parse_rfc3339(job["next_run_at"])
    # Then the bucket's marker expires a week after its instant (the scanner never deletes it)
    assert int(item["expires_at"]["N"]) == int((due + MARKER_TTL).timestamp())
    stored = world.store.jobs.get(job["id"])
    assert stored is not None
    marker = marker_for(job["id"], due, stored.schedule_version)
    world.store.markers.quarantine([marker], {job["id"]: "test"}, world.clock.now())
    quarantined = [
        i
        for i in world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
        if i["pk"]["S"] == "QUARANTINE"
    ]
    assert len(quarantined) == 1 and "expires_at" not in quarantined[0]


def test_a_checkpoint_of_the_previous_version_reads_as_the_start_of_its_minute(world: World) -> None:
    # Given a checkpoint written by the previous version (a minute only)
    minute = world.clock.now().replace(second=0, microsecond=0)
    world.dynamodb_client.put_item(
        TableName=world.punctual.settings.table_name,
        Item={
            "pk": {"S": "SCANNER"},
            "sk": {"S": "CHECKPOINT#000"},
            "minute_ms": {"N": str(to_epoch_ms(minute))},
        },
    )
    # Then it reads as that minute's start
    assert positions_of(world)[0] == Position(minute, "0")


def test_a_shorter_lookahead_loses_nothing(world: World) -> None:
    # Given a scanner that ticked with a lookahead of 10 minutes (its positions 10 minutes ahead)
    shards = list(range(world.punctual.settings.shard_count))
    Scanner(
        world.store, world.punctual.dispatcher, world.clock, lookahead=timedelta(minutes=10), shards=shards
    ).tick()
    assert all(
        p is not None and p.minute > world.clock.now() + timedelta(minutes=9)
        for p in positions_of(world).values()
    )
    # When the lookahead is back to 90 s and a job is created for 5 minutes ahead (filed in its
    # minute's bucket, which those positions had passed)
    job = world.create({"type": "at", "at": at(world, 300)})
    world.run_for(400)
    # Then it ran
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"


def test_a_marker_that_keeps_failing_holds_up_nothing_else_on_its_shard(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose message SQS refuses every time, and others on the same shard, a minute later
    world.tick()
    bad = world.create({"type": "at", "at": at(world, 240)})
    shard_of_bad = marker_shard(world, bad)
    good = []
    while len(good) < 3:
        job = world.create({"type": "at", "at": at(world, 300)})
        if marker_shard(world, job) == shard_of_bad:
            good.append(job)
    real = world.punctual.queue.send_packs

    def refusing(packs: Any, attempts: int = 4) -> Any:
        def has_bad(pack: Any) -> bool:
            return any(item.job_id == bad["id"] for item in pack.items)

        failed = [pack for pack, _ in packs if has_bad(pack)]
        return failed + real([(pack, delay) for pack, delay in packs if not has_bad(pack)], attempts)

    monkeypatch.setattr(world.punctual.queue, "send_packs", refusing)
    # When time runs on
    world.run_for(400)
    # Then the others ran, and the failing one waits in its shard's soon partition, retried each tick
    for job in good:
        assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"
    assert world.executions(bad["id"]) == []
    [waiting] = [m for m in world.unread_markers() if m["job_id"]["S"] == bad["id"]]
    assert "#SOON#" in waiting["pk"]["S"]
    # and once SQS takes it, it runs
    monkeypatch.undo()
    world.run_for(70)
    assert world.executions(bad["id"])[0]["status"] == "SUCCEEDED"
    assert world.unread_markers() == []


def marker_shard(world: World, job: dict[str, Any]) -> int:
    stored = world.store.jobs.get(job["id"])
    assert stored is not None and stored.next_run_at is not None
    execution_id = execution_id_for(job["id"], stored.next_run_at, stored.schedule_version)
    return shard_of(execution_id, world.punctual.settings.shard_count)


def test_a_tick_stopped_part_way_keeps_the_minutes_it_finished(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given jobs due in four successive minutes, all overdue after an outage, and a tick that is
    # killed (its function timed out) while it dispatches the third minute
    world.tick()
    jobs = [world.create({"type": "at", "at": at(world, 240 + 60 * i)}) for i in range(4)]
    world.clock.advance(20 * 60)
    real = world.punctual.dispatcher.dispatch

    def killed_at_the_third(markers: Any) -> Any:
        if any(m.job_id == jobs[2]["id"] for m in markers):
            raise SystemExit("timed out")
        return real(markers)

    monkeypatch.setattr(world.punctual.dispatcher, "dispatch", killed_at_the_third)
    with pytest.raises(SystemExit):
        world.tick()
    monkeypatch.undo()
    # Then the minutes it finished are recorded: every shard reads on from the third minute
    third = parse_rfc3339(jobs[2]["next_run_at"]).replace(second=0, microsecond=0)
    assert all(p is not None and p >= Position(third, "0") for p in positions_of(world).values())
    # and the next tick sends the rest: each job runs once
    world.run_for(60)
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)


def test_the_scanner_reports_how_far_behind_its_furthest_shard_is(world: World) -> None:
    # Given a scanner that ticked, then did not run for 20 minutes
    world.tick()
    world.clock.advance(20 * 60)
    shards = list(range(world.punctual.settings.shard_count))
    scanner = Scanner(
        world.store, world.punctual.dispatcher, world.clock, lookahead=timedelta(seconds=90), shards=shards
    )
    # When a tick has no time to read anything / Then it reports its shards over 18 minutes behind
    assert scanner.tick(budget=timedelta(0)).behind_seconds >= 18 * 60  # its positions were 90 s ahead
    # and once a tick has caught up, none
    assert scanner.tick().behind_seconds == 0


def test_a_soon_backlog_is_read_a_page_at_a_time_and_all_sent_in_one_tick(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given seven executions waiting in the soon partitions (hand-offs whose sends failed), and
    # readings of at most two markers a shard
    monkeypatch.setattr(tick_module, "SOON_READ", 2)
    world.tick()
    with monkeypatch.context() as down:
        down.setattr(
            world.punctual.queue, "send_packs", lambda items, attempts=4: [item for item, _ in items]
        )
        jobs = [world.create({"type": "at", "at": at(world, 20)}) for _ in range(7)]
    assert len(world.unread_markers()) == 7
    # When one tick runs (the hand-off claims run out first)
    world.clock.advance(31)
    report = world.tick()
    # Then it sent them all
    assert report["enqueued"] == 7
    assert world.unread_markers() == []
    world.run_for(30)
    assert all(world.executions(job["id"])[0]["status"] == "SUCCEEDED" for job in jobs)
