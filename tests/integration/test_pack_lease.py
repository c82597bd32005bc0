"""A pack taken under one lease: a worker that dies anywhere on the way leaves every member to run at
least once, with its id, and a pack taken twice at once runs nothing twice."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.domain.errors import RetryableStoreError
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job
from punctual.domain.work import Pack
from punctual.execution.packs import PACK_LEASE_MIN
from punctual.execution.receipts import Disposition
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.ports.packs import PackHeld
from punctual.scheduling.handoff import HandOff
from tests.integration.test_packs import Crash, runs_counted, take_the_pack, ten_at_one_instant
from tests.world import World, mocked_world


@pytest.fixture
def one_shard(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, shard_count=1) as world:
        yield world


def listed_once_each(world: World, jobs: list[dict[str, Any]], pack: Pack) -> None:
    """Every job shows one execution, SUCCEEDED, with the id its pack gave it."""
    ids = {item.execution_id for item in pack.items}
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED" and execution["id"] in ids
        assert execution["attempts"] == 1


def crash_once(target: Any, name: str, *, after: bool = False) -> None:
    """Make `target.name` raise Crash on its first call (before or after doing its work)."""
    real = getattr(target, name)
    fired: list[bool] = []

    def dying(*args: Any, **kwargs: Any) -> Any:
        if fired:
            return real(*args, **kwargs)
        fired.append(True)
        if after:
            real(*args, **kwargs)
        raise Crash()

    setattr(target, name, dying)


def test_a_pack_is_taken_under_one_lease_and_nothing_of_a_member_is_stored_before_its_end(
    one_shard: World,
) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    assert len(pack.items) >= PACK_LEASE_MIN and not pack.guarded
    written: list[str] = []
    executions = world.punctual.worker.store.executions
    for name in ("claim", "put_end", "finish_attempt"):
        real = getattr(executions, name)

        def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            written.append(_name)
            return _real(*args, **kwargs)

        setattr(executions, name, spy)
    # When the pack is taken before its instant
    world.clock.set(pack.scheduled_at)
    world.clock.advance(-2)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    # Then no member was claimed: each end was stored in one write, never before the instant
    assert written == ["put_end"] * 10
    listed_once_each(world, jobs, pack)
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["lateness_ms"] >= 0


def die_taking(world: World, pack: Pack, receipt: str, where: str, counts: Counter[str]) -> None:
    """A worker takes the pack 2 s before its instant and dies `where`: right after the lease, while
    holding, or once every member's task ran and before any outcome is written."""
    runner = world.punctual.packs
    if where == "right after the lease":
        crash_once(runner._packs, "take", after=True)
    elif where == "while holding before the instant":
        crash_once(world.clock, "sleep")
    else:
        executions = world.punctual.worker.store.executions
        real = executions.put_end

        def lost(execution: Execution) -> Execution:
            if counts[execution.id] == 1:
                raise Crash()
            return real(execution)

        executions.put_end = lost  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    world.clock.advance(-2)
    with pytest.raises(Crash):
        runner.handle(pack, receipt)


@pytest.mark.parametrize(
    "where",
    ["right after the lease", "while holding before the instant", "after firing, before the outcomes"],
)
def test_a_worker_dying_under_the_lease_leaves_every_member_to_run_with_its_id(
    one_shard: World, where: str
) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given a worker that dies there, taking the pack early (so that it holds for its instant)
    die_taking(world, pack, receipt, where, counts)
    # When the message comes back to a sound worker (after its visibility, then the lease's end)
    world.run_for(30 * 60, step=5)
    # Then every member ran to its end, once as listed, with the pack's ids
    listed_once_each(world, jobs, pack)
    ran = [counts[item.execution_id] for item in pack.items]
    if where == "after firing, before the outcomes":
        assert ran == [2] * 10  # each ran again
    else:
        assert ran == [1] * 10
    assert world.work.drain() == 0


