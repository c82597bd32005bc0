"""Calls side by side on the shared pools: order kept, nesting inline, reads never behind sends."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from punctual.platform.concurrency import POOL_THREADS, parallel_map


def test_results_come_in_the_order_of_the_items() -> None:
    assert parallel_map(lambda n: n * n, list(range(50))) == [n * n for n in range(50)]


def test_a_call_made_from_a_pool_thread_runs_inline() -> None:
    # (the pool waiting on itself would never end once every thread waited)
    def nested(n: int) -> list[int]:
        return parallel_map(lambda m: n + m, [1, 2, 3])

    assert parallel_map(nested, list(range(2 * POOL_THREADS))) == [
        [n + 1, n + 2, n + 3] for n in range(2 * POOL_THREADS)
    ]


def test_reads_do_not_wait_behind_the_calls_already_queued() -> None:
    # Given every thread of the pool busy with sends, and more sends queued behind them
    release = threading.Event()
    busy = threading.Semaphore(0)

    def send(_: int) -> None:
        busy.release()
        release.wait(10)

    with ThreadPoolExecutor(max_workers=2) as lanes:
        sending = lanes.submit(parallel_map, send, list(range(3 * POOL_THREADS)))
        try:
            for _ in range(POOL_THREADS):
                assert busy.acquire(timeout=10)
            # When another lane reads
            reading = lanes.submit(parallel_map, lambda n: n + 1, [1, 2, 3], reads=True)
            # Then its reads are answered while the sends still wait
            assert reading.result(timeout=5) == [2, 3, 4]
            assert not sending.done()
        finally:
            release.set()
        sending.result(timeout=10)
