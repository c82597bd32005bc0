"""The local stack's data on disk: a snapshot and a journal of every write made since.

    <data dir>/snapshot.jsonl        the table's items up to journal segment `through`
    <data dir>/journal-00000042.log  the writes since, one record per item written, oldest first

A journal record is the after-image of one item: its key and its whole new value (or nothing, for a
deletion), so replaying a record twice, or over a snapshot that already holds it, changes nothing.
Records are framed as length (4 bytes), CRC32 (4 bytes), payload; the payload is the key's JSON, a tab,
the item's DynamoDB JSON (empty for a deletion). JSON never holds a raw tab, so the compactor can
compare keys as bytes without parsing anything.

Group commit: writers append records to a buffer and wait; one thread writes whatever has gathered,
fsyncs it and wakes them. While one fsync runs the next batch gathers, so a batch is as long as one
fsync (about a millisecond here) whatever the load.

A crash can leave the last batch half written. Each start writes to a new segment, so only the end of
a segment can be torn; reading stops at the first record whose length or checksum is wrong, and every
record before it was whole. Nothing after it was acknowledged either: an answer waits for its batch's
fsync, and a batch is written only after the one before it was fsync'd.

A write the disk refuses (full, failing) loses its batch and every record appended after it: the
journal calls `on_failure` with the last sequence on disk, so that its owner takes those writes back,
and only then tells their waiters. Appends are refused meanwhile. `recover()`, tried by each later
write, cuts the segment back to its last fsync'd record and reopens it: bytes of the lost batch that
did reach the file are gone before anything is written after them, so a replay never finds a write
that was answered as failed. Once the disk takes writes again, so does the journal.

Compaction runs in a process of its own (`python -m punctual_local.moto.journal compact DIR N`) so that it
takes neither moto's interpreter nor its lock: it folds segments up to N into a new snapshot by
streaming the old one, holding in memory only the keys those segments wrote.

Only the standard library here: the compactor starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

SNAPSHOT_NAME = "snapshot.jsonl"
LEGACY_SNAPSHOT_NAME = "table.json"  # format 1: the whole table in one JSON document
SNAPSHOT_FORMAT = "punctual-local-snapshot"
JOURNAL_FORMAT = "punctual-local-journal"
VERSION = 2
_FRAME = struct.Struct(">II")  # payload length, CRC32 of the payload
MAX_RECORD_BYTES = 64 * 1024 * 1024  # far above DynamoDB's 400 KB item; a larger length is a torn one
_SEGMENT = re.compile(r"^journal-(\d{8})\.log$")
_START_EMPTY = "Move the data directory away (or start with --reset) to start empty."
# The compactor checks this often (in lines) whether the process that started it is still there.
_PARENT_CHECK_LINES = 20_000


class StoreError(Exception):
    """The data directory cannot be used as it is; the message says why and what to do."""


class StorageFailed(Exception):
    """A write could not be made durable: it was lost, or the journal refuses writes until it recovers."""


# ---------------------------------------------------------------- records
def frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def record(key: bytes, item: bytes) -> bytes:
    return frame(key + b"\t" + item)


@dataclass
class SegmentRead:
    records: int = 0
    torn_bytes: int = 0  # bytes after the last whole record, ignored


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"journal-{number:08d}.log"


def segments(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for entry in directory.iterdir():
        match = _SEGMENT.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found)


def read_segment(path: Path, read: SegmentRead | None = None) -> Iterator[tuple[bytes, bytes]]:
    """(key, item) of each whole record; item is b"" for a deletion. Stops at a torn record."""
    read = read if read is not None else SegmentRead()
    offset, header = 0, True
    with open(path, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        while True:
            head = source.read(_FRAME.size)
            if len(head) < _FRAME.size:
                break
            length, checksum = _FRAME.unpack(head)
            if length > MAX_RECORD_BYTES:
                break
            payload = source.read(length)
            if len(payload) < length or zlib.crc32(payload) != checksum:
                break
            offset += _FRAME.size + length
            if header:
                header = False
                _check_header(payload, JOURNAL_FORMAT, path)
                continue
            key, tab, item = payload.partition(b"\t")
            if not tab:
                raise StoreError(f"{path}: a record without a key. {_START_EMPTY}")
            read.records += 1
            yield key, item
    read.torn_bytes = size - offset


def _check_header(payload: bytes, expected: str, path: Path) -> dict[str, object]:
    try:
        header = json.loads(payload)
        name, version = header["format"], int(header["version"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path} is not a {expected} file ({exc}). {_START_EMPTY}") from exc
    if name != expected:
        raise StoreError(f"{path} is a {name} file, not a {expected} file. {_START_EMPTY}")
    if version > VERSION:
        raise StoreError(
            f"{path} was written by a newer Punctual (format version {version}; this one reads up to "
            f"{VERSION}). Upgrade, or start with another --data-dir."
        )
    if version < VERSION:
        raise StoreError(f"{path}: format version {version} is not read by this Punctual")
    return dict(header)


# --------------------------------------------------------------- snapshot
@dataclass
class Snapshot:
    through: int = 0  # the last journal segment it includes
    items: int = 0
    bytes: int = 0


def snapshot_header(path: Path) -> Snapshot:
    if not path.exists():
        return Snapshot()
    with open(path, "rb") as source:
        first = source.readline()
    header = _check_header(first, SNAPSHOT_FORMAT, path)
    return Snapshot(
        through=int(header.get("through", 0)),  # type: ignore[call-overload]
        items=int(header.get("items", 0)),  # type: ignore[call-overload]
        bytes=path.stat().st_size,
    )


def read_snapshot(path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(key, item) of each item in the snapshot (written whole, then renamed: no torn lines)."""
    if not path.exists():
        return
    with open(path, "rb") as source:
        _check_header(source.readline(), SNAPSHOT_FORMAT, path)
        for line in source:
            key, _, item = line.rstrip(b"\n").partition(b"\t")
            yield key, item


