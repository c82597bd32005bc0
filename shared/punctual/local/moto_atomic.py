"""Make moto's DynamoDB writes atomic, as DynamoDB's are.

DynamoDB evaluates a condition and applies the write as one step. moto checks and writes without a
lock, so two threads (the local stack's pollers, or a batch's records) can both pass the same
condition. Punctual relies on conditional writes for at-least-once without duplicate runs, so the
local stack and the tests serialise moto's writes. Never used on AWS.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_LOCK = threading.RLock()
_PATCHED = False


def make_writes_atomic() -> None:
    global _PATCHED
    if _PATCHED:
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    for name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item"):
        _lock_method(DynamoDBBackend, name)
    # A BatchGetItem reads its keys one get_item at a time. Taken once for the whole batch (the lock is
    # re-entrant), rather than once per key: a thread that gives the lock up between keys queues for it
    # again behind every writer, so under a burst's writes a batch of a hundred took seconds.
    _lock_method(DynamoHandler, "batch_get_item")
    _PATCHED = True


def _lock_method(owner: type, name: str) -> None:
    original = getattr(owner, name)

    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return original(self, *args, **kwargs)

    setattr(owner, name, functools.wraps(original)(locked))
