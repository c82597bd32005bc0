"""Bookkeeping blocks: marked per thread, and at most so many at once where a process limits them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from punctual.execution import call_class


@pytest.fixture
def two_lanes() -> Iterator[None]:
    call_class.limit_bookkeeping(2)
    yield
    call_class.limit_bookkeeping(None)


def test_a_bookkeeping_block_marks_its_thread_only_and_nests() -> None:
    block, marked = call_class.bookkeeping, call_class.is_bookkeeping
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
        with call_class.bookkeeping(), call_class.bookkeeping():  # (nested: one lane, not two)
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
        with pytest.raises(RuntimeError), call_class.bookkeeping():
            raise RuntimeError("throttled")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (call_class.bookkeeping().__enter__(), done.set()))
    worker.start()
    assert done.wait(5)
