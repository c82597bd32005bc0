"""What a store call is for, for a stand-in that orders calls (the local stack's gate on moto).

An outcome written after a run (the execution's end, the job's completion) can wait a moment without
anyone seeing it; a start, a claim ahead of an instant or a user's request cannot. Marked here per
thread, read by whoever orders the calls; on AWS nothing reads it and the calls go as they are.
A process that runs many executions in one interpreter (the local stack) also bounds how many
threads are in such blocks at once (`limit_bookkeeping`): their CPU is the interpreter's, which the
starts need.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()
_lanes: threading.Semaphore | None = None


def limit_bookkeeping(lanes: int | None) -> None:
    """At most `lanes` threads of this process in bookkeeping blocks at once (None: no limit)."""
    global _lanes
    _lanes = None if lanes is None else threading.Semaphore(lanes)


@contextmanager
def _marked(name: str) -> Iterator[None]:
    """This thread's calls marked `name` in the block (as they were after it: blocks nest)."""
    before = getattr(_local, name, False)
    setattr(_local, name, True)
    try:
        yield
    finally:
        setattr(_local, name, before)


@contextmanager
def bookkeeping() -> Iterator[None]:
    """The calls made in this block record what has happened (they may be ordered after others)."""
    lanes = None if is_bookkeeping() else _lanes
    if lanes is not None:
        lanes.acquire()
    try:
        with _marked("bookkeeping"):
            yield
    finally:
        if lanes is not None:
            lanes.release()


def is_bookkeeping() -> bool:
    return bool(getattr(_local, "bookkeeping", False))
