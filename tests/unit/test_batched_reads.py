"""Reads of jobs that arrive together share one call (punctual/batched_reads.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pytest

from punctual.batched_reads import BatchedReads
from punctual.errors import UnreadableItem


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

    reads = BatchedReads(read_many)
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
