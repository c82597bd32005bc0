"""A pack's members wait on the pack's threads from before the instant, and all go at its word; those
that launch hold no thread, their answers taken as they come (punctual/execution/firing.py,
Starters); the ends in an environment wait for the starts under way
in it at their instant, whichever pack they are in (StartsFirst)."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest

from punctual.execution.firing import ANSWERS_AT_ONCE, Firing, Starters
from punctual.execution.receipts import Disposition
from punctual.execution.starts_first import StartsFirst
from punctual.platform.clock import ManualClock
from punctual.tasks import Awaited

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CLOCK = ManualClock(AT)


def test_members_wait_on_threads_made_before_the_word_and_start_at_it() -> None:
    # Given a pack's pool that prepared its 20 members, and the members waiting on it
    pool = ThreadPoolExecutor(max_workers=20)
    prepared = [pool.submit(time.sleep, 0.01) for _ in range(20)]
    starters = Starters(pool, dict.fromkeys(range(20)), StartsFirst(), CLOCK)
    for future in prepared:
        future.result()
    time.sleep(0.05)
    threads_before = len(pool._threads)
    # Then nothing has started before the word
    assert not any(future.done() for future in starters.outcomes.values())
    # When the word comes, with each member's work
    started: list[int] = []

    def start(n: int) -> Disposition:
        started.append(n)
        return Disposition.DONE

    starters.go({n: partial(start, n) for n in range(20)})
    # Then every member starts, on the threads made before it (no thread is made at the word)
    assert [future.result(timeout=5) for future in starters.outcomes.values()] == [Disposition.DONE] * 20
    assert sorted(started) == list(range(20))
    assert len(pool._threads) == threads_before == 20
    pool.shutdown()


def test_a_pool_with_a_thread_a_member_never_starves_the_preparing() -> None:
    # Given a pool of as many threads as members, the preparing given first and slow
    pool = ThreadPoolExecutor(max_workers=5)
    ready = threading.Event()
    prepared = [pool.submit(ready.wait, 5) for _ in range(5)]
    starters = Starters(pool, dict.fromkeys(range(5)), StartsFirst(), CLOCK)
    # When the members are let go before the preparing ends, and each waits for its preparing
    starters.go({n: partial(lambda n: bool(prepared[n].result(5)) and Disposition.DONE, n) for n in range(5)})
    ready.set()
    # Then each member ends (no waiting member holds a thread its preparing needs)
    assert [f.result(timeout=5) for f in starters.outcomes.values()] == [Disposition.DONE] * 5
    pool.shutdown()


def test_a_pack_that_fails_before_its_starts_lets_its_threads_end_doing_nothing() -> None:
    # Given members waiting on a pool
    pool = ThreadPoolExecutor(max_workers=3)
    starters = Starters(pool, dict.fromkeys(range(3)), StartsFirst(), CLOCK)
    # When the pack lets them go without work (it failed before its instant's starts)
    starters.let_go()
    # Then the threads end, and the pool shuts down without waiting on them
    assert {f.result(timeout=5) for f in starters.outcomes.values()} == {Disposition.LATER}
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
    a, b = (Starters(pool, dict.fromkeys(range(3)), starts, CLOCK) for pool in pools)
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
        assert [f.result(timeout=5) for f in a.outcomes.values()] == [Disposition.DONE] * 3
        end = _waits(starts)
        # Then that end waits for pack b's starts, and is written once they have started
        assert not end.wait(0.2)
        let_b.set()
        assert end.wait(5)
        assert [f.result(timeout=5) for f in b.outcomes.values()] == [Disposition.DONE] * 3
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
    holding = Starters(pools[0], dict.fromkeys(range(2)), firing.starts_at(later), CLOCK)
    skipped = Starters(pools[1], dict.fromkeys(range(2)), firing.starts_at(AT), CLOCK)
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


class _Launched:
    """A task made ready whose start launches: its answer comes on `sock`, by `by`."""

    def __init__(self, sock: socket.socket, by: datetime) -> None:
        self.sock = sock
        self.by = by

    def launches(self) -> bool:
        return True

    def awaited(self) -> Awaited:
        return Awaited(self.sock, self.by)


def _launched(n: int, by: datetime) -> tuple[dict[int, Future[Any]], list[socket.socket], dict[int, Awaited]]:
    """`n` members made ready to launch, the server's ends of their connections, where each answer comes."""
    ready: dict[int, Future[Any]] = {}
    servers: list[socket.socket] = []
    answers: dict[int, Awaited] = {}
    for i in range(n):
        ours, theirs = socket.socketpair()
        servers.append(theirs)
        prepared: Future[Any] = Future()
        prepared.set_result(_Launched(ours, by))
        ready[i] = prepared
        answers[i] = Awaited(ours, by)
    return ready, servers, answers


def _all_free(pool: ThreadPoolExecutor, threads: int) -> None:
    """Every thread of `pool` free for other work at once."""
    barrier = threading.Barrier(threads)
    assert all(
        f.result(timeout=5) is not None for f in [pool.submit(barrier.wait, 5) for _ in range(threads)]
    )


