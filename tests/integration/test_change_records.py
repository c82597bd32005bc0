"""Changes after dispatch, cheaply: a pause, cancel or new schedule acknowledged while a pack holds
stops its member at the instant, read through one Query of the instant's change records rather than a
read per member; a change to a job whose run is far off records nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.models import CHANGE_RECORDS_LATE, JobStatus
from punctual.execution.receipts import Disposition
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from tests.integration.test_packs import runs_counted, take_the_pack, ten_at_one_instant
from tests.integration.test_prepared_start import HoldingClock, take_before_the_instant
from tests.world import World, mocked_world


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(HoldingClock(clock.now()), shard_count=1) as made:
        yield made


def change_records(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("CHANGED#")]


def pause(world: World, job: dict[str, Any]) -> None:
    assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200


def cancel(world: World, job: dict[str, Any]) -> None:
    assert world.api("DELETE", f"/jobs/{job['id']}").status == 200


def reschedule(world: World, job: dict[str, Any]) -> None:
    later = to_rfc3339(world.clock.now() + timedelta(hours=1))
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": later}})
    assert answer.status == 200


def spy(target: Any, name: str) -> list[Any]:
    """The arguments of each call of `target.name` from now on."""
    real = getattr(target, name)
    seen: list[Any] = []

    def call(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    setattr(target, name, call)
    return seen


def ran(counts: Counter[str], pack: Any, job: dict[str, Any]) -> tuple[int, list[int]]:
    """How often the job's member ran, and how often each other member did."""
    mine = [counts[i.execution_id] for i in pack.items if i.job_id == job["id"]]
    others = [counts[i.execution_id] for i in pack.items if i.job_id != job["id"]]
    return sum(mine), others


@pytest.mark.parametrize("change", [pause, cancel, reschedule], ids=lambda c: c.__name__)
def test_a_change_acknowledged_while_the_pack_holds_stops_its_member_read_in_one_query(
    world: World, change: Callable[[World, dict[str, Any]], None]
) -> None:
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    store = world.punctual.worker.store
    reads: dict[str, list[Any]] = {}

    def at_hold() -> None:
        # Given one job changed while its pack holds, before the instant
        change(world, jobs[0])
        reads.update(
            records=spy(store.changes, "changed"),
            stamps=spy(store.jobs, "stamps"),
            jobs=spy(store.jobs, "get_many"),
        )

    # When the pack starts its members at the instant
    take_before_the_instant(world, pack, receipt, at_hold)
    # Then that member did not run, and ended CANCELLED; the nine others ran once
    assert ran(counts, pack, jobs[0]) == (0, [1] * 9)
    assert [e["status"] for e in world.executions(jobs[0]["id"])][-1] == "CANCELLED"
    # and the instant's reads were its change records, once, and the one job they named
    assert reads["records"] == [(pack.scheduled_at,)]
    assert reads["stamps"] == []
    assert [set(ids) for (ids,) in reads["jobs"]] == [{jobs[0]["id"]}]


def test_a_change_to_a_job_whose_run_is_far_off_records_nothing(world: World) -> None:
    far = to_rfc3339(world.clock.now() + timedelta(hours=2))
    job = world.create({"type": "at", "at": far})
    pause(world, job)
    assert change_records(world) == []
    # while one whose run may be in a message records it against that run's instant
    near = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=60))})
    pause(world, near)
    [record] = change_records(world)
    assert record["sk"]["S"] == near["id"]


def test_a_pack_fired_late_reads_its_members_jobs_again(world: World) -> None:
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given a job paused long after its instant, when no change record is kept for it any more
    world.clock.set(pack.scheduled_at + CHANGE_RECORDS_LATE + timedelta(seconds=5))
    pause(world, jobs[0])
    assert change_records(world) == []
    # When the pack is taken only then (a backlog)
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    # Then the paused job's run did not start: the stamps read at the start saw it
    assert ran(counts, pack, jobs[0]) == (0, [1] * 9)
    assert [e["status"] for e in world.executions(jobs[0]["id"])][-1] == "CANCELLED"


def stale_job_reads(world: World, stale: dict[str, Any]) -> list[tuple[list[str], bool]]:
    """The worker's eventually consistent job reads answer `stale` (job id -> the job as it was, None:
    not written yet), as a read within a second of a write may; every job read noted."""
    jobs = world.punctual.worker.store.jobs
    real = jobs.get_many
    made: list[tuple[list[str], bool]] = []

    def get_many(job_ids: Any, *, consistent: bool = True, **kwargs: Any) -> Any:
        ids = list(job_ids)
        made.append((ids, consistent))
        read = real(ids, consistent=consistent, **kwargs)
        if not consistent:
            for job_id, job in stale.items():
                if job is None:
                    read.found.pop(job_id, None)
                elif job_id in ids:
                    read.found[job_id] = job
        return read

    jobs.get_many = get_many
    return made


def test_a_pack_reads_its_jobs_at_half_the_units_and_again_where_that_read_stops_a_member(
    world: World,
) -> None:
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given an eventually consistent read that misses one job (as one written within the last
    # second) and shows another as it was before a resume
    store = world.punctual.worker.store
    before = replace(store.jobs.get(jobs[1]["id"]), status=JobStatus.PAUSED)
    made = stale_job_reads(world, {jobs[0]["id"]: None, jobs[1]["id"]: before})
    # When the pack is taken and fired
    take_before_the_instant(world, pack, receipt, lambda: None)
    # Then every member ran once: the two were read again, consistently, and only they
    assert ran(counts, pack, jobs[0]) == (1, [1] * 9)
    assert made[0] == ([i.job_id for i in pack.items], False)
    assert (sorted([jobs[0]["id"], jobs[1]["id"]]), True) in made
    assert all(len(ids) <= 2 for ids, consistent in made if consistent)


def test_a_change_a_stale_read_missed_is_stopped_by_the_instants_change_records(world: World) -> None:
    jobs = ten_at_one_instant(world)
    pack, receipt = take_the_pack(world)
    counts = runs_counted(world)
    # Given a job paused after its pack was sent, which the pack's eventually consistent read still
    # shows active
    store = world.punctual.worker.store
    active = store.jobs.get(jobs[0]["id"])
    pause(world, jobs[0])
    stale_job_reads(world, {jobs[0]["id"]: active})
    # When the pack is taken and fired
    take_before_the_instant(world, pack, receipt, lambda: None)
    # Then the change record, read at the instant, stopped it: it did not run
    assert ran(counts, pack, jobs[0]) == (0, [1] * 9)
    assert [e["status"] for e in world.executions(jobs[0]["id"])][-1] == "CANCELLED"


@pytest.mark.parametrize("change", [pause, cancel], ids=lambda c: c.__name__)
def test_a_change_stops_a_recurring_jobs_held_run_while_a_later_one_is_queued_too(
    world: World, change: Callable[[World, dict[str, Any]], None]
) -> None:
    # Given an every-minute job whose first run is handed off at its creation and whose second the
    # scanner sends within the same minute: two of its runs are in the queue
    job = world.create({"type": "rate", "every_seconds": 60})
    pack, receipt = take_the_pack(world)
    assert world.store.jobs.get(job["id"]).queued_run_at > pack.scheduled_at
    counts = runs_counted(world)
    # When the job changes while the first run's pack holds, before its instant
    take_before_the_instant(world, pack, receipt, lambda: change(world, job))
    # Then that run did not start
    assert ran(counts, pack, job) == (0, [])
