"""The order of the stack's calls in moto's gates: outcomes after runs last, the instant's read first.

Locally every function shares one interpreter and moto answers in one more. A burst's ends and its
jobs' outcomes, written as its runs end, held up the creations and the steady runs due just after it
(docs/local-stack.md has the measurement). An outcome can wait a moment without anyone seeing it;
a start or a user's request cannot. And a pack at its instant waits for one read before it starts
(its instant's change records, a Query): behind a burst's writes it waited for all of them. On AWS
nothing needs this: each environment has its own CPU and DynamoDB is not one interpreter. So the
Lambda package knows nothing of it: the stack gives the worker a store whose outcome writes mark
their thread (`bookkeeping`) and whose change-record reads mark theirs (`waited_on`), and its gates
read the marks (gate.gate_client). The stack also bounds how many threads are in outcome writes at
once (`limit_bookkeeping`): their CPU is the interpreter's, which the starts need.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from punctual.domain.executions import Execution
from punctual.store import Store
from punctual.store.changes import ChangeRepository
from punctual.store.dead_letters import DeadLetterRepository
from punctual.store.executions import ExecutionRepository
from punctual.store.jobs import JobRepository

# Threads of the stack writing outcomes at once. Their writes wait behind the others in the gate
# anyway; what this bounds is their CPU in the one interpreter: a burst's outcomes, written together
# once its starts are made, would hold it while steady executions due then wait to start.
BOOKKEEPING_LANES = 6

_local = threading.local()
_lanes: threading.Semaphore | None = None


def limit_bookkeeping(lanes: int | None) -> None:
    """At most `lanes` threads of this process in bookkeeping blocks at once (None: no limit)."""
    global _lanes
    _lanes = None if lanes is None else threading.Semaphore(lanes)


@contextmanager
def bookkeeping() -> Iterator[None]:
    """The calls made in this block record what has happened (they may be ordered after others)."""
    before = is_bookkeeping()
    lanes = None if before else _lanes
    if lanes is not None:
        lanes.acquire()
    _local.bookkeeping = True
    try:
        yield
    finally:
        _local.bookkeeping = before
        if lanes is not None:
            lanes.release()


def is_bookkeeping() -> bool:
    return bool(getattr(_local, "bookkeeping", False))


@contextmanager
def waited_on() -> Iterator[None]:
    """The calls made in this block are what starts wait on at their instant (let in first)."""
    before = is_waited_on()
    _local.waited_on = True
    try:
        yield
    finally:
        _local.waited_on = before


def is_waited_on() -> bool:
    return bool(getattr(_local, "waited_on", False))


# Each override passes its call on as it came: the repository's own signature stays the one to read.
class _Executions(ExecutionRepository):
    def put_end(self, *args: Any, **kwargs: Any) -> Execution:
        with bookkeeping():
            return super().put_end(*args, **kwargs)

    def finish_attempt(self, *args: Any, **kwargs: Any) -> Execution:
        with bookkeeping():
            return super().finish_attempt(*args, **kwargs)

    def retry_later(self, *args: Any, **kwargs: Any) -> Execution:
        with bookkeeping():
            return super().retry_later(*args, **kwargs)


class _Jobs(JobRepository):
    def complete(self, *args: Any, **kwargs: Any) -> int | None:
        with bookkeeping():
            return super().complete(*args, **kwargs)

    def record_outcome(self, *args: Any, **kwargs: Any) -> int | None:
        with bookkeeping():
            return super().record_outcome(*args, **kwargs)

    def note_ran_while_paused(self, *args: Any, **kwargs: Any) -> bool:
        with bookkeeping():
            return super().note_ran_while_paused(*args, **kwargs)


class _Changes(ChangeRepository):
    def changed(self, *args: Any, **kwargs: Any) -> frozenset[str]:
        with waited_on():
            return super().changed(*args, **kwargs)


class _DeadLetters(DeadLetterRepository):
    def put(self, *args: Any, **kwargs: Any) -> None:
        with bookkeeping():
            super().put(*args, **kwargs)


def mark_calls(store: Store, lanes: int | None = BOOKKEEPING_LANES) -> None:
    """`store`'s writes of outcomes after runs marked `bookkeeping`, at most `lanes` threads of the
    process at once (None: any number), and its reads of change records `waited_on`, for the
    functions that use it."""
    limit_bookkeeping(lanes)
    store.changes = _Changes(store.table)
    store.executions = _Executions(store.table)
    store.jobs = _Jobs(store.table)
    store.dead_letters = _DeadLetters(store.table)
