"""Make moto's DynamoDB writes and its SQS queues atomic, as DynamoDB's and SQS's are.

DynamoDB evaluates a condition and applies the write as one step. moto checks and writes without a
lock, so two threads (the local stack's pollers, or a batch's records) can both pass the same
condition; and its request handlers read and copy the table's live items around their calls to the
backend, so a write to an item that another request is reading or copying makes that request fail.
Punctual relies on conditional writes for at-least-once without duplicate runs, so the local stack
and the tests serialise moto's requests. Never used on AWS.

moto's SQS queues are no safer: a delete rebuilds the queue's message list and puts the copy back,
so a message sent between the two is gone (an execution left QUEUED with no message for it, under a
burst's sends and deletes at once), and two receives at once can hand out the same message. Its
queue operations are serialised too (`make_queues_atomic`), a long poll giving the lock up while it
waits.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

# Taken by each write to a table; durable.py takes it too, to take back writes the disk refused.
WRITE_LOCK = threading.RLock()
_PATCHED = False
_QUEUE_LOCK = threading.RLock()
_QUEUES_PATCHED = False


def make_writes_atomic() -> None:
    global _PATCHED
    if _PATCHED:
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    # Reads too: an UpdateItem that creates its item puts the bare key in the table first and sets the
    # attributes after, so a Query or Scan between the two would read an item with nothing but its key.
    for name in (
        "put_item",
        "update_item",
        "delete_item",
        "transact_write_items",
        "get_item",
        "query",
        "scan",
    ):
        _lock_method(DynamoDBBackend, name)
    # And each request whole, from its handler's first look at the table to its answer written (the
    # lock is re-entrant). The handler works on the table's live items outside the backend's methods:
    # an UpdateItem deep-copies the item it is about to update (for ALL_OLD and UPDATED_*), a PutItem
    # reads the one it replaces, and a GetItem, Query or Scan answers with the items' own attribute
    # dicts, written out as JSON after the handler returns. A write to the same item meanwhile (another
    # thread's, under the lock) changes that dict as it is walked: the walk raises RuntimeError, and an
    # UpdateItem that raised there was never applied (two notifications' deliveries recorded on one
    # execution at once lost one record). A BatchGetItem reads its keys one get_item at a time, and a
    # thread that gave the lock up between keys queued for it again behind every writer (under a
    # burst's writes a batch of a hundred took seconds); a BatchWriteItem's writes are one unit for the
    # journal (durable.py): on disk together or taken back together.
    _lock_method(DynamoHandler, "call_action")
    _PATCHED = True


def _lock_method(owner: type, name: str, lock: Any = WRITE_LOCK) -> None:
    original = getattr(owner, name)

    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    setattr(owner, name, functools.wraps(original)(locked))


def make_queues_atomic() -> None:
    global _QUEUES_PATCHED
    if _QUEUES_PATCHED:
        return
    from moto.sqs.models import Queue, SQSBackend

    for name in (
        "send_message",
        "send_message_batch",
        "receive_message",
        "delete_message",
        "delete_message_batch",
        "change_message_visibility",
        "change_message_visibility_batch",
        "purge_queue",
        "get_queue_attributes",
    ):
        _lock_method(SQSBackend, name, _QUEUE_LOCK)
    wait = Queue.wait_for_messages

    def wait_unlocked(self: Any, timeout: int) -> None:
        # Called only inside a receive, which holds the lock once: the sends it waits for need it.
        _QUEUE_LOCK.release()
        try:
            wait(self, timeout)
        finally:
            _QUEUE_LOCK.acquire()

    Queue.wait_for_messages = functools.wraps(wait)(wait_unlocked)  # type: ignore[method-assign]
    _QUEUES_PATCHED = True
