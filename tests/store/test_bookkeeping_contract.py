"""The contracts of the markers, scanner state, idempotency keys, dead letters and named tasks
repositories, on moto and on the fake."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from punctual.domain.buckets import Position, shard_of
from punctual.domain.errors import LostRace
from punctual.domain.executions import DeadLetter
from punctual.domain.models import DueMarker, TaskRef
from punctual.domain.named_tasks import NamedTask
from punctual.store import Store
from punctual.store.idempotency import LIFETIME
from punctual.store.markers import count_bucket
from tests.store.builders import NOW, OWNER, job, marker


def test_markers_are_read_from_a_position_in_their_bucket_oldest_first(store: Store) -> None:
    # Given three markers of one job in the 9:05 bucket of their shards, and one due soon
    owner = job()
    minute = NOW + timedelta(minutes=5)
    filed = [replace(marker(owner, minute + timedelta(seconds=s)), shard=0) for s in (10, 20, 30)]
    store.markers.put_many(filed)
    store.markers.put(replace(marker(owner, NOW + timedelta(seconds=5)), shard=0, soon=True))
    # When the bucket is read from its start, and from the second marker, up to 9:05:25
    before = minute + timedelta(seconds=25)
    whole = list(store.markers.in_bucket(0, Position(minute), before))
    rest = list(store.markers.in_bucket(0, Position.at(minute, filed[1]), before))
    # Then oldest first, from the position (inclusive), before the bound; each knows its shard
    assert [m.execution_id for m in whole] == [m.execution_id for m in filed[:2]]
    assert [m.execution_id for m in rest] == [filed[1].execution_id]
    assert all(m.shard == 0 and not m.soon for m in whole)
    assert list(store.markers.in_bucket(0, Position.bound(minute, before), before)) == []
    # and the soon partition holds the other, until it is deleted
    [soon] = store.markers.soon(0, NOW + timedelta(minutes=1))
    assert soon.soon and soon.shard == 0
    store.markers.delete_many([soon])
    assert list(store.markers.soon(0, NOW + timedelta(minutes=1))) == []
    assert count_bucket(store.table.client, store.table.name, minute, 0) == 3


def test_markers_of_one_instant_filed_together_share_an_item_read_back_as_each(store: Store) -> None:
    # Given 150 jobs' markers due at 9:05:10 filed together (a batch), with one due a second later,
    # one due soon and one claimed by its request
    at = NOW + timedelta(minutes=5, seconds=10)
    jobs = [job(f"job_{i:03d}") for i in range(150)]
    filed = [replace(marker(j, at), filed_at=NOW) for j in jobs]
    later = replace(marker(job("job_later"), at + timedelta(seconds=1)), filed_at=NOW)
    soon = replace(marker(job("job_soon"), at), soon=True, filed_at=NOW)
    claimed = replace(marker(job("job_claimed"), at), handoff_until=NOW, filed_at=NOW)
    store.markers.put_many([*filed, later, soon, claimed])
    # When their shards' buckets are read
    minute = NOW + timedelta(minutes=5)
    before = minute + timedelta(minutes=1)
    read = [
        m
        for shard in range(store.shard_count)
        for m in store.markers.in_bucket(shard, Position(minute), before)
    ]
    # Then every marker comes back once, as filed, the 150 in two groups (of at most a hundred), each
    # member with its group's shard and place
    by_id = {m.execution_id: m for m in read}
    assert len(read) == len(by_id) == 152
    assert {m.execution_id for m in filed} | {later.execution_id, claimed.execution_id} == set(by_id)
    members = [by_id[m.execution_id] for m in filed]
    groups = {(m.shard, m.place) for m in members}
    assert len(groups) == 2
    assert sorted(sum(1 for m in members if (m.shard, m.place) == g) for g in groups) == [50, 100]
    assert all(
        (m.job_id, m.scheduled_at, m.schedule_version, m.filed_at, m.soon, m.manual)
        == (f.job_id, f.scheduled_at, f.schedule_version, f.filed_at, False, False)
        for m, f in zip(members, filed, strict=True)
    )
    assert by_id[later.execution_id].place is None and by_id[claimed.execution_id].place is None
    assert [m.execution_id for m in store.markers.soon(soon_shard(store, soon), before)] == [
        soon.execution_id
    ]
    # and a scanner stopped at a member reads its whole group again
    first = members[0]
    again = list(store.markers.in_bucket(first.shard or 0, Position.at(minute, first), before))
    assert {m.execution_id for m in members if m.place == first.place} <= {m.execution_id for m in again}
    # and the buckets count every marker, not every item
    counted = sum(
        count_bucket(store.table.client, store.table.name, minute, shard)
        for shard in range(store.shard_count)
    )
    assert counted == 152


def soon_shard(store: Store, marker: DueMarker) -> int:
    return shard_of(marker.execution_id, store.shard_count)


def test_a_quarantined_marker_is_kept_with_its_reason_until_released(store: Store) -> None:
    owner = job()
    set_aside = marker(owner, NOW)
    store.markers.quarantine([set_aside], {owner.id: "cannot be read"}, NOW)
    [(found, reason)] = store.markers.quarantined(owner.id)
    assert (found.execution_id, reason) == (set_aside.execution_id, "cannot be read")
    assert store.markers.quarantined("job_other") == []
    store.markers.release_quarantined([found])
    assert store.markers.quarantined() == []


def test_a_scanner_lease_is_all_or_nothing_and_runs_out(store: Store) -> None:
    # Given one tick holding shard 1
    assert store.scanner.acquire_leases([1], "tick-a", NOW, NOW + timedelta(seconds=58))
    # When another asks for shards 0 and 1 / Then it gets neither (shard 0 is given back)
    assert not store.scanner.acquire_leases([0, 1], "tick-b", NOW, NOW + timedelta(seconds=58))
    assert store.scanner.acquire_leases([0], "tick-c", NOW, NOW + timedelta(seconds=58))
    # and once the first lease has run out, or been released, it may take shard 1
    later = NOW + timedelta(minutes=1)
    assert store.scanner.acquire_leases([1], "tick-b", later, later + timedelta(seconds=58))
    store.scanner.release_leases([1], "tick-a")  # (not its holder's any more: nothing happens)
    assert not store.scanner.acquire_leases([1], "tick-d", later, later + timedelta(seconds=58))
    store.scanner.release_leases([1], "tick-b")
    assert store.scanner.acquire_leases([1], "tick-d", later, later + timedelta(seconds=58))


def test_scanner_positions_are_kept_per_shard(store: Store) -> None:
    assert store.scanner.positions([0, 1]) == {0: None, 1: None}
    saved = {0: Position(NOW), 1: Position.bound(NOW, NOW + timedelta(seconds=30))}
    store.scanner.save_positions(saved)
    assert store.scanner.positions([0, 1, 2]) == {**saved, 2: None}
    assert saved[1].instant() == NOW + timedelta(seconds=30) and saved[0].instant() == NOW


def test_an_idempotency_key_is_claimed_once_for_its_lifetime(store: Store) -> None:
    # Given a key claimed for one job
    assert store.idempotency.claim(OWNER, "k", "fp", ["job_1"], NOW) is None
    # When it is claimed again within its lifetime / Then the first claim is returned
    seen = store.idempotency.claim(OWNER, "k", "other", ["job_2", "job_3"], NOW + timedelta(hours=1))
    assert seen is not None and (seen.fingerprint, seen.job_ids, seen.claimed_at) == ("fp", ["job_1"], NOW)
    assert store.idempotency.get("bob", "k", NOW) is None
    # and once it has expired it is taken over
    later = NOW + LIFETIME + timedelta(seconds=1)
    assert store.idempotency.get(OWNER, "k", later) is None
    assert store.idempotency.claim(OWNER, "k", "new", ["job_4", "job_5"], later) is None
    again = store.idempotency.get(OWNER, "k", later)
    assert again is not None and again.job_ids == ["job_4", "job_5"]


def test_dead_letters_are_kept_per_owner(store: Store) -> None:
    letters = [
        DeadLetter(
            owner=OWNER,
            job_id="job_1",
            execution_id=f"job_1.{i}",
            scheduled_at=NOW,
            schedule_version=1,
            manual=False,
            dead_lettered_at=NOW,
            error="gave up",
        )
        for i in range(3)
    ]
    for letter in letters:
        store.dead_letters.put(letter)
    store.dead_letters.put(letters[0])  # (again: still one)
    first = store.dead_letters.page(OWNER, 2, None)
    rest = store.dead_letters.page(OWNER, 2, first.last_key)
    assert first.items + rest.items == letters
    assert store.dead_letters.page("bob", 10, None).items == []
    store.dead_letters.delete(OWNER, "job_1.1")
    assert store.dead_letters.get(OWNER, "job_1.1") is None
    assert store.dead_letters.get(OWNER, "job_1.2") == letters[2]


def test_a_named_task_changes_only_at_the_version_read_and_counts_the_jobs_using_it(store: Store) -> None:
    # Given a named task, and two active jobs that use it
    task = NamedTask(owner=OWNER, name="remind", type="noop", params={}, created_at=NOW, updated_at=NOW)
    store.tasks.put_new(task)
    with pytest.raises(LostRace):
        store.tasks.put_new(task)
    users = [
        job(f"job_{i}", task=TaskRef(name="remind"), created=NOW + timedelta(minutes=i)) for i in range(2)
    ]
    store.jobs.put_new_many([*users, job("job_inline")])
    # Then they are counted and listed, newest first
    assert store.tasks.count_jobs_using(OWNER, "remind", 10) == 2
    assert store.tasks.job_ids_using(OWNER, "remind", 10, None).items == ["job_1", "job_0"]
    # When it is changed at its version, then at a stale one / Then only the first holds
    changed = store.tasks.replace(replace(task, description="v2"), task.version)
    with pytest.raises(LostRace):
        store.tasks.replace(replace(task, description="stale"), task.version)
    assert store.tasks.get(OWNER, "remind") == changed
    assert store.tasks.page(OWNER, 10, None).items == [changed]
    with pytest.raises(LostRace):
        store.tasks.delete(task)
    store.tasks.delete(changed)
    assert store.tasks.get(OWNER, "remind") is None
