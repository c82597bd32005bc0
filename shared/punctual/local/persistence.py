"""Keeping the local stack's data across restarts: moto holds everything in memory.

The table's items are written to `<data dir>/table.json` (DynamoDB JSON, written to a temporary file
and renamed, so a crash leaves the previous snapshot whole) whenever they changed, checked every few
seconds, and once more at shutdown. On start they are written back into the fresh table.

SQS messages are not saved. They need not be: the local stack stores every execution as QUEUED before
its message is sent (`Settings.record_queued`), so every message names an execution stored as QUEUED,
RETRYING or RUNNING, so `recover` sends each unfinished execution's
message again (the worker's conditional transitions make a duplicate harmless), and due markers come
back with the table for the scanner.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from punctual.models import ExecutionStatus
from punctual.observability import logger
from punctual.queue import WorkItem, WorkQueue, delay_seconds
from punctual.timefmt import parse_rfc3339, to_epoch_ms, to_rfc3339

SNAPSHOT_NAME = "table.json"
LOCK_NAME = "lock"
FORMAT = "punctual-local-table"
VERSION = 1
# Item layout read here (defined in store.py): executions are the items whose sort key starts with
# EXEC#, with their status, job_id, id, scheduled_at and, while RUNNING, lease_until (epoch ms).
# The pause between autosaves is at least this many times the last save's duration.
SAVE_PAUSE_FACTOR = 20
# An autosave reads the table in pages this small and pauses after each for this many times the
# page's duration: moto answers the handlers' requests between pages (one long scan held moto's
# interpreter for seconds, and the executions waiting on moto then were seconds late).
AUTOSAVE_PAGE_ITEMS = 200
AUTOSAVE_PAGE_PAUSE_FACTOR = 2
_EXECUTION_SK_PREFIX = "EXEC#"
_UNFINISHED = frozenset(
    {ExecutionStatus.QUEUED.value, ExecutionStatus.RETRYING.value, ExecutionStatus.RUNNING.value}
)
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


class DataDirError(Exception):
    """The data directory cannot be used (locked by another stack, or its snapshot is unreadable)."""


class DataDirLock:
    """One stack per data directory: two would overwrite each other's snapshots."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self._file = open(self._path, "a+")  # noqa: SIM115 - held open for the stack's lifetime
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, as before
            return
        try:
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


@dataclass
class Restored:
    items: int = 0
    saved_at: datetime | None = None


