"""A pack's members wait on the pack's threads from before the instant, and all go at its word
(punctual/execution/firing.py, Starters); the ends in an environment wait for the starts under way
in it at their instant, whichever pack they are in (StartsFirst)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from types import SimpleNamespace

from punctual.execution.firing import Firing, Starters
from punctual.execution.receipts import Disposition
from punctual.execution.starts_first import StartsFirst
from punctual.platform.clock import ManualClock

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_members_wait_on_threads_made_before_the_word_and_start_at_it() -> None:
    # Given a pack's pool that prepared its 20 members, and the members waiting on it
    pool = ThreadPoolExecutor(max_workers=20)
    prepared = [pool.submit(time.sleep, 0.01) for _ in range(20)]
    starters = Starters(pool, range(20), StartsFirst())
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
    starters = Starters(pool, range(5), StartsFirst())
    # When the members are let go before the preparing ends, and each waits for its preparing
    starters.go({n: partial(lambda n: bool(prepared[n].result(5)) and Disposition.DONE, n) for n in range(5)})
    ready.set()
    # Then each member ends (no waiting member holds a thread its preparing needs)
    assert [f.result(timeout=5) for f in starters.waiting.values()] == [Disposition.DONE] * 5
    pool.shutdown()


def test_a_pack_that_fails_before_its_starts_lets_its_threads_end_doing_nothing() -> None:
    # Given members waiting on a pool
    pool = ThreadPoolExecutor(max_workers=3)
    starters = Starters(pool, range(3), StartsFirst())
    # When the pack lets them go without work (it failed before its instant's starts)
    starters.let_go()
    # Then the threads end, and the pool shuts down without waiting on them
    assert {f.result(timeout=5) for f in starters.waiting.values()} == {Disposition.LATER}
    pool.shutdown(wait=True)
    # and a word after that changes nothing
    starters.let_go()


def _waits(starts: StartsFirst) -> threading.Event:
    """An end written once the starts under way now have started: set when its wait ends."""
    done = threading.Event()

    def end() -> None:
        starts.wait()
        done.set()

    threading.Thread(target=end, daemon=True).start()
    return done


def _firing() -> Firing:
    return Firing(SimpleNamespace(store=SimpleNamespace(changes=None)), ManualClock(AT))  # type: ignore[arg-type]


def test_an_end_waits_for_the_starts_of_every_pack_due_at_its_instant() -> None:
    # Given two packs due at one instant in one environment, each with 3 members on their threads
    firing = _firing()
    starts = firing.starts_at(AT)
    assert firing.starts_at(AT) is starts
    pools = [ThreadPoolExecutor(max_workers=3) for _ in range(2)]
    a, b = (Starters(pool, range(3), starts) for pool in pools)
    let_b = threading.Event()

    def member(starters: Starters, n: int, let: threading.Event | None) -> Disposition:
        if let is not None:
            let.wait(5)
        starters.started(n)()
        return Disposition.DONE

    try:
        # When both get their word, pack b's members starting only once let, and one of pack a's
        # members, started, writes its end
        a.go({n: partial(member, a, n, None) for n in range(3)}, starting=range(3))
        b.go({n: partial(member, b, n, let_b) for n in range(3)}, starting=range(3))
        assert [f.result(timeout=5) for f in a.waiting.values()] == [Disposition.DONE] * 3
        end = _waits(starts)
        # Then that end waits for pack b's starts, and is written once they have started
        assert not end.wait(0.2)
        let_b.set()
        assert end.wait(5)
        assert [f.result(timeout=5) for f in b.waiting.values()] == [Disposition.DONE] * 3
        assert starts.starting == 0
    finally:
        let_b.set()
        for pool in pools:
            pool.shutdown()


def test_an_end_waits_neither_for_a_pack_due_later_nor_for_members_that_start_nothing() -> None:
    # Given a pack of an environment holding for a later instant, and one due now whose members, at
    # its word, have nothing to start (skipped)
    firing = _firing()
    later = AT + timedelta(seconds=5)
    assert firing.starts_at(later) is not firing.starts_at(AT)
    pools = [ThreadPoolExecutor(max_workers=2) for _ in range(2)]
    holding = Starters(pools[0], range(2), firing.starts_at(later))
    skipped = Starters(pools[1], range(2), firing.starts_at(AT))
    release = threading.Event()
    try:
        skipped.go({n: partial(lambda: release.wait(5) and Disposition.DONE) for n in range(2)})
        # When an end of the instant is written meanwhile
        end = _waits(skipped.starts)
        # Then it waits for neither
        assert end.wait(1)
    finally:
        release.set()
        holding.let_go()
        for pool in pools:
            pool.shutdown()
