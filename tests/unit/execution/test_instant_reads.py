"""Reads expected at one instant are made once for all, never before it (punctual/execution/instant_reads.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from punctual.domain.errors import UnreadableItem
from punctual.execution.instant_reads import FORGET_AFTER, InstantReads
from punctual.platform.clock import ManualClock

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
INSTANT = T0 + timedelta(seconds=5)


class Store:
    """Job values by id, and every read made, with the clock's time it was made at."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.values = {"a": "a@1", "b": "b@1", "c": "c@1", "bad": "?"}
        self.many: list[tuple[datetime, list[str]]] = []
        self.one: list[str] = []
        self.fail_many = False

    def read_many(self, ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        ids = list(ids)
        self.many.append((self.clock.now(), ids))
        if self.fail_many:
            raise RuntimeError("throttled")
        found = {i: self.values[i] for i in ids if i in self.values and i != "bad"}
        return found, ({"bad": "cannot be read"} if "bad" in ids else {})

    def read_one(self, job_id: str) -> str | None:
        self.one.append(job_id)
        return self.values.get(job_id)


def reads_and_store() -> tuple[InstantReads[str], Store, ManualClock]:
    clock = ManualClock(T0)
    store = Store(clock)
    return InstantReads(store.read_many, store.read_one, clock), store, clock


def test_reads_expected_at_one_instant_go_in_one_read_at_it_and_see_changes_made_before_it() -> None:
    reads, store, clock = reads_and_store()
    # Given three executions claimed ahead of one instant (one job twice)
    expected = [reads.expect(job_id, INSTANT) for job_id in ("a", "b", "a")]
    # When a job changes before the instant, and the instant comes
    store.values["b"] = "b@2 (paused)"
    clock.set(INSTANT)
    answers = [e.get() for e in expected]
    # Then one read, made at the instant, answered all of them, the change included
    assert store.many == [(INSTANT, ["a", "b"])]
    assert answers == ["a@1", "b@2 (paused)", "a@1"]
    assert store.one == []
    assert reads.instants == 0  # nothing kept once all are answered


def test_the_read_is_never_made_before_its_instant_even_when_asked_early() -> None:
    reads, store, clock = reads_and_store()
    expected = reads.expect("a", INSTANT)
    assert expected.get() == "a@1"
    assert store.many == [(INSTANT, ["a"])]  # it waited for the instant (the manual clock moved to it)
    assert clock.now() == INSTANT


def test_others_of_the_instant_wait_for_the_one_read_under_way_rather_than_reading_again() -> None:
    calls: list[list[str]] = []
    inside = threading.Event()
    release = threading.Event()

    def read_many(ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        calls.append(list(ids))
        inside.set()
        assert release.wait(10)
        return {i: i.upper() for i in calls[-1]}, {}

    own: list[str] = []
    clock = ManualClock(INSTANT)
    reads: InstantReads[str] = InstantReads(read_many, lambda i: own.append(i) or i.lower(), clock)
    expected = [reads.expect(job_id, INSTANT) for job_id in ("a", "b", "c")]
    answers: dict[str, str | None] = {}
    first = threading.Thread(target=lambda: answers.__setitem__("a", expected[0].get()))
    first.start()
    assert inside.wait(10)
    late = reads.expect("d", INSTANT)  # claimed while the shared read is on its way: not in it
    rest = [threading.Thread(target=lambda e=e: answers.__setitem__(e.job_id, e.get())) for e in expected[1:]]
    for thread in rest:
        thread.start()
    release.set()
    for thread in [first, *rest]:
        thread.join(10)
    assert calls == [["a", "b", "c"]]
    assert answers == {"a": "A", "b": "B", "c": "C"}
    assert own == [] and late.get() == "d" and own == ["d"]


def test_a_read_expected_after_the_shared_one_began_is_made_on_its_own() -> None:
    reads, store, clock = reads_and_store()
    early = reads.expect("a", INSTANT)
    clock.set(INSTANT)
    assert early.get() == "a@1"
    late = reads.expect("c", INSTANT)  # (its group was answered and dropped: a new one)
    other = reads.expect("b", INSTANT)
    assert other.get() == "b@1"  # leads the new group, which carries both
    assert late.get() == "c@1"
    assert [ids for _, ids in store.many] == [["a"], ["b", "c"]]


def test_a_failed_shared_read_leaves_each_to_read_on_its_own() -> None:
    reads, store, clock = reads_and_store()
    expected = [reads.expect(job_id, INSTANT) for job_id in ("a", "b")]
    store.fail_many = True
    clock.set(INSTANT)
    assert [e.get() for e in expected] == ["a@1", "b@1"]
    assert store.one == ["a", "b"]


def test_an_unreadable_job_and_a_gone_one_answer_as_a_read_of_their_own_would() -> None:
    reads, _store, clock = reads_and_store()
    bad, gone = reads.expect("bad", INSTANT), reads.expect("gone", INSTANT)
    clock.set(INSTANT)
    with pytest.raises(UnreadableItem):
        bad.get()
    assert gone.get() is None


def test_a_dropped_expectation_is_not_read_and_frees_its_instant() -> None:
    reads, store, clock = reads_and_store()
    skipped = reads.expect("a", INSTANT)
    skipped.drop()
    skipped.drop()  # (twice does nothing)
    assert reads.instants == 0
    kept = reads.expect("b", INSTANT)
    clock.set(INSTANT)
    assert kept.get() == "b@1"
    kept.drop()  # after its read: nothing
    assert [ids for _, ids in store.many] == [["b"]]


def test_instants_whose_reads_never_came_are_forgotten() -> None:
    reads, store, clock = reads_and_store()
    abandoned = reads.expect("a", INSTANT)
    clock.set(INSTANT + FORGET_AFTER + timedelta(seconds=1))
    reads.expect("b", clock.now())  # any later expectation sweeps
    assert reads.instants == 1
    assert abandoned.get() == "a@1"  # should it still ask: a read of its own
    assert store.one == ["a"]
