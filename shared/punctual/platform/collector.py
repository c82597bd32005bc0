"""The cyclic garbage collector, paused while requests are answered."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Under requests that overlap without a gap (the local stack answers several at once, on threads),
# the young objects are still collected this often: what a request builds holds few cycles, but a
# process that never collected would keep every one of them.
LONGEST_PAUSE_SECONDS = 5.0

_lock = threading.Lock()
_inside = 0  # requests in a `paused` block
_was_on = False  # whether the collector was on when the first of them came in
_since = 0.0  # when it was last turned off, or collected while off


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, and on again (if it was on) once no request is in one.

    A request allocates thousands of small objects, all alive until it answers; each allocation counts
    towards a collection, which walks the young objects, and now and then every tracked one. Off, a
    request runs without those passes (a 3 MiB body parsed in a tenth of the time); the collector
    catches up once it is on again: on Lambda, between invocations, off the request's path. Counted
    across threads: each thread noting whether it was on would let one that looked while another had
    it off turn it off for good."""
    global _inside, _was_on, _since
    with _lock:
        if _inside == 0:
            _was_on = gc.isenabled()
            gc.disable()
            _since = time.monotonic()
        _inside += 1
    try:
        yield
    finally:
        collect = False
        with _lock:
            _inside -= 1
            if _was_on and _inside == 0:
                gc.enable()
            elif _was_on and time.monotonic() - _since > LONGEST_PAUSE_SECONDS:
                collect = True
                _since = time.monotonic()
        if collect:
            # (outside the lock: the requests coming and going meanwhile do not wait for it)
            gc.collect(1)
