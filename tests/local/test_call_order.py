"""The local stack's outcome writes: marked per thread, at most so many at once, and only those."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest.mock import MagicMock

import pytest

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.store import Store
from punctual.store.changes import ChangeRepository
from punctual.store.executions import ExecutionRepository
from punctual.store.jobs import JobRepository
from punctual_local import call_order


@pytest.fixture
def two_lanes() -> Iterator[None]:
    call_order.limit_bookkeeping(2)
    yield
    call_order.limit_bookkeeping(None)


def test_a_bookkeeping_block_marks_its_thread_only_and_nests() -> None:
    block, marked = call_order.bookkeeping, call_order.is_bookkeeping
    seen: list[bool] = []
    with block():
        with block():
            seen.append(marked())
        seen.append(marked())
        other = threading.Thread(target=lambda: seen.append(marked()))
        other.start()
        other.join(5)
    seen.append(marked())
    assert seen == [True, True, False, False]


@pytest.mark.usefixtures("two_lanes")
def test_with_lanes_no_more_threads_than_lanes_are_in_blocks_at_once_and_nesting_takes_none() -> None:
    inside = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()
    entered = threading.Semaphore(0)

    def write() -> None:
        nonlocal inside, most
        with call_order.bookkeeping(), call_order.bookkeeping():  # (nested: one lane, not two)
            with lock:
                inside += 1
                most = max(most, inside)
            entered.release()
            assert release.wait(10)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=write) for _ in range(5)]
    for thread in threads:
        thread.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    assert not entered.acquire(timeout=0.1)  # the third waits for a lane
    release.set()
    for thread in threads:
        thread.join(5)
    assert most == 2 and inside == 0


@pytest.mark.usefixtures("two_lanes")
def test_a_block_that_raises_gives_its_lane_back() -> None:
    for _ in range(3):
        with pytest.raises(RuntimeError), call_order.bookkeeping():
            raise RuntimeError("throttled")
    done = threading.Event()

    def enter() -> None:
        with call_order.bookkeeping():  # (waits for a lane if the raised blocks kept theirs)
            done.set()

    worker = threading.Thread(target=enter)
    worker.start()
    assert done.wait(5)


def test_the_stacks_store_marks_its_outcome_writes_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a store whose repositories note whether each call was marked
    marked: dict[str, bool] = {}

    def noting(name: str) -> object:
        def call(self: object, *args: object, **kwargs: object) -> None:
            marked[name] = call_order.is_bookkeeping()

        return call

    for repository, name in (
        (ExecutionRepository, "put_end"),
        (ExecutionRepository, "claim"),
        (JobRepository, "record_outcome"),
        (JobRepository, "get"),
    ):
        monkeypatch.setattr(repository, name, noting(name))
    store = Store(MagicMock(), MagicMock(), "punctual", shard_count=4, retention_days=30)
    # When the local stack marks its outcomes, and a run's end, its job's outcome, a claim and a read go
    call_order.mark_calls(store, lanes=None)
    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    ended = Execution(
        id="job.1",
        job_id="job",
        owner="alice",
        scheduled_at=at,
        status=ExecutionStatus.SUCCEEDED,
        schedule_version=1,
        finished_at=at + timedelta(seconds=1),
    )
    store.executions.put_end(ended)
    store.executions.claim(ended, now=at, lease_until=at, lateness_ms=0, task_version=None, stored=True)
    store.jobs.record_outcome(ended)
    store.jobs.get("job")
    # Then the writes of what has happened are marked, and only they; the thread is unmarked after
    assert marked == {"put_end": True, "claim": False, "record_outcome": True, "get": False}
    assert not call_order.is_bookkeeping()


def test_the_stacks_store_marks_its_change_record_reads_as_waited_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a store whose change records note whether their read was marked
    marked: list[bool] = []

    def changed(self: object, instant: datetime) -> frozenset[str]:
        marked.append(call_order.is_waited_on())
        return frozenset()

    monkeypatch.setattr(ChangeRepository, "changed", changed)
    store = Store(MagicMock(), MagicMock(), "punctual", shard_count=4, retention_days=30)
    # When the local stack marks its calls, and a pack reads its instant's change records
    call_order.mark_calls(store, lanes=None)
    store.changes.changed(datetime(2026, 12, 1, 9, tzinfo=UTC))
    # Then that read was marked, and the thread is unmarked after
    assert marked == [True] and not call_order.is_waited_on()