def test_a_pack_taken_again_runs_only_what_had_not_ended(one_shard: World) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    order = [i.execution_id for i in pack.items]
    counts = runs_counted(world)
    attempts = world.punctual.worker._attempts
    counted_run = attempts.run

    # Given a worker that dies while firing: 0-3 end, 4 runs its task without its end stored, 5-9
    # never start
    def dying(job: Job, execution: Execution, *args: Any, **kwargs: Any) -> Any:
        place = order.index(execution.id)
        if place == 4:
            counts[execution.id] += 1
        if place >= 4:
            raise Crash()
        return counted_run(job, execution, *args, **kwargs)

    attempts.run = dying  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    with pytest.raises(Crash):
        world.punctual.packs.handle(pack, receipt)
    attempts.run = counted_run  # type: ignore[method-assign]
    # When a sound worker takes the pack again once its lease ran out
    world.run_for(30 * 60, step=5)
    # Then 4-9 ran again with their ids, 0-3 did not
    assert [counts[e] for e in order] == [1, 1, 1, 1, 2, 1, 1, 1, 1, 1]
    listed_once_each(world, jobs, pack)


def test_a_duplicate_pack_taken_at_the_same_time_waits_and_runs_nothing_twice(one_shard: World) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    world.punctual.queue.send_packs([(pack, 0)])  # the same pack, sent twice
    duplicate, other_receipt = take_the_pack(world)
    assert duplicate == pack
    counts = runs_counted(world)
    attempts = world.punctual.worker._attempts
    counted_run = attempts.run
    second: list[Disposition] = []
    held_until: list[datetime | None] = []
    real_take = world.punctual.packs._packs.take  # type: ignore[union-attr]

    def take(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_take(*args, **kwargs)
        except PackHeld as held:
            held_until.append(held.lease_until)
            raise

    world.punctual.packs._packs.take = take  # type: ignore[union-attr,method-assign]

    # Given the duplicate taken by another worker while the first runs its members
    lock = threading.Lock()
    members: list[str] = []

    def run(job: Job, execution: Execution, *args: Any, **kwargs: Any) -> Any:
        with lock:
            members.append(execution.id)
            first = len(members) == 1
        if first:
            second.append(world.punctual.packs.handle(duplicate, other_receipt))
        return counted_run(job, execution, *args, **kwargs)

    attempts.run = run  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    # Then the duplicate was held off by the lease, to look again when it runs out
    assert second == [Disposition.LATER] and held_until[0] is not None
    # and once taken over it finds every member ended: nothing ran twice
    attempts.run = counted_run  # type: ignore[method-assign]
    world.run_for(15 * 60, step=5)
    assert sorted(counts[i.execution_id] for i in pack.items) == [1] * 10
    assert world.work.drain() == 0
    assert Counter(world.executions(job["id"])[0]["status"] for job in jobs) == Counter({"SUCCEEDED": 10})


def test_a_packed_run_is_listed_running_from_its_instant_until_its_end(one_shard: World) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    attempts = world.punctual.worker._attempts
    real = attempts.run
    seen: dict[str, list[dict[str, Any]]] = {}
    lock = threading.Lock()

    # Given its members looked at while their tasks run (nothing of them stored yet)
    def run(job: Job, execution: Execution, *args: Any, **kwargs: Any) -> Any:
        listed = world.executions(job.id)
        running = world.api("GET", f"/jobs/{job.id}/executions", query="status=RUNNING").body["items"]
        done = world.api("GET", f"/jobs/{job.id}/executions", query="status=SUCCEEDED").body["items"]
        with lock:
            seen[execution.id] = [*listed, *running, *done]
        return real(job, execution, *args, **kwargs)

    attempts.run = run  # type: ignore[method-assign]
    world.clock.set(pack.scheduled_at)
    world.clock.advance(-2)
    # Before its instant nothing is listed
    assert all(world.executions(job["id"]) == [] for job in jobs)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    # Then each was listed RUNNING under its id while it ran, and by a RUNNING filter, not a SUCCEEDED one
    for item in pack.items:
        listed, running = seen[item.execution_id][0], seen[item.execution_id][1]
        assert (listed["id"], listed["status"], listed["attempts"]) == (item.execution_id, "RUNNING", 0)
        assert running["id"] == item.execution_id and len(seen[item.execution_id]) == 2
    # and once ended, as stored, once
    listed_once_each(world, jobs, pack)


def test_markers_set_aside_and_a_resumed_hand_off_are_sent_guarded(one_shard: World) -> None:
    world = one_shard
    real = world.punctual.queue.send_packs
    sent: list[Pack] = []
    refuse = [True]

    def send_packs(packs: list[tuple[Pack, int]], attempts: int = 4) -> list[Pack]:
        if refuse[0]:
            return [pack for pack, _ in packs]  # SQS takes none: the scanner sets them aside
        sent.extend(pack for pack, _ in packs)
        return real(packs, attempts)

    world.punctual.queue.send_packs = send_packs  # type: ignore[method-assign]
    # Given ten jobs whose pack SQS refused once (it may have been sent: the answer was lost)
    jobs = ten_at_one_instant(world)
    world.run_for(60, step=5)
    world.clock.advance(120)
    world.tick()
    refuse[0] = False
    # When the scanner sends them again from where it set them aside
    world.run_for(300, step=5)
    # Then their pack went guarded (each member claims its own execution), and each ran once
    assert sent and all(p.guarded for p in sent)
    listed_once_each(world, jobs, Pack(sent[0].scheduled_at, tuple(i for p in sent for i in p.items)))


def test_a_retried_request_resumes_its_hand_off_guarded(one_shard: World) -> None:
    world = one_shard
    dispatched: list[bool] = []
    real = world.punctual.dispatcher.dispatch

    def dispatch(markers: Any, new_jobs: Any = (), *, resent: bool = False) -> Any:
        dispatched.append(resent)
        if len(dispatched) == 1:
            raise SystemExit  # the first request dies after filing, before its hand-off
        return real(markers, new_jobs, resent=resent)

    world.punctual.dispatcher.dispatch = dispatch  # type: ignore[method-assign,assignment]
    at = to_rfc3339(world.clock.now() + timedelta(seconds=20))
    with pytest.raises(SystemExit):
        world.create({"type": "at", "at": at})
    scan = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    [job_id] = [i["id"]["S"] for i in scan if i["sk"]["S"] == "JOB"]
    job = world.store.jobs.get(job_id)
    assert job is not None
    # When a retry of the request resumes its hand-off (its marker still filed with a claim)
    HandOff(world.store, world.punctual.dispatcher, world.clock).resume([job])
    # Then what it sends again is sent guarded
    assert dispatched == [False, True]


def test_a_pack_that_fails_before_any_member_starts_gives_its_lease_back(one_shard: World) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # (the read at the instant: the change records on a first take)
    records = world.punctual.worker.store.changes
    real = records.changed
    calls: list[int] = []

    def throttled(instant: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RetryableStoreError("throttled")
        return real(instant)

    records.changed = throttled  # type: ignore[method-assign]
    # Given the store throttled at the instant, before any member started
    world.clock.set(pack.scheduled_at)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.LATER
    assert sum(counts.values()) == 0
    # When the message comes back seconds later
    world.clock.advance(10)
    # Then it is taken again at once (not held off until the lease would have run out), and runs
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    assert [counts[i.execution_id] for i in pack.items] == [1] * 10
    listed_once_each(world, jobs, pack)


@pytest.mark.parametrize("lands", ["between the read and the take", "while the pack holds"])
def test_a_pack_retaken_as_its_last_holders_end_lands_on_the_job_runs_that_member_not_again(
    one_shard: World, lands: str
) -> None:
    world = one_shard
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    store = world.punctual.worker.store
    runner = world.punctual.packs
    assert runner._packs is not None
    # Given the pack taken before by a worker whose lease ran out, still running its first member
    gone = pack.scheduled_at - timedelta(seconds=10)
    runner._packs.take(pack.id, "slow", gone, gone - timedelta(minutes=5))
    first = pack.items[0]
    job = store.jobs.get(first.job_id)
    assert job is not None
    began = pack.scheduled_at + timedelta(milliseconds=5)
    end = Execution(
        id=first.execution_id,
        job_id=first.job_id,
        owner=job.owner,
        scheduled_at=first.scheduled_at,
        status=ExecutionStatus.SUCCEEDED,
        schedule_version=job.schedule_version,
        attempts=1,
        started_at=began,
        finished_at=began + timedelta(milliseconds=10),
        lateness_ms=5,
        created_at=began,
        job_item_bytes=store.jobs.completed_bytes(job),
    )
    landed: list[bool] = []

    def lands_once(target: Any, name: str) -> None:
        real = getattr(target, name)

        def landing(*args: Any, **kwargs: Any) -> Any:
            if not landed:
                landed.append(True)
                store.executions.put_end(end)  # that worker's end, on its job
            return real(*args, **kwargs)

        setattr(target, name, landing)

    if lands == "between the read and the take":
        lands_once(runner._packs, "take")
    else:
        lands_once(world.clock, "sleep")
    counts = runs_counted(world)
    # When another worker takes the pack again, just before its instant, as that end lands
    world.clock.set(pack.scheduled_at - timedelta(seconds=2))
    assert runner.handle(pack, receipt) is Disposition.DONE
    # Then that member is not run again: its end stands alone, on its job; the others ran once
    assert landed
    assert [counts[item.execution_id] for item in pack.items] == [0] + [1] * 9
    after = store.jobs.get(first.job_id)
    assert after is not None and after.last_execution is not None
    assert after.last_execution.started_at == began
    assert store.executions.get_many([(first.job_id, first.scheduled_at, first.execution_id)]) == ({}, {})
    listed_once_each(world, jobs, pack)


@pytest.mark.parametrize("resumed", ["while it runs", "after it ended"])
def test_a_job_paused_while_its_leased_run_is_under_way_runs_once_whenever_resumed(
    one_shard: World, resumed: str
) -> None:
    world = one_shard
    # Given a one-time job, its run under its pack's lease (nothing of it stored until its end)
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    counts = runs_counted(world)
    attempts = world.punctual.worker._attempts
    real = attempts.run

    def run(*args: Any, **kwargs: Any) -> Any:
        # When the job is paused while its run is under way (and resumed then, or after)
        assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
        if resumed == "while it runs":
            assert world.api("POST", f"/jobs/{job['id']}/resume").body["status"] == "ACTIVE"
        return real(*args, **kwargs)

    attempts.run = run  # type: ignore[method-assign]
    world.run_for(250)
    attempts.run = real  # type: ignore[method-assign]
    assert sum(counts.values()) == 1
    if resumed == "after it ended":
        assert world.job(job["id"])["status"] == "PAUSED"
        assert world.api("POST", f"/jobs/{job['id']}/resume").body["status"] == "COMPLETED"
    # Then it ran once, and its job completed
    world.run_for(300)
    assert sum(counts.values()) == 1
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    assert world.job(job["id"])["status"] == "COMPLETED"


@pytest.mark.parametrize("where", ["while holding before the instant", "after firing, before the outcomes"])
def test_a_catch_up_window_skips_a_late_first_start_not_a_start_again(one_shard: World, where: str) -> None:
    # (a worker that died after starting its pack left its runs recorded SKIPPED by the catch-up
    # window when the pack was taken over, late, though they had started in time)
    world = one_shard
    at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
    jobs = [world.create({"type": "at", "at": at}, policy={"max_lateness_seconds": 10}) for _ in range(10)]
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given jobs that may start at most 10 s late, whose pack's worker dies there
    die_taking(world, pack, receipt, where, counts)
    # When the pack is taken over, past the window (its lease ran out)
    world.run_for(30 * 60, step=5)
    statuses = [e["status"] for job in jobs for e in world.executions(job["id"])]
    ran = [counts[item.execution_id] for item in pack.items]
    if where == "while holding before the instant":
        # Then runs that never started are skipped, as late first starts
        assert (statuses, ran) == (["SKIPPED"] * 10, [0] * 10)
    else:
        # Then runs that started in time run again with their ids (at least once), and end SUCCEEDED
        assert (statuses, ran) == (["SUCCEEDED"] * 10, [2] * 10)
    assert world.work.drain() == 0
