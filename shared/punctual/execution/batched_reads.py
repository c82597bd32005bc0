"""Reads of jobs (or of executions) that arrive together share one call.

Executions due at one instant all read their job at that instant (the worker's read after its claim,
which lets a pause or cancel that landed meanwhile stop the run). Each asking for itself, a burst of
them makes as many GetItem calls at once, and the last waits for all the others. Here a read that
arrives while `max_in_flight` calls are on their way waits for one of them to come back and then
goes with every read that arrived meanwhile, up to 100, in one BatchGetItem: the same consistent
read, the same read units (DynamoDB counts a batch's items one by one), a call per wave instead of a
call per execution. A read that finds fewer calls on their way goes at once, so nothing waits for
company. Several calls at once, not one: a process that runs many executions (the local stack runs
all its worker invocations in one) would otherwise make a burst's thousand reads in ten calls one
after the other, each waiting out the one before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from itertools import islice
from typing import Generic, TypeVar

from punctual.domain.errors import UnreadableItem

# BatchGetItem's limit.
MAX_KEYS = 100
# Calls on their way at once: enough to overlap their round trips, few enough that a burst's reads
# still go a hundred to a call.
MAX_IN_FLIGHT = 10

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
# Keys (job ids, say) -> what was found by key, and apart the keys of items that cannot be read, with why.
ReadMany = Callable[[Iterable[K]], tuple[dict[K, T], dict[K, str]]]


class _Turn(Generic[T]):
    def __init__(self, answer: Future[T | None]) -> None:
        self.answer = answer
        self.event = threading.Event()
        self.given = False  # a call to make, handed over by a call that came back


class BatchedReads(Generic[K, T]):
    """`get(key)`, answered by a call shared with the reads waiting at the time (None: no such item).

    A reader that finds a call free makes one, its own read first; when a call comes back, the next
    (for the reads that arrived meanwhile) is made by one of their readers, so no reader makes calls
    for others after its own answer has come."""

    def __init__(
        self, read_many: ReadMany[K, T], max_in_flight: int = MAX_IN_FLIGHT, *, what: str = "job"
    ) -> None:
        self._read_many = read_many
        self._what = what  # what a key names, for the error of an item that cannot be read
        self._max_in_flight = max_in_flight
        self._lock = threading.Lock()
        self._waiting: dict[K, list[Future[T | None]]] = {}  # by key, in arrival order
        self._turns: list[_Turn[T]] = []  # readers waiting for their answer or for a call to make
        self._in_flight = 0  # calls on their way, or about to be made by a reader given its turn

    def get(self, key: K) -> T | None:
        answer: Future[T | None] = Future()
        with self._lock:
            self._waiting.setdefault(key, []).append(answer)
            turn = None
            if self._in_flight >= self._max_in_flight:
                turn = _Turn(answer)
                self._turns.append(turn)
                # Woken by its answer, or given a call to make.
                answer.add_done_callback(lambda _: turn.event.set())
            else:
                self._in_flight += 1
        if turn is not None:
            turn.event.wait()
            with self._lock:
                if not turn.given:  # answered by a call another reader made: no call to make
                    self._turns.remove(turn)
                    return answer.result()
        self._call(key)
        return answer.result()

    def _call(self, own: K) -> None:
        with self._lock:
            # Its own read first (unless a call on its way carries it), then the others in arrival order.
            mine = [own] if own in self._waiting else []
            others = [i for i in islice(self._waiting, MAX_KEYS + 1) if i != own]
            ids = (mine + others)[:MAX_KEYS]
            answers = {key: self._waiting.pop(key) for key in ids}
        try:
            if ids:
                self._read(ids, answers)
        finally:
            with self._lock:
                self._in_flight -= 1
                # Everything still waiting has a reader waiting for its turn: the first makes a call.
                waiting = next((turn for turn in self._turns if not turn.answer.done()), None)
                if waiting is not None:
                    self._turns.remove(waiting)
                    waiting.given = True
                    self._in_flight += 1
                    waiting.event.set()

    def _read(self, ids: list[K], answers: dict[K, list[Future[T | None]]]) -> None:
        try:
            found, unreadable = self._read_many(ids)
        except BaseException as exc:
            for futures in answers.values():
                for future in futures:
                    future.set_exception(exc)
            return
        for key, futures in answers.items():
            for future in futures:
                if key in unreadable:
                    future.set_exception(UnreadableItem(f"{self._what} {key}: {unreadable[key]}"))
                else:
                    future.set_result(found.get(key))