class TableSnapshots:
    def __init__(self, data_dir: Path, dynamodb_client: Any, table_name: str) -> None:
        self.path = data_dir / SNAPSHOT_NAME
        self._client = dynamodb_client
        self._table_name = table_name
        self._dirty = threading.Event()
        self._save_lock = threading.Lock()
        for operation in _WRITES:
            dynamodb_client.meta.events.register(f"after-call.dynamodb.{operation}", self._after_write)

    def watch(self, client: Any) -> None:
        """Also count writes made through another client (the store's) as changes to save."""
        for operation in _WRITES:
            client.meta.events.register(f"after-call.dynamodb.{operation}", self._after_write)

    def _after_write(self, http_response: Any = None, **_: Any) -> None:
        if http_response is None or getattr(http_response, "status_code", 500) < 300:
            self._dirty.set()

    # ---------------------------------------------------------------- restore
    def restore(self) -> Restored:
        """Write the saved items into the (empty) table; the executions among them are returned too."""
        if not self.path.exists():
            return Restored()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} v{VERSION} file")
            items: list[dict[str, Any]] = list(data["items"])
            saved_at = parse_rfc3339(data["saved_at"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataDirError(
                f"cannot read {self.path}: {exc}. Move it away (or start with --reset) to start empty."
            ) from exc
        for item in items:
            _expire_lease(item, saved_at)
        self._batch_put(items)
        self._dirty.clear()
        return Restored(items=len(items), saved_at=saved_at)

    def _batch_put(self, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 25):
            pending: dict[str, Any] = {
                self._table_name: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            }
            for attempt in range(10):
                pending = self._client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(0.05 * (attempt + 1))
            else:
                raise DataDirError("the restore could not write all items")

    # ------------------------------------------------------------------ save
    def save_if_changed(self, *, paced: bool = False) -> bool:
        if not self._dirty.is_set():
            return False
        self._dirty.clear()
        try:
            self.save(paced=paced)
        except Exception:
            self._dirty.set()  # try again next time
            raise
        return True

    def save(self, *, paced: bool = False) -> int:
        """Write the table's items to the snapshot; paced, a page at a time with pauses between."""
        with self._save_lock:
            saved_at = datetime.now(UTC)
            items = list(self.scan(paced=paced))
            payload = {
                "format": FORMAT,
                "version": VERSION,
                "table": self._table_name,
                "saved_at": to_rfc3339(saved_at),
                "items": items,
            }
            temporary = self.path.with_name(self.path.name + ".tmp")
            with open(temporary, "w", encoding="utf-8") as out:
                json.dump(payload, out, separators=(",", ":"))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
            return len(items)

    def scan(self, *, paced: bool = False) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": self._table_name, "ConsistentRead": True}
        if paced:
            kwargs["Limit"] = AUTOSAVE_PAGE_ITEMS
        while True:
            started = time.monotonic()
            page = self._client.scan(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            if paced:
                time.sleep(AUTOSAVE_PAGE_PAUSE_FACTOR * (time.monotonic() - started))

    def autosave(self, stop: threading.Event, every_seconds: float) -> None:
        """Run until stop is set: save whenever something was written since the last save.

        A save scans the whole table through moto, which grows with it: the pause between saves is
        at least SAVE_PAUSE_FACTOR times the last save's duration, so saving never takes more than a
        small share of moto's core (bench/precision.py measured 40 % at a fixed 2 s), and the save
        itself is paced (AUTOSAVE_PAGE_ITEMS).
        """
        pause = every_seconds
        while not stop.wait(pause):
            started = time.monotonic()
            try:
                saved = self.save_if_changed(paced=True)
            except Exception as exc:
                logger.warning("could not save the data; will retry", extra={"error": str(exc)})
                saved = False
            took = time.monotonic() - started
            if saved:
                logger.debug("data saved", extra={"seconds": round(took, 2), "path": str(self.path)})
            # A paced save's pauses left moto free: the pause counts only its pages.
            pause = max(every_seconds, SAVE_PAUSE_FACTOR * took / (1 + AUTOSAVE_PAGE_PAUSE_FACTOR))

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def unfinished_executions(items: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> list[WorkItem]:
    """The executions (in DynamoDB JSON items) that were queued, waiting to retry or running."""
    found = []
    for item in items:
        if not _text(item, "sk").startswith(_EXECUTION_SK_PREFIX):
            continue
        if _text(item, "status") not in _UNFINISHED:
            continue
        found.append(
            WorkItem(_text(item, "job_id"), _text(item, "id"), parse_rfc3339(_text(item, "scheduled_at")))
        )
    return found


def recover(snapshots: TableSnapshots, queue: WorkQueue, now: datetime) -> int:
    """Send the message of every unfinished execution again; returns how many."""
    work = unfinished_executions(snapshots.scan())
    unsent = queue.send([(item, delay_seconds(item.scheduled_at, now)) for item in work])
    if unsent:
        logger.warning("could not re-queue some executions", extra={"count": len(unsent)})
    return len(work) - len(unsent)


def _expire_lease(item: dict[str, Any], stopped_at: datetime) -> None:
    """A RUNNING execution's worker stopped with the stack: its lease ends then, so it runs again."""
    if _text(item, "status") == ExecutionStatus.RUNNING.value and "lease_until" in item:
        item["lease_until"] = {"N": str(to_epoch_ms(stopped_at))}


def _text(item: dict[str, Any], name: str) -> str:
    value = item.get(name) or {}
    return str(value.get("S", "")) if isinstance(value, dict) else ""
