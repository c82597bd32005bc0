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
