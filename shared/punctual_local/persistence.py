"""Keeping the local stack's data across restarts and crashes.

moto holds everything in memory, in its own process; that process journals every write to the table
and answers it only once it is on disk (durable.py, journal.py), and reads the data back when the
stack starts. The work queue's messages are journaled by the stack's SQS client
(queue_journal.JournaledSqs). This side keeps one stack per data directory, holds the messages not
deleted again (`replay`), and gives back what the stopped stack's workers held: claims made ahead of
an instant (`release_claims`), hand-off claims (`withdraw_claims`); their leases end in moto's
process (moto/unfinished.py).

A data directory from before the queue's journal has none: its stack stored every execution as
QUEUED before sending its message, and `recover` sends each unfinished execution's message again
(the worker's conditional transitions make a duplicate harmless), once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from punctual.domain.errors import LostRace, RetryableStoreError, UnreadableItem
from punctual.domain.executions import ExecutionStatus
from punctual.domain.work import WorkItem, delay_seconds
from punctual.platform.observability import logger
from punctual.platform.timefmt import parse_rfc3339
from punctual.store import Store
from punctual.store.queue import WorkQueue
from punctual_local.holding import HoldingSqs
from punctual_local.queue_journal import Sent, queue_name

LOCK_NAME = "lock"


class DataDirError(Exception):
    """The data directory cannot be used (locked by another stack, unreadable, unwritable, newer)."""


class DataDirLock:
    """One stack per data directory: two would both write to its journal."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        try:
            self._file = open(self._path, "a+")  # noqa: SIM115 - held open for the stack's lifetime
        except OSError as exc:
            raise DataDirError(f"cannot use the data directory {self._path.parent}: {exc.strerror}") from exc
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock (a second stack on the directory is not refused)
            return
        try:
            # The lock goes with the process: a stack that was killed leaves the file, not the lock.
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._file.close()
            self._file = None
            raise DataDirError(
                f"{self._path.parent} is in use by another `punctual local`; stop it or pick --data-dir"
            ) from None

    def release(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def work_items(unfinished: Iterable[list[str]]) -> list[WorkItem]:
    """The [job_id, id, scheduled_at] triples moto's process reports as WorkItems."""
    return [WorkItem(job_id, execution_id, parse_rfc3339(at)) for job_id, execution_id, at in unfinished]


def replay(pending: Iterable[Sent], holding: HoldingSqs, queue_urls: Iterable[str]) -> int:
    """Hold every message the journal has as sent and not deleted until its delay ends (those past
    it: at once), on its queue as named now (moto's port changes at each start); returns how many."""
    urls = {queue_name(url): url for url in queue_urls}
    by_queue: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for message in pending:
        url = urls.get(message.queue)
        if url is None:
            logger.warning("journaled message for an unknown queue dropped", extra={"queue": message.queue})
            continue
        by_queue.setdefault(url, []).append((message.entry, message.release_ms / 1000))
    for url, entries in by_queue.items():
        holding.hold(url, entries)
    return sum(len(entries) for entries in by_queue.values())


def release_claims(work: Iterable[WorkItem], store: Store) -> None:
    """Give back each execution claimed ahead of its instant by the stack that stopped: its worker is
    gone (the data directory's lock says no other stack runs), and its lease would otherwise hold the
    run back until it ran out, a timeout and more after its instant."""
    for item in work:
        _release_unstarted_claim(item, store)


def recover(work: list[WorkItem], queue: WorkQueue, now: datetime, store: Store) -> int:
    """A data directory from before the queue's journal: send the message of every unfinished
    execution again (its claim given back first); returns how many."""
    release_claims(work, store)
    unsent = queue.send([(item, delay_seconds(item.scheduled_at, now)) for item in work])
    if unsent:
        logger.warning("could not re-queue some executions", extra={"count": len(unsent)})
    return len(work) - len(unsent)


def _release_unstarted_claim(item: WorkItem, store: Store) -> None:
    try:
        execution = store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
        if (
            execution is not None
            and execution.status is ExecutionStatus.RUNNING
            and execution.started_at is None
        ):
            store.executions.release_claim(execution)
    except (LostRace, RetryableStoreError, UnreadableItem):
        # Its lease runs out instead: the message waits for it.
        logger.warning("claim not given back", extra={"execution_id": item.execution_id})


def withdraw_claims(store: Store, shards: Iterable[int], before: datetime) -> int:
    """Withdraw the claims on the markers of these shards' soon partitions due before `before`, when
    the requests that made them are known to be gone, so that the next tick sends those markers rather
    than wait for the claims to run out. Returns how many were withdrawn."""
    claimed = [
        m for shard in shards for m in store.markers.soon(shard, before) if m.handoff_until is not None
    ]
    if claimed:
        store.markers.put_many([replace(m, handoff_until=None) for m in claimed])
    return len(claimed)
