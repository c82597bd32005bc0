"""The local work queue kept across restarts: each message sent to it is journaled before the send
returns, and each one deleted is marked done.

On AWS, SQS keeps a message it acknowledged. Locally neither keeper is saved: moto's queues live in
its memory, and HoldingSqs holds delayed messages in the sender's. `JournaledSqs` stands in for the
SQS client in front of HoldingSqs:
- a message sent to a journaled queue is appended to `queue.journal` in the data directory before
  the send is made, with the instant its delay ends; its journal id rides along as a message
  attribute (`ATTRIBUTE`);
- a receive notes each message's receipt handle against its journal id, and a delete through the
  wrapper appends a done record for it;
- when the stack starts, `pending` is every message sent and not deleted, and the stack sends each
  again, held for what is left of its delay.
A message sent again after it was taken is a duplicate, which the worker tells apart as it does on
AWS: an unguarded pack by its lease (a pack taken before reads which members ended), an execution
by its conditional transitions.

Both the stack's process and the API's append to the one file, each write under an exclusive flock;
a record starts and ends a line, so a write torn by a crash spoils no record but its own. Once the
file has grown to a few times what is pending, whichever process appends next rewrites it with only
the pending messages and renames it over; a writer that finds its file renamed away opens the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual_local.moto.journal import STORAGE_FAILED

JOURNAL_NAME = "queue.journal"
ATTRIBUTE = "PunctualJournalId"
# Compacted once it is this large and at least COMPACT_RATIO times what it was after the last rewrite:
# the work of a rewrite stays proportional to the appends since the last one.
MIN_COMPACT_BYTES = 1024 * 1024
COMPACT_RATIO = 4


class JournalFailed(Exception):
    """A record could not be appended (a full or failing disk)."""


@dataclass(frozen=True)
class Sent:
    """A message sent and not deleted: its queue's name, when its delay ends (epoch ms) and its
    SendMessageBatch entry (without Id and DelaySeconds; its attributes carry the journal id)."""

    id: str
    queue: str
    release_ms: int
    entry: dict[str, Any]


class QueueJournal:
    """The file, shared by the processes of one stack (its data directory's lock keeps out others)."""

    def __init__(
        self,
        directory: Path,
        *,
        sync: bool = True,
        opener: Callable[[Path], int] | None = None,
    ) -> None:
        """`sync`: a send's record is on disk before the send is made (see `sent`); `opener`: how the
        file is opened (a disk that fails on demand, in tests)."""
        self.path = directory / JOURNAL_NAME
        self._sync = sync
        self._opener = opener or _open_append
        self._prefix = secrets.token_hex(4)  # ids unique across processes and restarts
        self._numbers = 0
        self._lock = threading.Lock()  # this process's threads; the flock orders the processes
        self._fd: int | None = None
        self._compacted_size = 0

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def new_ids(self, count: int) -> list[str]:
        with self._lock:
            first = self._numbers
            self._numbers += count
        return [f"{self._prefix}.{n}" for n in range(first, first + count)]

    def sent(self, messages: list[Sent]) -> None:
        """Append these messages, before they are sent. Raises JournalFailed.

        Synced (fdatasync) before it returns: the sender goes on to writes that moto's journal makes
        durable (a soon marker deleted, a scanner's position saved), and a send that a power loss took
        back while those stayed would lose its executions. A process killed outright loses nothing
        either way: what it wrote is in the page cache. Done records are not synced: one lost only
        sends a message again, which the worker runs no more than once."""
        if messages:
            self._append([_record(m) for m in messages], sync=self._sync)

    def done(self, ids: list[str]) -> None:
        """Mark these messages deleted. Raises JournalFailed."""
        if ids:
            self._append([{"done": ids}], sync=False)

    def pending(self) -> list[Sent]:
        """Every message sent and not deleted, in the order sent, after rewriting the file with just
        them (when no other process appends: at the stack's start)."""
        with self._lock, self._locked():
            found = _pending(_read(self.path))
            self._rewrite(found)
        return found

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # ------------------------------------------------------------------ files
    def _append(self, records: list[dict[str, Any]], *, sync: bool) -> None:
        data = b"".join(_line(r) for r in records)
        try:
            with self._lock, self._locked() as fd:
                _write_all(fd, data)
                size = os.fstat(fd).st_size
                if size >= max(MIN_COMPACT_BYTES, COMPACT_RATIO * self._compacted_size):
                    self._compact(size)
                synced = os.dup(self._fd) if sync and self._fd is not None else None
            if synced is not None:
                # Outside the locks, so that other senders append meanwhile (and share the disk's
                # flush). A compaction since then put these records, synced, in the file renamed over.
                try:
                    os.fdatasync(synced)
                finally:
                    os.close(synced)
        except OSError as exc:
            raise JournalFailed(
                f"cannot write the queue's journal {self.path}: {exc.strerror or exc}"
            ) from exc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The current file, open and flocked (this process's lock held)."""
        while True:
            if self._fd is None:
                self._fd = self._opener(self.path)
                self._compacted_size = os.fstat(self._fd).st_size
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = -1
            if current == os.fstat(self._fd).st_ino:
                break
            # Renamed away by a compaction in the other process: the new file has what it kept.
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        try:
            yield self._fd
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _compact(self, size: int) -> None:
        """Rewrite the file with what is pending (the flock held). One that fails leaves the file as
        it was, to be tried again once it has grown as much again: the record just appended stands."""
        found = _pending(_read(self.path))
        try:
            self._rewrite(found)
        except OSError as exc:
            self._compacted_size = size
            logger.warning("could not compact the queue's journal", extra={"error": str(exc)})
            return
        logger.debug("compacted the queue's journal", extra={"pending": len(found)})

    def _rewrite(self, found: list[Sent]) -> None:
        """Replace the file with these messages' records: written and synced beside it, renamed over
        it, the directory synced (the flock held). The old file's flock goes with its descriptor."""
        temporary = self.path.with_name(self.path.name + ".tmp")
        data = b"".join(_line(_record(m)) for m in found)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        _sync_directory(self.path.parent)
        old = self._fd
        self._fd = self._opener(self.path)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._compacted_size = len(data)
        if old is not None:
            os.close(old)


def _record(message: Sent) -> dict[str, Any]:
    return {"id": message.id, "q": message.queue, "at": message.release_ms, "e": message.entry}


def _line(record: dict[str, Any]) -> bytes:
    """A record on a line of its own, whatever a torn write before it left."""
    return b"\n" + json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> Iterator[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # torn by a crash mid-write: never acknowledged
        if isinstance(record, dict):
            yield record


def _pending(records: Iterable[dict[str, Any]]) -> list[Sent]:
    found: dict[str, Sent] = {}
    for record in records:
        if "done" in record:
            for done in record["done"]:
                found.pop(done, None)
        elif "id" in record:
            found[record["id"]] = Sent(record["id"], record["q"], int(record["at"]), record["e"])
    return list(found.values())


class JournaledSqs:
    """An SQS client whose sends to `journaled` queues are journaled first and whose deletes are
    marked done; every other call goes to the wrapped client (HoldingSqs)."""

    def __init__(self, sqs: Any, journal: QueueJournal, clock: Clock, journaled: Iterable[str]) -> None:
        self._sqs = sqs
        self.journal = journal
        self._clock = clock
        self._journaled = frozenset(journaled)
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}  # receipt handle -> journal id, of messages received
        self._receipts: dict[str, str] = {}  # journal id -> its latest receipt handle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if QueueUrl not in self._journaled:
            return dict(self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries))
        now_ms = int(self._clock.now().timestamp() * 1000)
        ids = self.journal.new_ids(len(Entries))
        entries = [_with_id(entry, journal_id) for entry, journal_id in zip(Entries, ids, strict=True)]
        try:
            self.journal.sent(
                [
                    Sent(
                        journal_id,
                        queue_name(QueueUrl),
                        now_ms + 1000 * int(entry.get("DelaySeconds") or 0),
                        {k: v for k, v in entry.items() if k not in ("Id", "DelaySeconds")},
                    )
                    for entry, journal_id in zip(entries, ids, strict=True)
                ]
            )
        except JournalFailed as exc:
            # As moto answers a table write its journal lost: the sender keeps what it would have sent.
            raise ClientError(
                {"Error": {"Code": STORAGE_FAILED, "Message": str(exc)}}, "SendMessageBatch"
            ) from exc
        response = dict(self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=entries))
        by_entry = {entry["Id"]: journal_id for entry, journal_id in zip(entries, ids, strict=True)}
        unsent = [by_entry[f["Id"]] for f in response.get("Failed", []) if f.get("Id") in by_entry]
        self._done(unsent)  # (the sender sends those again, under new ids)
        return response

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        names = list(kwargs.get("MessageAttributeNames") or [])
        if "All" not in names and ATTRIBUTE not in names:
            kwargs["MessageAttributeNames"] = [*names, ATTRIBUTE]
        response = dict(self._sqs.receive_message(**kwargs))
        with self._lock:
            for message in response.get("Messages", []):
                journal_id = message.get("MessageAttributes", {}).get(ATTRIBUTE, {}).get("StringValue")
                if journal_id is None:
                    continue
                # A message received again (back after its visibility) has a new handle: the old goes.
                self._ids.pop(self._receipts.get(journal_id, ""), None)
                self._receipts[journal_id] = message["ReceiptHandle"]
                self._ids[message["ReceiptHandle"]] = journal_id
        return response

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        response = dict(self._sqs.delete_message(QueueUrl=QueueUrl, ReceiptHandle=ReceiptHandle))
        self._deleted([ReceiptHandle])
        return response

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        response = dict(self._sqs.delete_message_batch(QueueUrl=QueueUrl, Entries=Entries))
        handles = {entry["Id"]: entry["ReceiptHandle"] for entry in Entries}
        self._deleted([handles[s["Id"]] for s in response.get("Successful", []) if s["Id"] in handles])
        return response

    def _deleted(self, handles: list[str]) -> None:
        with self._lock:
            ids = [journal_id for h in handles if (journal_id := self._ids.pop(h, None)) is not None]
            for journal_id in ids:
                self._receipts.pop(journal_id, None)
        self._done(ids)

    def _done(self, ids: list[str]) -> None:
        try:
            self.journal.done(ids)
        except JournalFailed as exc:
            # Its message is sent again at the next start: a duplicate, which runs nothing twice.
            logger.warning("could not mark messages done in the queue's journal", extra={"error": str(exc)})


def _with_id(entry: dict[str, Any], journal_id: str) -> dict[str, Any]:
    attributes = {
        **entry.get("MessageAttributes", {}),
        ATTRIBUTE: {"DataType": "String", "StringValue": journal_id},
    }
    return {**entry, "MessageAttributes": attributes}


def queue_name(queue_url: str) -> str:
    """A queue's name: what stays the same when moto's port changes between starts."""
    return queue_url.rstrip("/").rpartition("/")[2]
