"""Packed work: executions of one instant travel in one message, and run at least once, never twice."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.domain.executions import Execution, execution_id_for
from punctual.domain.models import DueMarker, Job
from punctual.domain.work import PACK_MAX_BYTES, Pack, WorkItem, pack_items, read_body
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.scheduling.tick import instant_chunks
from punctual.store.queue import WorkQueue
from tests.world import World, mocked_world

AT = datetime(2026, 12, 1, 9, 5, tzinfo=UTC)


class Crash(BaseException):
    """A worker dying mid-run: not an error the worker handles, so its message is left as it is."""


@pytest.fixture
def one_shard(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, shard_count=1) as world:
        yield world


def item(n: int, at: datetime = AT, *, manual: bool = False) -> WorkItem:
    job_id = f"job_{n:026d}"
    if manual:
        return WorkItem(job_id, f"{job_id}.r{n}", at, 3, manual=True)
    return WorkItem(job_id, execution_id_for(job_id, at, 3), at, 3)


def test_a_pack_reads_back_as_sent_and_an_old_body_as_a_pack_of_one() -> None:
    # Given a pack with scheduled and manual executions
    pack = Pack(AT, (item(1), item(2, manual=True), item(3)), shard=7, guarded=True)
    # Then its body reads back as the same pack, with the same id
    assert read_body(pack.to_body()) == pack
    assert json.loads(pack.to_body())["id"] == pack.id == Pack(AT, tuple(reversed(pack.items))).id
    # and a scheduled entry carries no execution id (its job, instant and version make it)
    assert json.loads(pack.to_body())["e"][0] == [item(1).job_id, 3]
    # and a body of one execution, as sent before packs, reads as a guarded pack of one
    old = item(4)
    assert read_body(old.to_body()) == Pack(AT, (old,), guarded=True)


def test_packs_stay_under_their_bounds() -> None:
    # Given 1,200 executions at one instant and 3 at another
    items = [(item(n), 0) for n in range(1200)] + [(item(n, AT + timedelta(seconds=1)), 0) for n in range(3)]
    # When packed 500 at most
    packs = pack_items(items, max_entries=500)
    # Then there is one pack per instant and cut, in the order given, each under the size bound
    assert [len(p.items) for p in packs] == [500, 500, 200, 3]
    assert all(len(p.to_body()) < PACK_MAX_BYTES for p in packs)
    # and a byte bound cuts too
    assert all(len(p.to_body()) <= 2_000 for p in pack_items(items, max_entries=500, max_bytes=2_000))
    # and ids that JSON escapes are measured as escaped
    odd = [(WorkItem(f'j\u00f6b"{n}\\', f"x{n}", AT, 3), 0) for n in range(200)]
    cut = pack_items(odd, max_entries=500, max_bytes=2_000)
    assert len(cut) > 1 and all(1_000 < len(p.to_body()) <= 2_000 for p in cut[:-1])


def test_send_packs_keeps_a_batch_under_a_megabyte() -> None:
    class Sqs:
        def __init__(self) -> None:
            self.calls: list[list[dict[str, Any]]] = []

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.calls.append(Entries)
            return {"Failed": []}

    # Given ten packs of about 220 KB each
    big = [Pack(AT, tuple(item(n * 5000 + k) for k in range(4000))) for n in range(10)]
    sqs = Sqs()
    # When sent
    assert WorkQueue(sqs, "url").send_packs([(p, 0) for p in big]) == []
    # Then no call carries more than 1 MB of bodies, and every pack goes once
    assert all(sum(len(e["MessageBody"]) for e in call) <= 1_000_000 for call in sqs.calls)
    assert sorted(read_body(e["MessageBody"]).id for call in sqs.calls for e in call) == sorted(
        p.id for p in big
    )


def test_instant_chunks_cut_the_same_packs_however_the_markers_are_read() -> None:
    def marker(n: int, at: datetime) -> DueMarker:
        it = item(n, at)
        return DueMarker(it.job_id, it.execution_id, at, 3, shard=0)

    later = AT + timedelta(seconds=1)
    markers = [marker(n, AT) for n in range(7)] + [marker(n, later) for n in range(7, 12)]
    # When chunked whole, and read from a horizon that starts at the second instant
    whole = instant_chunks(markers, 4)
    tail = instant_chunks(markers[7:], 4)
    # Then an instant is cut every 4 from its first marker, whatever came before it
    assert [len(c) for c in whole] == [4, 3, 4, 1]
    assert [[m.execution_id for m in c] for c in whole[2:]] == [[m.execution_id for m in c] for c in tail]
    # and instants share a chunk when they fit whole
    assert [len(c) for c in instant_chunks(markers[4:9], 4)] == [3, 2]


def ten_at_one_instant(world: World) -> list[dict[str, Any]]:
    at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
    return [world.create({"type": "at", "at": at}) for _ in range(10)]


def runs_counted(world: World) -> Counter[str]:
    """Task starts, by execution id (the worker's attempts, counted as they are made)."""
    attempts = world.punctual.worker._attempts
    real = attempts.run
    counts: Counter[str] = Counter()

    def run(job: Job, execution: Execution, *args: Any, **kwargs: Any) -> Any:
        counts[execution.id] += 1
        return real(job, execution, *args, **kwargs)

    attempts.run = run  # type: ignore[method-assign]
    return counts


def test_ten_jobs_at_one_instant_travel_in_one_message_and_run_once(
    one_shard: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    counts = runs_counted(world)
    sent: list[str] = []
    real_send = world.sqs.send_message_batch

    def send(**kwargs: Any) -> Any:
        sent.extend(e["MessageBody"] for e in kwargs["Entries"])
        return real_send(**kwargs)

    monkeypatch.setattr(world.sqs, "send_message_batch", send)
    world.run_for(300)
    # Then one message carried them all, and each ran once
    assert [len(read_body(body).items) for body in sent] == [10]
    assert sorted(counts.values()) == [1] * 10
    assert {world.executions(job["id"])[0]["status"] for job in jobs} == {"SUCCEEDED"}


def take_the_pack(world: World) -> tuple[Pack, str]:
    """Run until the pack is visible, and receive it as a worker would."""
    for _ in range(400):
        messages = world.sqs.receive_message(
            QueueUrl=world.punctual.settings.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if messages:
            [message] = messages
            return read_body(message["Body"]), message["ReceiptHandle"]
        if world.last_tick_minute != world.clock.now().replace(second=0, microsecond=0):
            world.tick()
        world.clock.advance(1)
    raise AssertionError("no pack was sent")


def test_a_pack_redelivered_after_a_partial_fire_runs_only_what_had_not_ended(one_shard: World) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    order = [i.execution_id for i in pack.items]
    counts = runs_counted(world)
    counted_run = world.punctual.worker._attempts.run

    # Given a worker that dies part-way: members 0-3 end, 4 starts its task and dies before its
    # outcome, 5-9 die before their start
    def dying(job: Job, execution: Execution, *args: Any, **kwargs: Any) -> Any:
        place = order.index(execution.id)
        if place == 4:
            counts[execution.id] += 1  # its task started; the worker died before its outcome
        if place >= 4:
            raise Crash()
        return counted_run(job, execution, *args, **kwargs)

    world.punctual.worker._attempts.run = dying  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    with pytest.raises(Crash):
        world.punctual.packs.handle(pack, receipt)
    # When the message comes back (its visibility timeout, then their leases) to a sound worker
    world.punctual.worker._attempts.run = counted_run  # type: ignore[method-assign]
    world.run_for(30 * 60, step=5)
    # Then those that had ended did not run again; 4 ran again, the rest once, all with their ids
    assert [counts[e] for e in order] == [1, 1, 1, 1, 2, 1, 1, 1, 1, 1]
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED" and execution["id"] in order


def test_a_duplicate_pack_runs_nothing_twice(one_shard: World) -> None:
    world = one_shard
    ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given the same pack sent again
    world.punctual.queue.send_packs([(pack, 0)])
    # When both are taken
    world.clock.set(pack.scheduled_at)
    world.punctual.packs.handle(pack, receipt)
    world.run_for(15 * 60, step=5)
    # Then each execution ran once
    assert sorted(counts[i.execution_id] for i in pack.items) == [1] * 10
    assert world.work.drain() == 0


def test_a_retrying_member_is_sent_on_alone_and_the_pack_is_let_go(one_shard: World) -> None:
    world = one_shard
    at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
    jobs = [world.create({"type": "at", "at": at}) for _ in range(4)]
    failing = world.create(
        {"type": "at", "at": at},
        task={"type": "fail"},
        retry={"max_attempts": 3, "backoff_seconds": 120},
    )
    pack, receipt = take_the_pack(world)
    assert len(pack.items) == 5
    sent: list[Pack] = []
    real_send = world.punctual.queue.send_packs

    def send_packs(packs: list[tuple[Pack, int]], attempts: int = 4) -> list[Pack]:
        sent.extend(p for p, _ in packs)
        return real_send(packs, attempts)

    world.punctual.queue.send_packs = send_packs  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    # When the pack is taken
    assert world.punctual.packs.handle(pack, receipt).value == "done"
    # Then the failing member was sent on in a guarded pack of its own, the others ended
    assert [(len(p.items), p.items[0].job_id, p.guarded) for p in sent] == [(1, failing["id"], True)]
    assert {world.executions(job["id"])[0]["status"] for job in jobs} == {"SUCCEEDED"}
    assert world.executions(failing["id"])[0]["status"] == "RETRYING"
    # and its retries run from there until it fails for good
    world.run_for(15 * 60, step=5)
    [execution] = world.executions(failing["id"])
    assert (execution["status"], execution["attempts"]) == ("FAILED", 3)


def test_a_packs_ends_are_written_once_its_members_have_started(one_shard: World) -> None:
    world = one_shard
    ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    seen: list[str] = []
    attempts = world.punctual.worker._attempts
    real_run, real_end = attempts.run, world.punctual.store.executions.put_end

    # Given members that start a moment apart, the first at once, and a noop task that ends at once
    def run(job: Job, execution: Execution, started: Any, *args: Any, **kwargs: Any) -> Any:
        if execution.id != pack.items[0].execution_id:
            time.sleep(0.05)

        def noted() -> None:
            seen.append("start")
            started()

        return real_run(job, execution, noted, *args, **kwargs)

    def put_end(execution: Execution) -> Execution:
        seen.append("end")
        return real_end(execution)

    attempts.run = run  # type: ignore[method-assign]
    world.punctual.store.executions.put_end = put_end  # type: ignore[method-assign]
    # When the pack fires at its instant
    world.clock.set(pack.scheduled_at)
    world.punctual.packs.handle(pack, receipt)
    # Then every member started before the first end was written, and each ended once
    assert seen == ["start"] * 10 + ["end"] * 10