class SnapshotWriter:
    """Writes a snapshot beside the current one and swaps it in whole (fsync, rename, fsync dir)."""

    def __init__(self, directory: Path, through: int) -> None:
        self.directory = directory
        self.through = through
        self.count = 0
        self._temporary = directory / (SNAPSHOT_NAME + ".tmp")
        self._out: BinaryIO = open(self._temporary, "wb")  # noqa: SIM115 - closed by commit/abort
        # The item count goes in a trailer-free header: it is written last, over a fixed-width field.
        self._out.write(self._header(0))

    def _header(self, count: int) -> bytes:
        header = {"format": SNAPSHOT_FORMAT, "version": VERSION, "through": self.through, "items": count}
        text = json.dumps(header, separators=(",", ":"))
        return (text[:-1] + "," + '"pad":"' + " " * (40 - len(str(count))) + '"}\n').encode()

    def add(self, key: bytes, item: bytes) -> None:
        self._out.write(key + b"\t" + item + b"\n")
        self.count += 1

    def commit(self) -> Snapshot:
        self._out.seek(0)
        self._out.write(self._header(self.count))
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        final = self.directory / SNAPSHOT_NAME
        os.replace(self._temporary, final)
        fsync_directory(self.directory)
        return Snapshot(through=self.through, items=self.count, bytes=final.stat().st_size)

    def abort(self) -> None:
        self._out.close()
        with contextlib.suppress(FileNotFoundError):
            self._temporary.unlink()


def fsync_directory(directory: Path) -> None:
    """Makes a rename or a new file in it durable (POSIX); a no-op where directories cannot be opened."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def compact(directory: Path, through: int, *, parent: int | None = None) -> Snapshot:
    """Fold journal segments up to `through` into a new snapshot, then delete them."""
    current = snapshot_header(directory / SNAPSHOT_NAME)
    changes: dict[bytes, bytes] = {}
    for number, path in segments(directory):
        if current.through < number <= through:
            for key, item in read_segment(path):
                changes[key] = item
    writer = SnapshotWriter(directory, max(through, current.through))
    try:
        for lines, (key, item) in enumerate(read_snapshot(directory / SNAPSHOT_NAME)):
            if parent is not None and lines % _PARENT_CHECK_LINES == 0 and os.getppid() != parent:
                raise StoreError("the stack stopped during compaction")
            changed = changes.pop(key, None)
            if changed is None:
                writer.add(key, item)
            elif changed:
                writer.add(key, changed)
        for key, item in changes.items():
            if item:
                writer.add(key, item)
        snapshot = writer.commit()
    except BaseException:
        writer.abort()
        raise
    remove_segments_through(directory, snapshot.through)
    return snapshot


def remove_segments_through(directory: Path, through: int) -> None:
    for number, path in segments(directory):
        if number <= through:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


# ---------------------------------------------------------------- journal
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
                self.failure = f"cannot write the journal in {self.directory}: {_describe(exc)}"
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
                self._fail(f"cannot start a new journal segment in {self.directory}: {_describe(exc)}")

    def _write(self, batch: _Batch) -> None:
        try:
            started = time.monotonic()
            data = b"".join(batch.data)
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except (OSError, ValueError) as exc:
            self._fail(f"cannot write the journal in {self.directory}: {_describe(exc)}")
            return
        stats = self.stats
        stats.records += len(batch.data)
        stats.bytes += len(data)
        stats.batches += 1
        stats.fsync_seconds += time.monotonic() - started
        stats.largest_batch = max(stats.largest_batch, len(batch.data))
        self.segment_bytes += len(data)
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
                    f"{why}; the writes it lost could not be taken back ({_describe(exc)}): restart the stack"
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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} (errno {exc.errno})"
    return str(exc) or type(exc).__name__


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] != "compact":
        print("usage: python -m punctual_local.moto.journal compact DIR THROUGH", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # behind moto and the handlers on a busy machine
    started = time.monotonic()
    try:
        snapshot = compact(Path(argv[2]), int(argv[3]), parent=os.getppid())
    except (OSError, StoreError) as exc:
        print(f"compaction failed: {_describe(exc)}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(json.dumps({"items": snapshot.items, "bytes": snapshot.bytes, "seconds": round(took, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
