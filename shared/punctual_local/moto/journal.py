"""The journal: every write to moto's tables appended to a segment file, and fsync'd in groups.

Group commit: writers append records to a buffer and wait; one thread writes whatever has gathered,
fsyncs it and wakes them. While one fsync runs the next batch gathers, so a batch is as long as one
fsync (about a millisecond here) whatever the load.

A crash can leave the last batch half written (data_files.py says how a reader stops there). Nothing
after it was acknowledged: an answer waits for its batch's fsync, and a batch is written only after
the one before it was fsync'd.

A write the disk refuses (full, failing) loses its batch and every record appended after it: the
journal calls `on_failure` with the last sequence on disk, so that its owner takes those writes back,
and only then tells their waiters. Appends are refused meanwhile. `recover()`, tried by each later
write, cuts the segment back to its last fsync'd record and reopens it: bytes of the lost batch that
did reach the file are gone before anything is written after them, so a replay never finds a write
that was answered as failed. Once the disk takes writes again, so does the journal.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from punctual_local.moto.data_files import (
    JOURNAL_FORMAT,
    VERSION,
    StoreError,
    describe,
    frame,
    fsync_directory,
    record,
    segment_path,
)


class StorageFailed(Exception):
    """A write could not be made durable: it was lost, or the journal refuses writes until it recovers."""


# The error code the local stack answers such a write with (moto's tables and the work queue alike),
# its message saying why.
STORAGE_FAILED = "PunctualStorageFailed"


@dataclass
class JournalStats:
    records: int = 0
    bytes: int = 0
    batches: int = 0
    fsync_seconds: float = 0.0
    largest_batch: int = 0


@dataclass
class _Batch:
    data: list[bytes] = field(default_factory=list)
    last_sequence: int = 0


class Journal:
    """The open journal segment and its group-commit writer thread."""

    def __init__(
        self,
        directory: Path,
        number: int,
        *,
        opener: Callable[[Path, str], IO[bytes]] | None = None,
        after_batch: Callable[[Journal], None] | None = None,
        on_failure: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = directory
        self.number = number
        self.stats = JournalStats()
        self.failure: str | None = None
        # The last failure, until a batch reaches the disk: recover() may reopen a segment on a disk
        # that still refuses, and only a write tells.
        self._unconfirmed: str | None = None
        self._opener = opener or (lambda path, mode: open(path, mode))  # noqa: SIM115
        self._after_batch = after_batch
        self._on_failure = on_failure
        # One lock, two conditions, so that an append wakes only the writer thread and a batch on disk
        # wakes its waiters once: waking every waiting writer on each append costs, per append, as
        # many wake-ups as writers wait, and a burst keeps many waiting.
        lock = threading.Lock()
        self._changed = threading.Condition(lock)  # pending records, closing: for the writer thread
        self._written = threading.Condition(lock)  # durable, lost: for waiters
        self._pending = _Batch()
        self._sequence = 0
        self._durable = 0
        # (first, last, why) of each run of sequences a failure lost, oldest first; runs lost one after
        # the other, as a full disk refuses write after write, are kept as one.
        self._lost: list[tuple[int, int, str]] = []
        self._taken_back = True  # the writes of the last failure were taken back: recover() may reopen
        self._told_failed = False  # said so on stderr, once for a failure however many retries it takes
        self._closing = False
        self.segment_bytes = 0
        self._file = self._open(number)
        self._thread = threading.Thread(target=self._run, name="journal", daemon=True)
        self._thread.start()

    @property
    def durable(self) -> int:
        """The last sequence on disk (every one before it is on disk or was lost)."""
        return self._durable

    @property
    def sequence(self) -> int:
        """The last sequence appended."""
        return self._sequence

    def _open(self, number: int) -> IO[bytes]:
        path = segment_path(self.directory, number)
        out = self._opener(path, "xb")
        try:
            fields = {"format": JOURNAL_FORMAT, "version": VERSION, "segment": number}
            header = frame(json.dumps(fields, separators=(",", ":")).encode())
            out.write(header)
            out.flush()
            os.fsync(out.fileno())
            fsync_directory(self.directory)
        except BaseException:
            # A segment cut inside its header holds nothing; removed, so that the next try can create it.
            with contextlib.suppress(OSError, ValueError):
                out.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._header_bytes = len(header)
        return out

    def append(self, key: bytes, item: bytes) -> int:
        """Queue one record; returns its sequence number, for wait(). Callers keep their own order."""
        return self.append_all([(key, item)])[1]

    def append_all(self, records: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        """Queue records that reach the disk together or not at all (they go in the same batch);
        returns the first and last sequence numbers, for wait()."""
        data = [record(key, item) for key, item in records]
        with self._changed:
            if self.failure is not None:
                raise StorageFailed(self.failure)
            if self._closing:
                raise StorageFailed("the local stack is stopping")
            first = self._sequence + 1
            self._sequence += len(data)
            self._pending.data.extend(data)
            self._pending.last_sequence = self._sequence
            self._changed.notify()
            return first, self._sequence

    def wait(self, sequence: int, timeout: float = 30.0, *, first: int | None = None) -> None:
        """Return once the records `first` to `sequence` (and every one before them) are on disk;
        raises StorageFailed if one of them was lost."""
        first = sequence if first is None else first
        deadline = time.monotonic() + timeout
        with self._written:
            while True:
                lost = self._lost_among(first, sequence)
                if lost is not None:
                    raise StorageFailed(lost)
                if self._durable >= sequence:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StorageFailed(f"the journal did not reach the disk within {timeout:.0f} s")
                self._written.wait(remaining)

    def _lost_among(self, first: int, last: int) -> str | None:
        for lost_first, lost_last, why in reversed(self._lost):
            if lost_last < first:
                return None
            if lost_first <= last:
                return why
        return None

    @property
    def refusing(self) -> str | None:
        """Why writes fail: the failure, or after a recovery the last one until a batch reaches the
        disk (a recovery on a disk that is still full succeeds, and the next write fails again)."""
        return self.failure or self._unconfirmed

    def recover(self) -> None:
        """After a failure: cut the segment back to its last record on disk and reopen it for the
        writes to come. Raises StorageFailed while that cannot be done (the disk still refuses, or the
        failed writes are still being taken back)."""
        with self._changed:
            if self.failure is None:
                return
            if not self._taken_back or self._closing:
                raise StorageFailed(self.failure)
            try:
                self._reopen()
            except (OSError, ValueError) as exc:
                self.failure = f"cannot write the journal in {self.directory}: {describe(exc)}"
                raise StorageFailed(self.failure) from exc
            self.failure = None

    def _reopen(self) -> None:
        # Closed first: a buffered file may write what it still holds of the lost batch as it closes,
        # and that goes with the rest below.
        with contextlib.suppress(OSError, ValueError):
            self._file.close()
        out = self._opener(segment_path(self.directory, self.number), "r+b")
        try:
            good = self._header_bytes + self.segment_bytes
            out.truncate(good)
            out.seek(good)
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            with contextlib.suppress(OSError, ValueError):
                out.close()
            raise
        self._file = out

    def rotate(self) -> int:
        """Start the next segment (on the writer thread, between batches); returns the closed one."""
        closed = self.number
        old = self._file
        self._file = self._open(closed + 1)
        self.number = closed + 1
        self.segment_bytes = 0
        old.close()
        return closed

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._pending.data and not self._closing:
                    self._changed.wait(1.0)
                batch, self._pending = self._pending, _Batch()
                # Appends are refused once closing is set: this batch is then the last one.
                closing = self._closing
                failed = self.failure is not None
            if batch.data:
                self._write(batch)
            if closing:
                return
            if failed or self.failure is not None or self._after_batch is None:
                continue
            try:
                self._after_batch(self)
            except (OSError, StoreError) as exc:
                self._fail(f"cannot start a new journal segment in {self.directory}: {describe(exc)}")

    def _write(self, batch: _Batch) -> None:
        try:
            started = time.monotonic()
            data = b"".join(batch.data)
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except (OSError, ValueError) as exc:
            self._fail(f"cannot write the journal in {self.directory}: {describe(exc)}")
            return
        stats = self.stats
        stats.records += len(batch.data)
        stats.bytes += len(data)
        stats.batches += 1
        stats.fsync_seconds += time.monotonic() - started
        stats.largest_batch = max(stats.largest_batch, len(batch.data))
        self.segment_bytes += len(data)
        self._unconfirmed = None
        if self._told_failed:
            self._told_failed = False
            print("punctual local: the journal takes writes again", file=sys.stderr, flush=True)
        with self._written:
            self._durable = batch.last_sequence
            self._written.notify_all()

    def _fail(self, why: str) -> None:
        """Everything after the last record on disk is lost: refuse appends, let the owner take those
        writes back, and only then tell their waiters (their answers must not go out while the writes
        can still be read)."""
        if not self._told_failed:
            self._told_failed = True
            print(
                f"punctual local: {why}; writes are refused until the disk takes them again", file=sys.stderr
            )
        with self._changed:
            self.failure = why
            self._unconfirmed = why
            self._taken_back = False
            self._pending = _Batch()  # appended after the batch that failed: lost with it
            durable, last = self._durable, self._sequence
        taken_back = True
        if self._on_failure is not None:
            try:
                self._on_failure(durable)
            except Exception as exc:  # reported below; the journal then stays refused
                taken_back = False
                why = (
                    f"{why}; the writes it lost could not be taken back ({describe(exc)}): restart the stack"
                )
                print(f"punctual local: {why}", file=sys.stderr, flush=True)
        with self._written:
            if not taken_back:
                self.failure = why
            if last > durable:
                first = durable + 1
                if self._lost and self._lost[-1][1] >= durable:  # nothing reached the disk since
                    first = self._lost.pop()[0]
                self._lost.append((first, last, why))
            self._taken_back = taken_back
            self._written.notify_all()

    def close(self, timeout: float = 5.0) -> None:
        """Write and fsync what was queued, then stop; later appends are refused."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(timeout)
        with contextlib.suppress(OSError, ValueError):
            self._file.close()
