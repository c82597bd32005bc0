"""The garbage collector's full passes in the local stack's processes: over what is new, not all.

CPython runs a full pass (generation 2) whenever the objects that survived the younger generations
have grown by a quarter since the last one, and a full pass goes over every object the process keeps.
moto's process keeps the whole table as objects, and the stack's and the API's keep what they load.
In a young process that grows fast, so in a stack's first minutes full passes come every few
seconds, each longer than the last as the table grows, and each holds the process's one
interpreter: a burst due while moto's process is in one waits for it, its instant's reads, claims
and outcomes with it, and nothing places the passes away from instants.

A process's objects live long: table items, modules, clients. So here the survivors of each full pass
are frozen (`gc.freeze`): later passes leave them out, and each pass goes over what came since the
one before, a few seconds' worth of objects rather than the whole table. moto's process freezes what
it restores from the data directory the same way (durable.py).

What this gives up: a frozen object that later becomes garbage inside a reference cycle is not
reclaimed. Items replaced or deleted in moto are freed by their reference counts, as nearly
everything is; what a cycle keeps is what was in flight at a pass (a request's exception, say), a
bounded amount each time.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

OLDEST = 2


def _after_pass(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == OLDEST:
        gc.freeze()


def freeze_after_full_passes() -> None:
    """From now on, each full pass of this process's collector freezes what survived it."""
    if _after_pass not in gc.callbacks:
        gc.callbacks.append(_after_pass)


def stop_freezing() -> None:
    """Full passes go over every object again (what is frozen stays frozen)."""
    if _after_pass in gc.callbacks:
        gc.callbacks.remove(_after_pass)


# The API's pause of the collector while it answers (punctual.platform.collector.paused), for a process
# that answers requests side by side on threads. Under requests that overlap without a gap, the young
# objects are still collected this often: what a request builds holds few cycles, but a process that
# never collected would keep every one of them.
LONGEST_PAUSE_SECONDS = 5.0

_lock = threading.Lock()
_inside = 0  # requests in a `paused_across_threads` block
_was_on = False  # whether the collector was on when the first of them came in
_since = 0.0  # when it was last turned off, or collected while off


@contextmanager
def paused_across_threads() -> Iterator[None]:
    """The collector off for the block, and on again (if it was on) once no request is in one.
    Counted across threads: each thread noting whether it was on would let one that looked while
    another had it off turn it off for good."""
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
