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

    for name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item"):
        original = getattr(DynamoDBBackend, name)

        def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with _LOCK:
                return _original(self, *args, **kwargs)

        setattr(DynamoDBBackend, name, functools.wraps(original)(locked))
    _PATCHED = True
