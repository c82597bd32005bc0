"""Durable tables for moto's process: every write journaled, and answered only once it is on disk.

moto keeps its tables in memory. In the moto process (process.py) each successful write to a table
is appended to the journal (journal.py) as it is applied (write_hooks.py). The HTTP answer to that
request is held (durable_app.py) until the journal's group commit has fsync'd those records.

On start (`restore`) the snapshot and the journal segments after it are read into the tables, and
writes go to a new segment. When the journal has grown to half the snapshot (or a few MB), the
segment is closed and a compactor process (compactor.py) folds the closed segments into a new
snapshot while moto carries on.

A write that cannot be made durable (a full or failing disk) is taken back: when the journal loses a
batch every write not on disk is undone in memory, newest first, under moto's write lock, before any
of their answers goes out. So what moto serves is what its disk holds, a BatchWriteItem or a
transaction whole or not at all. Its answer is PunctualStorageFailed, whose message says why, and so
is every write's while the disk still refuses; reads go on. Each later write first gives the journal
another try (journal.Journal.recover): once the disk takes writes again, so does the stack, without a
restart. The stack turns the refusals into 503 answers.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from punctual_local.moto.atomic import WRITE_LOCK
from punctual_local.moto.data_files import (
    SNAPSHOT_NAME,
    SegmentRead,
    Snapshot,
    StoreError,
    describe,
    read_segment,
    read_snapshot,
    remove_segments_through,
    segments,
    snapshot_header,
)
from punctual_local.moto.items import all_tables, apply, count
from punctual_local.moto.journal import Journal, StorageFailed
from punctual_local.moto.legacy import LEGACY_SNAPSHOT_NAME, check_legacy, restore_legacy
from punctual_local.moto.unfinished import unfinished_and_expire_leases
from punctual_local.moto.write_hooks import Undo, activate, deactivate, put_back
from punctual_local.owners import active_owners

LOCK_NAME = "journal.lock"
# A moto process of a stack that was just killed may still be finishing (it exits when its stdin
# closes), and so may its compactor (which checks every few thousand items): wait that long for them.
LOCK_WAIT_SECONDS = 20.0
MIN_COMPACT_BYTES = 8 * 1024 * 1024
# Compact once the journal since the snapshot reaches this share of the snapshot's size: the time
# spent compacting stays proportional to the writes, and a start replays at most that much journal.
COMPACT_RATIO = 0.5
# After a compaction failed (a full disk, say), the next one waits this long rather than retry at once.
COMPACT_RETRY_SECONDS = 60.0
# Items written by Punctual's store: executions (keys.is_execution_sk), with their status and,


class DurableTables:
    def __init__(
        self,
        data_dir: Path,
        *,
        reset: bool = False,
        opener: Callable[[Path, str], IO[bytes]] | None = None,
    ) -> None:
        self.directory = data_dir
        self._opener = opener  # the journal's files (a disk that fails on demand, in tests)
        self.journal: Journal | None = None
        self.snapshot = Snapshot()
        self.last_compaction: dict[str, Any] | None = None
        self.compactions = 0
        self._lock_file: IO[str] | None = None
        self._compactor: subprocess.Popen[bytes] | None = None
        self._compactor_started = 0.0
        self._compact_requested = False
        self._retry_at = 0.0
        self._older_bytes = 0  # closed segments not compacted yet
        self._state_lock = threading.Lock()
        # (last sequence, its writes' undo) of each write not on disk yet, oldest first; kept under
        # moto's write lock.
        self._undo: deque[tuple[int, list[Undo | None]]] = deque()
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()
            _probe_writable(data_dir)
        except OSError as exc:
            raise StoreError(f"cannot use the data directory {data_dir}: {describe(exc)}") from exc
        if reset:
            self._remove_all()
        with contextlib.suppress(FileNotFoundError):
            (data_dir / (SNAPSHOT_NAME + ".tmp")).unlink()  # a compaction that did not finish
        self.snapshot = snapshot_header(data_dir / SNAPSHOT_NAME)
        check_legacy(data_dir)

    def _acquire_lock(self) -> None:
        import fcntl

        self._lock_file = open(self.directory / LOCK_NAME, "a+")  # noqa: SIM115 - held while running
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.directory} is in use by another `punctual local` (its moto process "
                        "still holds it); stop it or pick --data-dir"
                    ) from None
                time.sleep(0.05)

    def _remove_all(self) -> None:
        for _, path in segments(self.directory):
            path.unlink()
        for name in (SNAPSHOT_NAME, LEGACY_SNAPSHOT_NAME):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()

    # ---------------------------------------------------------------- restore
    def restore(self, now_ms: int) -> dict[str, Any]:
        """Read the saved items into moto's tables, then journal every write; what was found."""
        started = time.monotonic()
        # Millions of objects are made here and none is garbage: the collector's full passes would
        # go over all of them again and again (a third of the restore). Frozen afterwards, they are
        # left out of its later passes too, which would otherwise pause moto for longer as data grows.
        gc.disable()
        try:
            return self._restore(now_ms, started)
        finally:
            gc.freeze()
            gc.enable()

    def _restore(self, now_ms: int, started: float) -> dict[str, Any]:
        tables = all_tables()
        items = 0
        legacy = self.directory / LEGACY_SNAPSHOT_NAME
        if legacy.exists() and not (self.directory / SNAPSHOT_NAME).exists():
            self.snapshot, items = restore_legacy(self.directory, tables)
        else:
            for key, item in read_snapshot(self.directory / SNAPSHOT_NAME):
                apply(tables, key, item)
                items += 1
        replayed, torn, last = 0, [], self.snapshot.through
        for number, path in segments(self.directory):
            if number <= self.snapshot.through:
                continue  # left by a compaction that stopped just before deleting it
            read = SegmentRead()
            for key, item in read_segment(path, read):
                apply(tables, key, item)
            replayed += read.records
            self._older_bytes += path.stat().st_size
            if read.torn_bytes:
                torn.append({"segment": path.name, "ignored_bytes": read.torn_bytes})
            last = number
        remove_segments_through(self.directory, self.snapshot.through)
        unfinished = unfinished_and_expire_leases(tables.values(), now_ms)
        owners = active_owners(tables.values())
        self.journal = Journal(
            self.directory,
            last + 1,
            opener=self._opener,
            after_batch=self._after_batch,
            on_failure=self._take_back,
        )
        activate(self)
        return {
            "items": sum(count(table) for table in tables.values()),
            "snapshot_items": items,
            "journal_records": replayed,
            "torn": torn,
            "unfinished": unfinished,
            "active_owners": owners,
            "seconds": round(time.monotonic() - started, 3),
        }

    # ------------------------------------------------------------- journaling
    def after_write(
        self, records: list[tuple[bytes, bytes]], undo: list[Undo | None]
    ) -> tuple[int, int] | None:
        """Journal one write's records (under moto's write lock, as it was applied): their first and
        last sequence, for the answer to wait on. If the journal refuses them, take the write back and
        raise StorageFailed."""
        journal = self.journal
        if journal is None:
            return None
        while self._undo and self._undo[0][0] <= journal.durable:
            self._undo.popleft()
        try:
            first, last = journal.append_all(records)
        except StorageFailed:
            put_back(undo)
            raise
        self._undo.append((last, undo))
        return first, last

    def _take_back(self, durable: int) -> None:
        """On the journal's thread, once it lost every record after `durable`: undo those writes."""
        with WRITE_LOCK:
            while self._undo and self._undo[-1][0] > durable:
                put_back(self._undo.pop()[1])

    def refusal(self) -> str | None:
        """Why writes are refused, or None; a journal that failed is given another try first."""
        journal = self.journal
        if journal is None or journal.failure is None:
            return None
        try:
            journal.recover()
        except StorageFailed as exc:
            return f"{exc}; writes are refused until the disk takes them again"
        return None

    # ------------------------------------------------------------- compaction
    def request_compaction(self) -> None:
        self._compact_requested = True

    def _after_batch(self, journal: Journal) -> None:
        """On the journal's thread, between batches: start or collect a compaction."""
        with self._state_lock:
            compactor = self._compactor
            if compactor is not None:
                if compactor.poll() is None:
                    return
                self._collect(compactor)
            threshold = max(MIN_COMPACT_BYTES, COMPACT_RATIO * self.snapshot.bytes)
            if not self._compact_requested and (
                self._older_bytes + journal.segment_bytes < threshold or time.monotonic() < self._retry_at
            ):
                return
            self._compact_requested = False
            self._older_bytes += journal.segment_bytes
            closed = journal.rotate()
            assert self._lock_file is not None
            command = [sys.executable, "-m", "punctual_local.moto.compactor", str(self.directory)]
            self._compactor = subprocess.Popen(
                [*command, str(closed)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(self._lock_file.fileno(),),  # holds the data directory while it runs
            )
            self._compactor_started = time.monotonic()

    def _collect(self, compactor: subprocess.Popen[bytes]) -> None:
        out, err = compactor.communicate()
        self._compactor = None
        took = round(time.monotonic() - self._compactor_started, 3)
        if compactor.returncode == 0:
            self.snapshot = snapshot_header(self.directory / SNAPSHOT_NAME)
            self._older_bytes = 0
            self.compactions += 1
            self.last_compaction = {**json.loads(out or b"{}"), "wall_seconds": took}
        else:
            # The segments stay and are compacted next time; nothing is lost meanwhile.
            why = err.decode(errors="replace").strip()[-500:]
            print(f"punctual local: compaction failed, will retry: {why}", file=sys.stderr, flush=True)
            self.last_compaction = {"failed": why, "wall_seconds": took}
            self._retry_at = time.monotonic() + COMPACT_RETRY_SECONDS

    @property
    def compacting(self) -> bool:
        return self._compactor is not None

    def status(self) -> dict[str, Any]:
        journal = self.journal
        stats = journal.stats if journal is not None else None
        return {
            "failure": journal.refusing if journal is not None else None,
            "segment": journal.number if journal is not None else None,
            "journal": vars(stats) if stats is not None else None,
            "snapshot": vars(self.snapshot),
            "compacting": self.compacting,
            "compactions": self.compactions,
            "last_compaction": self.last_compaction,
        }

    def close(self) -> None:
        """Write what was journaled, stop a compaction (its segments stay), free the directory."""
        deactivate(self)
        if self.journal is not None:
            self.journal.close()
        with self._state_lock:
            if self._compactor is not None:
                self._compactor.kill()
                self._compactor.wait()
        if self._lock_file is not None:
            self._lock_file.close()


def _probe_writable(directory: Path) -> None:
    probe = directory / ".write-probe"
    with open(probe, "wb") as out:
        out.write(b"punctual")
        out.flush()
        os.fsync(out.fileno())
    probe.unlink()
