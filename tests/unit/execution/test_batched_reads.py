"""Reads of jobs that arrive together share one call (punctual/execution/batched_reads.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pytest

from punctual.domain.errors import UnreadableItem
from punctual.execution.batched_reads import BatchedReads


def test_reads_arriving_while_a_call_is_on_its_way_share_the_next_one() -> None:
    calls: list[list[str]] = []
    first_call_in = threading.Event()
    release_first = threading.Event()

    def read_many(ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        ids = list(ids)
        calls.append(ids)
        if len(calls) == 1:
            first_call_in.set()
            assert release_first.wait(10)
        return {i: f"job {i}" for i in ids if i != "gone"}, {"bad": "unreadable"} if "bad" in ids else {}

    reads = BatchedReads(read_many, max_in_flight=1)
    answers: dict[str, object] = {}

    def get(job_id: str) -> None:
        try:
            answers[job_id] = reads.get(job_id)
        except UnreadableItem as exc:
            answers[job_id] = exc

    # Given a lone read, which goes at once, held up on its way
    lone = threading.Thread(target=get, args=("a",))
    lone.start()
    assert first_call_in.wait(10)
    # When more reads arrive meanwhile (one job twice, one gone, one unreadable)
    others = [threading.Thread(target=get, args=(i,)) for i in ("b", "c", "b", "gone", "bad")]
    for thread in others:
        thread.start()
    while len(reads._turns) < len(others):  # all of them waiting for their turn
        threading.Event().wait(0.001)
    release_first.set()
    for thread in [lone, *others]:
        thread.join(10)
    # Then they went together in one more call, and each got its own answer
    assert calls[0] == ["a"]
    assert sorted(calls[1]) == ["b", "bad", "c", "gone"] and len(calls) == 2
    assert answers["a"] == "job a" and answers["b"] == "job b" and answers["c"] == "job c"
    assert answers["gone"] is None
    assert isinstance(answers["bad"], UnreadableItem)


def test_a_failed_call_fails_the_reads_it_carried_and_the_next_read_goes_again() -> None:
    outcomes = iter([RuntimeError("throttled"), None])

    def read_many(ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        error = next(outcomes)
        if error is not None:
            raise error
        return {i: i for i in ids}, {}

    reads = BatchedReads(read_many)
    with pytest.raises(RuntimeError):
        reads.get("a")
    assert reads.get("a") == "a"


def test_up_to_max_in_flight_calls_go_at_once_and_the_reads_after_them_share_the_next() -> None:
    calls: list[list[str]] = []
    lock = threading.Lock()
    in_call = threading.Semaphore(0)
    release = threading.Event()

    def read_many(ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        with lock:
            calls.append(list(ids))
            held = len(calls) <= 2
        if held:
            in_call.release()
            assert release.wait(10)
        return {i: f"job {i}" for i in ids}, {}

    reads = BatchedReads(read_many, max_in_flight=2)
    answers: dict[str, object] = {}

    def get(job_id: str) -> None:
        answers[job_id] = reads.get(job_id)

    # Given two lone reads, both on their way at once (neither waits for the other)
    threads = [threading.Thread(target=get, args=(i,)) for i in ("a", "b")]
    for thread in threads:
        thread.start()
    assert in_call.acquire(timeout=10) and in_call.acquire(timeout=10)
    # When three more arrive while both are held up
    later = [threading.Thread(target=get, args=(i,)) for i in ("c", "d", "e")]
    for thread in later:
        thread.start()
    while len(reads._turns) < len(later):
        threading.Event().wait(0.001)
    release.set()
    for thread in threads + later:
        thread.join(10)
    # Then those three went together in one call once a call came back, and each got its answer
    assert sorted(map(sorted, calls[:2])) == [["a"], ["b"]]
    assert [sorted(c) for c in calls[2:]] == [["c", "d", "e"]]
    assert answers == {i: f"job {i}" for i in "abcde"}
    assert reads._in_flight == 0 and reads._turns == []


def test_many_readers_at_once_each_get_their_answer_and_leave_no_call_counted() -> None:
    def read_many(ids: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        threading.Event().wait(0.001)
        return {i: i for i in ids}, {}

    reads = BatchedReads(read_many, max_in_flight=3)
    answers: list[object] = []
    threads = [
        threading.Thread(target=lambda n=n: answers.append(reads.get(f"j{n % 40}"))) for n in range(300)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(answers) == sorted(f"j{n % 40}" for n in range(300))
    assert reads._in_flight == 0 and reads._turns == [] and reads._waiting == {}