def _take(sock: socket.socket, n: int, taken: list[int]) -> Disposition:
    sock.settimeout(5)
    if sock.recv(16):
        taken.append(n)
    return Disposition.DONE


def test_members_that_launch_give_their_threads_back_and_their_answers_are_taken_as_they_come() -> None:
    # Given a pack of 20 members each made ready to launch, on a pool of 20 threads
    pool = ThreadPoolExecutor(max_workers=20)
    ready, servers, answers = _launched(20, AT + timedelta(seconds=30))
    starters = Starters(pool, ready, StartsFirst(), CLOCK)
    # Then no member holds a thread while the pack holds: all 20 are free for other work at once
    _all_free(pool, 20)
    # When the word comes, each launched, its work taking its answer
    taken: list[int] = []
    work = {n: partial(_take, answers[n].sock, n, taken) for n in range(20)}
    starters.go(work, answers=answers)
    # Then a member's work runs once its answer comes, and not before
    servers[7].sendall(b"HTTP/1.1 200")
    assert starters.outcomes[7].result(timeout=5) is Disposition.DONE
    assert taken == [7]
    assert not any(f.done() for n, f in starters.outcomes.items() if n != 7)
    for server in servers:
        server.sendall(b"HTTP/1.1 200")
    assert [f.result(timeout=5) for f in starters.outcomes.values()] == [Disposition.DONE] * 20
    assert sorted(taken) == list(range(20))
    pool.shutdown()
    for sock in [*servers, *(a.sock for a in answers.values())]:
        sock.close()


def test_an_answer_that_does_not_come_is_handed_on_when_its_timeout_ends() -> None:
    # Given a pack of 20 launched members, one whose timeout has ended and the others' not
    pool = ThreadPoolExecutor(max_workers=20)
    ready, servers, answers = _launched(20, AT + timedelta(seconds=30))
    answers[0] = Awaited(answers[0].sock, AT)
    starters = Starters(pool, ready, StartsFirst(), CLOCK)
    _all_free(pool, 20)
    handed = threading.Event()

    def timed_out() -> Disposition:
        handed.set()
        return Disposition.DONE

    taken: list[int] = []
    work = {n: partial(_take, answers[n].sock, n, taken) for n in range(1, 20)}
    # When none answers
    starters.go({0: timed_out, **work}, answers=answers)
    # Then the one past its timeout is handed on (to find it timed out), the others still wait
    assert handed.wait(5)
    assert not any(starters.outcomes[n].done() for n in range(1, 20))
    for server in servers[1:]:
        server.sendall(b"late")
    assert [f.result(timeout=5) for f in starters.outcomes.values()] == [Disposition.DONE] * 20
    pool.shutdown()
    for sock in [*servers, *(a.sock for a in answers.values())]:
        sock.close()


def test_a_small_packs_launched_members_keep_their_threads() -> None:
    # Given a pack of as many members as its takers, each made ready to launch
    pool = ThreadPoolExecutor(max_workers=ANSWERS_AT_ONCE)
    ready, servers, answers = _launched(ANSWERS_AT_ONCE, AT + timedelta(seconds=30))
    starters = Starters(pool, ready, StartsFirst(), CLOCK)
    # Then each waits on its thread (no reader is made at the instant): the pool has none free
    extra = pool.submit(lambda: Disposition.DONE)
    assert not extra.done()
    taken: list[int] = []
    starters.go(
        {n: partial(_take, answers[n].sock, n, taken) for n in range(ANSWERS_AT_ONCE)}, answers=answers
    )
    for server in servers:
        server.sendall(b"HTTP/1.1 200")
    assert [f.result(timeout=5) for f in starters.outcomes.values()] == [Disposition.DONE] * ANSWERS_AT_ONCE
    assert extra.result(timeout=5) is Disposition.DONE
    pool.shutdown()
    for sock in [*servers, *(a.sock for a in answers.values())]:
        sock.close()


@pytest.mark.parametrize(("threads", "most"), [(40, ANSWERS_AT_ONCE), (1, 1)])
def test_answers_are_taken_a_few_at_a_time_even_on_a_pool_of_one_thread(threads: int, most: int) -> None:
    # Given 40 launched members whose answers all come at once
    pool = ThreadPoolExecutor(max_workers=threads)
    ready, servers, answers = _launched(40, AT + timedelta(seconds=30))
    starters = Starters(pool, ready, StartsFirst(), CLOCK)
    _all_free(pool, threads)  # (the instant comes after the members gave their threads back)
    lock = threading.Lock()
    at_once = [0, 0]

    def take(n: int) -> Disposition:
        with lock:
            at_once[0] += 1
            at_once[1] = max(at_once)
        time.sleep(0.005)
        with lock:
            at_once[0] -= 1
        return Disposition.DONE

    starters.go({n: partial(take, n) for n in range(40)}, answers=answers)
    for server in servers:
        server.sendall(b"HTTP/1.1 200")
    # Then every one is taken, never more at once than the pack's share
    assert [f.result(timeout=10) for f in starters.outcomes.values()] == [Disposition.DONE] * 40
    assert at_once[1] <= most
    pool.shutdown()
    for sock in [*servers, *(a.sock for a in answers.values())]:
        sock.close()
