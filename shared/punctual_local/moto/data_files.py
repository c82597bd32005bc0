"""The local stack's data on disk: journal segments and the snapshot, their format, how to read them.

    <data dir>/snapshot.jsonl        the table's items up to journal segment `through`
    <data dir>/journal-00000042.log  the writes since, one record per item written, oldest first

A journal record is the after-image of one item: its key and its whole new value (or nothing, for a
deletion), so replaying a record twice, or over a snapshot that already holds it, changes nothing.
Records are framed as length (4 bytes), CRC32 (4 bytes), payload; the payload is the key's JSON, a tab,
the item's DynamoDB JSON (empty for a deletion). JSON never holds a raw tab, so the compactor can
compare keys as bytes without parsing anything.

Each start writes to a new segment, so only the end of a segment can be torn (a crash mid-write);
reading stops at the first record whose length or checksum is wrong, and every record before it was
whole. A snapshot is written beside the current one and renamed over it: it is never torn.

Only the standard library here: the compactor (compactor.py) starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

SNAPSHOT_NAME = "snapshot.jsonl"
SNAPSHOT_FORMAT = "punctual-local-snapshot"
JOURNAL_FORMAT = "punctual-local-journal"
VERSION = 2
_FRAME = struct.Struct(">II")  # payload length, CRC32 of the payload
MAX_RECORD_BYTES = 64 * 1024 * 1024  # far above DynamoDB's 400 KB item; a larger length is a torn one
_SEGMENT = re.compile(r"^journal-(\d{8})\.log$")
_START_EMPTY = "Move the data directory away (or start with --reset) to start empty."


class StoreError(Exception):
    """The data directory cannot be used as it is; the message says why and what to do."""


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


def remove_segments_through(directory: Path, through: int) -> None:
    for number, path in segments(directory):
        if number <= through:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} (errno {exc.errno})"
    return str(exc) or type(exc).__name__
