"""The cyclic garbage collector, paused while requests build what they parse."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_inside = 0  # requests in a `paused` block (the local stack answers several at once, on threads)
_was_on = False  # whether the collector was on when the first of them came in


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, and on again (if it was on) once no request is in one.

    A request body of 3 MiB may parse into millions of small lists and objects, which the request
    then checks and copies: each allocation counts towards a collection, which walks the young
    objects, all of them still alive, and now and then every tracked object. That took nine tenths
    of the time to parse and check such a body. What a request builds holds no cycle to reclaim; the
    collector runs as usual once it is on again. Counted across threads: each thread noting whether
    it was on would let one that looked while another had it off turn it off for good."""
    global _inside, _was_on
    with _lock:
        if _inside == 0:
            _was_on = gc.isenabled()
            gc.disable()
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _was_on:
                gc.enable()
