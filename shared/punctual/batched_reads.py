"""Reads of jobs that arrive together share one call.

Executions due at one instant all read their job at that instant (the worker's read after its claim,
which lets a pause or cancel that landed meanwhile stop the run). Each asking for itself, a burst of
them makes as many GetItem calls at once, and the last waits for all the others. Here a read that
arrives while another is on its way waits for it to come back and then goes with every read that
arrived meanwhile, up to 100, in one BatchGetItem: the same consistent read, the same read units
(DynamoDB counts a batch's items one by one), a call per wave instead of a call per execution. A lone
read goes at once, so nothing waits for company.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Generic, TypeVar

from punctual.errors import UnreadableItem

# BatchGetItem's limit.
MAX_KEYS = 100

T = TypeVar("T")
# Job ids -> what was found by id, and apart the ids of items that cannot be read, with why.
ReadMany = Callable[[Iterable[str]], tuple[dict[str, T], dict[str, str]]]


class BatchedReads(Generic[T]):
    """`get(job_id)`, answered by a call shared with the reads waiting at the time (None: no such job).

    The reader that finds no call on its way makes one; when it comes back, the next call (for the
    reads that arrived meanwhile) is made by one of their readers, so no reader makes calls for
    others after its own answer has come."""

    def __init__(self, read_many: ReadMany[T]) -> None:
        self._read_many = read_many
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Future[T | None]]] = {}  # by job id, in arrival order
        self._turns: list[tuple[Future[T | None], threading.Event]] = []
        self._busy = False  # a call is on its way

    def get(self, job_id: str) -> T | None:
        answer: Future[T | None] = Future()
        with self._lock:
            self._waiting.setdefault(job_id, []).append(answer)
            turn = None
            if self._busy:
                turn = threading.Event()
                self._turns.append((answer, turn))
                # Woken by its answer, or to make the next call.
                answer.add_done_callback(lambda _: turn.set())
            else:
                self._busy = True
        if turn is not None:
            turn.wait()
        if not answer.done():
            self._call()
        return answer.result()

    def _call(self) -> None:
        with self._lock:
            ids = list(self._waiting)[:MAX_KEYS]
            answers = {job_id: self._waiting.pop(job_id) for job_id in ids}
        try:
            jobs, unreadable = self._read_many(ids)
        except BaseException as exc:
            for futures in answers.values():
                for future in futures:
                    future.set_exception(exc)
        else:
            for job_id, futures in answers.items():
                for future in futures:
                    if job_id in unreadable:
                        future.set_exception(UnreadableItem(f"job {job_id}: {unreadable[job_id]}"))
                    else:
                        future.set_result(jobs.get(job_id))
        with self._lock:
            self._turns = [(future, turn) for future, turn in self._turns if not future.done()]
            if self._turns:
                # Everything still waiting has a reader waiting for its turn: the first makes the call.
                _, turn = self._turns.pop(0)
                turn.set()
            else:
                self._busy = False
