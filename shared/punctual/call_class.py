"""What a store call is for, for a stand-in that orders calls (the local stack's gate on moto).

An outcome written after a run (the execution's end, the job's completion) can wait a moment without
anyone seeing it; a start, a claim ahead of an instant or a user's request cannot. Marked here per
thread, read by whoever orders the calls; on AWS nothing reads it and the calls go as they are.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


@contextmanager
def bookkeeping() -> Iterator[None]:
    """The calls made in this block record what has happened (they may be ordered after others)."""
    before = getattr(_local, "bookkeeping", False)
    _local.bookkeeping = True
    try:
        yield
    finally:
        _local.bookkeeping = before


def is_bookkeeping() -> bool:
    return bool(getattr(_local, "bookkeeping", False))
