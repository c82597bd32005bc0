"""A pack's members wait on the pack's threads from before the instant, and all go at its word
(punctual/execution/firing.py, Starters)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from punctual.execution.firing import Starters
from punctual.execution.receipts import Disposition


def test_members_wait_on_threads_made_before_the_word_and_start_at_it() -> None:
    # Given a pack's pool that prepared its 20 members, and the members waiting on it
    pool = ThreadPoolExecutor(max_workers=20)
    prepared = [pool.submit(time.sleep, 0.01) for _ in range(20)]
    starters = Starters(pool, range(20))
    for future in prepared:
        future.result()
    time.sleep(0.05)
    threads_before = len(pool._threads)
    # Then nothing has started before the word
    assert not any(future.done() for future in starters.waiting.values())
    # When the word comes, with each member's work
    started: list[int] = []

    def start(n: int) -> Disposition:
        started.append(n)
        return Disposition.DONE

    starters.go({n: partial(start, n) for n in range(20)})
    # Then every member starts, on the threads made before it (no thread is made at the word)
    assert [future.result(timeout=5) for future in starters.waiting.values()] == [Disposition.DONE] * 20
    assert sorted(started) == list(range(20))
    assert len(pool._threads) == threads_before == 20
    pool.shutdown()


def test_a_pool_with_a_thread_a_member_never_starves_the_preparing() -> None:
    # Given a pool of as many threads as members, the preparing given first and slow
    pool = ThreadPoolExecutor(max_workers=5)
    ready = threading.Event()
    prepared = [pool.submit(ready.wait, 5) for _ in range(5)]
    starters = Starters(pool, range(5))
    # When the members are let go before the preparing ends, and each waits for its preparing
    starters.go({n: partial(lambda n: bool(prepared[n].result(5)) and Disposition.DONE, n) for n in range(5)})
    ready.set()
    # Then each member ends (no waiting member holds a thread its preparing needs)
    assert [f.result(timeout=5) for f in starters.waiting.values()] == [Disposition.DONE] * 5
    pool.shutdown()


def test_a_pack_that_fails_before_its_starts_lets_its_threads_end_doing_nothing() -> None:
    # Given members waiting on a pool
    pool = ThreadPoolExecutor(max_workers=3)
    starters = Starters(pool, range(3))
    # When the pack lets them go without work (it failed before its instant's starts)
    starters.let_go()
    # Then the threads end, and the pool shuts down without waiting on them
    assert {f.result(timeout=5) for f in starters.waiting.values()} == {Disposition.LATER}
    pool.shutdown(wait=True)
    # and a word after that changes nothing
    starters.let_go()
