"""The cyclic garbage collector, paused while a request builds what it parses."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, then on again (if it was on).

    A request body of 3 MiB may parse into millions of small lists and objects, which the request
    then checks and copies: each allocation counts towards a collection, which walks the young
    objects, all of them still alive, and now and then every tracked object. That took nine tenths
    of the time to parse and check such a body. What a request builds holds no cycle to reclaim; the
    collector runs as usual once it is on again. (Another thread that turns it on meanwhile costs
    only time.)"""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
