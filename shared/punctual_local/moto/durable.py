"""Durable tables for moto's process: every write journaled, and answered only once it is on disk.

moto keeps its tables in memory. In the moto process (moto_process.py) each successful write to a
table (PutItem, UpdateItem, DeleteItem, the records of a BatchWriteItem, a TransactWriteItems)
appends the after-image of every item it changed to the journal (journal.py) while moto's write lock
is held, so the journal's order is the order the writes were applied in. The HTTP answer to that
request is held (DurableApp) until the journal's group commit has fsync'd those records: the stack
sees a write succeed only once it is durable, and so does everyone the stack answers.

A transaction's records are kept aside until it ends: moto applies a transaction's items one by one
and, when one fails, puts back a copy of the whole table, so only a transaction that succeeded is
journaled.

On start (`restore`) the snapshot and the journal segments after it are read into the tables, and
writes go to a new segment. When the journal has grown to half the snapshot (or a few MB), the
segment is closed and a compactor process folds the closed segments into a new snapshot while moto
carries on.

A write that cannot be made durable (a full or failing disk) is taken back: each write keeps what
it replaced (its before-image) until its batch is on disk, and when the journal loses a batch every
write not on disk is undone in memory, newest first, under moto's write lock, before any of their
answers goes out. So what moto serves is what its disk holds, a BatchWriteItem or a transaction
whole or not at all. Its answer is PunctualStorageFailed, whose message says why, and so is every
write's while the disk still refuses; reads go on. Each later write first gives the journal another
try (journal.Journal.recover): once the disk takes writes again, so does the stack, without a restart.
The stack turns the refusals into 503 answers.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from punctual.platform.timefmt import parse_rfc3339, to_epoch_ms
from punctual.store import keys
from punctual_local.moto.atomic import WRITE_LOCK
from punctual_local.moto.faults import FillableDisk
from punctual_local.moto.journal import (
    LEGACY_SNAPSHOT_NAME,
    SNAPSHOT_NAME,
    Journal,
    SegmentRead,
    Snapshot,
    SnapshotWriter,
    StorageFailed,
    StoreError,
    fsync_directory,
    read_segment,
    read_snapshot,
    remove_segments_through,
    segments,
    snapshot_header,
)

LOCK_NAME = "journal.lock"
# A moto process of a stack that was just killed may still be finishing (it exits when its stdin
# closes), and so may its compactor (which checks every few thousand items): wait that long for them.
LOCK_WAIT_SECONDS = 20.0
LEGACY_VERSION = 1
MIN_COMPACT_BYTES = 8 * 1024 * 1024
# Compact once the journal since the snapshot reaches this share of the snapshot's size: the time
# spent compacting stays proportional to the writes, and a start replays at most that much journal.
COMPACT_RATIO = 0.5
# After a compaction failed (a full disk, say), the next one waits this long rather than retry at once.
COMPACT_RETRY_SECONDS = 60.0
# Items written by Punctual's store: executions (keys.is_execution_sk), with their status and,
# while RUNNING, a lease (epoch ms) that the worker which held it will not renew after a restart.
_UNFINISHED = frozenset({"QUEUED", "RETRYING", "RUNNING"})
_RAN_TO_END = frozenset({"SUCCEEDED", "FAILED"})

_local = threading.local()
_active: DurableTables | None = None
# What a write replaced: (moto's backend, table name, hash key, range key, the item before it or None).
Undo = tuple[Any, str, Any, Any, Any]


def _refused(why: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError("PunctualStorageFailed", why)
    error.code = 400  # not a status the SDK retries: the answer is the same every time
    return error


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
            raise StoreError(f"cannot use the data directory {data_dir}: {_describe(exc)}") from exc
        if reset:
            self._remove_all()
        with contextlib.suppress(FileNotFoundError):
            (data_dir / (SNAPSHOT_NAME + ".tmp")).unlink()  # a compaction that did not finish
        self.snapshot = snapshot_header(data_dir / SNAPSHOT_NAME)
        _check_legacy(data_dir / LEGACY_SNAPSHOT_NAME)

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
        tables = _tables()
        items = 0
        legacy = self.directory / LEGACY_SNAPSHOT_NAME
        if legacy.exists() and not (self.directory / SNAPSHOT_NAME).exists():
            items += self._restore_legacy(legacy, tables)
        else:
            for key, item in read_snapshot(self.directory / SNAPSHOT_NAME):
                _apply(tables, key, item)
                items += 1
        replayed, torn, last = 0, [], self.snapshot.through
        for number, path in segments(self.directory):
            if number <= self.snapshot.through:
                continue  # left by a compaction that stopped just before deleting it
            read = SegmentRead()
            for key, item in read_segment(path, read):
                _apply(tables, key, item)
            replayed += read.records
            self._older_bytes += path.stat().st_size
            if read.torn_bytes:
                torn.append({"segment": path.name, "ignored_bytes": read.torn_bytes})
            last = number
        remove_segments_through(self.directory, self.snapshot.through)
        unfinished = _unfinished_and_expire_leases(tables.values(), now_ms)
        self.journal = Journal(
            self.directory,
            last + 1,
            opener=self._opener,
            after_batch=self._after_batch,
            on_failure=self._take_back,
        )
        global _active
        _active = self
        return {
            "items": sum(_count(table) for table in tables.values()),
            "snapshot_items": items,
            "journal_records": replayed,
            "torn": torn,
            "unfinished": unfinished,
            "seconds": round(time.monotonic() - started, 3),
        }

    def _restore_legacy(self, path: Path, tables: dict[str, Any]) -> int:
        """A format-1 table.json: read it, and write it out as a snapshot before journaling on top."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            name, items = str(data["table"]), list(data["items"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"cannot read {path}: {exc}. Move it away (or start with --reset) to start empty."
            ) from exc
        table = tables.get(name)
        if table is None:
            raise StoreError(f"{path} holds table {name!r}, which this stack does not have")
        writer = SnapshotWriter(self.directory, 0)
        try:
            for attrs in items:
                stored = _put(table, attrs)
                writer.add(key_of(name, stored), json.dumps(attrs, separators=(",", ":")).encode())
            self.snapshot = writer.commit()
        except BaseException:
            writer.abort()
            raise
        path.unlink()
        fsync_directory(self.directory)
        return len(items)

    # ------------------------------------------------------------- journaling
    def after_write(self, records: list[tuple[bytes, bytes]], undo: list[Undo | None]) -> None:
        """Journal one write's records (under moto's write lock, as it was applied); if the journal
        refuses them, take the write back and raise StorageFailed."""
        journal = self.journal
        if journal is None:
            return
        while self._undo and self._undo[0][0] <= journal.durable:
            self._undo.popleft()
        try:
            first, last = journal.append_all(records)
        except StorageFailed:
            _put_back(undo)
            raise
        self._undo.append((last, undo))
        _local.first = min(getattr(_local, "first", 0) or first, first)
        _local.last = max(getattr(_local, "last", 0), last)

    def _take_back(self, durable: int) -> None:
        """On the journal's thread, once it lost every record after `durable`: undo those writes."""
        with WRITE_LOCK:
            while self._undo and self._undo[-1][0] > durable:
                _put_back(self._undo.pop()[1])

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
            command = [sys.executable, "-m", "punctual_local.moto.journal", "compact", str(self.directory)]
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
            "failure": journal.failure if journal is not None else None,
            "segment": journal.number if journal is not None else None,
            "journal": vars(stats) if stats is not None else None,
            "snapshot": vars(self.snapshot),
            "compacting": self.compacting,
            "compactions": self.compactions,
            "last_compaction": self.last_compaction,
        }

    def close(self) -> None:
        """Write what was journaled, stop a compaction (its segments stay), free the directory."""
        global _active
        if _active is self:
            _active = None
        if self.journal is not None:
            self.journal.close()
        with self._state_lock:
            if self._compactor is not None:
                self._compactor.kill()
                self._compactor.wait()
        if self._lock_file is not None:
            self._lock_file.close()


# ---------------------------------------------------------------- moto side
def key_of(table_name: str, item: Any) -> bytes:
    range_key = item.range_key.to_json() if item.range_key is not None else None
    return json.dumps([table_name, item.hash_key.to_json(), range_key], separators=(",", ":")).encode()


def _image(item: Any) -> bytes:
    return json.dumps(item.to_json()["Attributes"], separators=(",", ":")).encode()


def _tables() -> dict[str, Any]:
    from moto.dynamodb.models import dynamodb_backends

    found: dict[str, Any] = {}
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            found.update(backend.tables)
    return found


def _new_item(hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> Any:
    """moto's Item, without re-validating its size at every attribute (it was valid when written)."""
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    item: Any = Item.__new__(Item)
    item.hash_key, item.range_key = hash_key, range_key
    values = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.__init__(values)
    for name, value in attrs.items():
        # Interned: several hundred thousand items share a few dozen attribute names.
        dict.__setitem__(values, sys.intern(name), _dynamo(value))
    item.attrs = values
    return item


def _dynamo(value: dict[str, Any]) -> Any:
    """moto's DynamoType(value), as its __init__ makes it, in a third of the time (a restore makes
    millions of them)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    ((kind, inner),) = value.items()
    made: Any = DynamoType.__new__(DynamoType)
    made.type = kind
    if kind == "L":
        inner = [_dynamo(v) for v in inner]
    elif kind == "M":
        inner = {k: _dynamo(v) for k, v in inner.items()}
    made.value = inner
    return made


def _put(table: Any, attrs: dict[str, Any]) -> Any:
    hash_key = _dynamo(attrs[table.hash_key_attr])
    range_key = _dynamo(attrs[table.range_key_attr]) if table.range_key_attr else None
    item = _new_item(hash_key, range_key, attrs)
    if range_key is not None:
        table.items[hash_key][range_key] = item
    else:
        table.items[hash_key] = item
    return item


def _apply(tables: dict[str, Any], key: bytes, item: bytes) -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    table_name, hash_json, range_json = json.loads(key)
    table = tables.get(table_name)
    if table is None:
        raise StoreError(f"the data holds table {table_name!r}, which this stack does not have")
    if item:
        _put(table, json.loads(item))
        return
    hash_key = DynamoType(hash_json)
    if range_json is None:
        table.items.pop(hash_key, None)
        return
    partition = table.items.get(hash_key)
    if partition is not None:
        partition.pop(DynamoType(range_json), None)
        if not partition:
            del table.items[hash_key]


def _all_items(table: Any) -> Iterator[Any]:
    if table.range_key_attr:
        for partition in table.items.values():
            yield from partition.values()
    else:
        yield from table.items.values()


def _count(table: Any) -> int:
    return sum(len(p) for p in table.items.values()) if table.range_key_attr else len(table.items)


def _unfinished_and_expire_leases(tables: Iterable[Any], now_ms: int) -> list[list[str]]:
    """[job_id, id, scheduled_at] of each unfinished execution, and of each that ran to its end
    without its job recording it as its outcome (its worker stopped between the two writes, and
    moto's queue, which is not saved, held the message that would have made that good). A RUNNING
    one's worker stopped with the stack: its lease ends now, so it runs again (not journaled: a later
    start ends it again)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    found = []
    ended: list[tuple[Any, list[str]]] = []  # (its attributes, its triple): checked against its job
    outcome_at: dict[str, int] = {}  # by job partition key: the finish of the outcome its job records
    for table in tables:
        for item in _all_items(table):
            attrs = item.attrs
            if item.range_key is not None and str(item.range_key.value) == keys.JOB_SK:
                recorded = attrs.get("outcome_at")
                outcome_at[str(item.hash_key.value)] = -1 if recorded is None else int(recorded.value)
                continue
            if item.range_key is None or not keys.is_execution_sk(str(item.range_key.value)):
                continue
            status = attrs.get("status")
            try:
                triple = [attrs["job_id"].value, attrs["id"].value, attrs["scheduled_at"].value]
            except KeyError:
                continue
            if status is not None and status.value in _RAN_TO_END and "finished_at" in attrs:
                ended.append((attrs, triple))
                continue
            if status is None or status.value not in _UNFINISHED:
                continue
            if status.value == "RUNNING" and "lease_until" in attrs:
                dict.__setitem__(attrs, "lease_until", DynamoType({"N": str(now_ms)}))
            found.append(triple)
    for attrs, triple in ended:
        recorded = outcome_at.get(keys.job_pk(triple[0]))
        if recorded is not None and recorded < to_epoch_ms(parse_rfc3339(attrs["finished_at"].value)):
            found.append(triple)
    return found


def install_hooks() -> None:
    """Journal moto's writes (see the module's doc). Call before moto_atomic.make_writes_atomic, so
    that the journal is appended to while moto's write lock is held."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoDBBackend, "_punctual_journaled", False):
        return
    shares_copy = _share_motos_copy_of_updated_items()

    def journaled(original: Callable[..., Any], capture: Capture, before: Callable[..., Any] | None) -> Any:
        def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            tables = _active
            if tables is None:
                return original(self, *args, **kwargs)
            depth = getattr(_local, "depth", 0)
            if depth == 0:
                why = tables.refusal()
                if why is not None:
                    raise _refused(why)
                _local.pending, _local.undo = [], []
            _local.depth = depth + 1
            try:
                prior = before(self, *args, **kwargs) if before is not None else None
                result = original(self, *args, **kwargs)
                if result is not None:
                    records, undo = capture(self, result, prior, *args, **kwargs)
                    _local.pending.extend(records)
                    _local.undo.append(undo)
            except BaseException:
                if depth == 0:
                    # A BatchWriteItem that failed part way leaves nothing behind, as DynamoDB's.
                    _put_back(_local.undo)
                    _local.pending, _local.undo = [], []
                raise
            finally:
                _local.depth = depth
            if depth == 0:
                records, undone = _local.pending, _local.undo
                _local.pending, _local.undo = [], []
                if records:
                    try:
                        tables.after_write(records, undone)
                    except StorageFailed as exc:
                        raise _refused(str(exc)) from exc
            return result

        return write

    def replacing(backend: Any, table_name: str, attrs: dict[str, Any], *_: Any, **__: Any) -> Undo | None:
        return _before(backend, table_name, attrs, copied=False)

    def put(backend: Any, result: Any, prior: Undo | None, table_name: str, *_: Any, **__: Any) -> Captured:
        return [(key_of(table_name, result), _image(result))], prior

    def updating(backend: Any, table_name: str, key: dict[str, Any], *_: Any, **__: Any) -> Undo | None:
        if shares_copy:
            _local.copied = _NOT_COPIED
            return None
        return _before(backend, table_name, key, copied=True)

    def update(
        backend: Any, result: Any, prior: Undo | None, table_name: str, *_: Any, **__: Any
    ) -> Captured:
        if shares_copy:
            copied, _local.copied = _local.copied, _NOT_COPIED
            prior = (
                None
                if copied is _NOT_COPIED
                else (backend, table_name, result.hash_key, result.range_key, copied)
            )
        return [(key_of(table_name, result), _image(result))], prior

    def delete(
        backend: Any, result: Any, prior: Undo | None, table_name: str, *_: Any, **__: Any
    ) -> Captured:
        # moto's delete hands back the item it took out, as it was.
        return [(key_of(table_name, result), b"")], (
            backend,
            table_name,
            result.hash_key,
            result.range_key,
            result,
        )

    for owner, name, capture, before in (
        (DynamoDBBackend, "put_item", put, replacing),
        (DynamoDBBackend, "update_item", update, updating),
        (DynamoDBBackend, "delete_item", delete, None),
        (DynamoDBBackend, "transact_write_items", None, None),  # its items: by the calls it makes
        (DynamoHandler, "batch_write_item", None, None),
    ):
        original = getattr(owner, name)
        setattr(owner, name, _wraps(original, journaled(original, capture or _nothing, before)))
    DynamoDBBackend._punctual_journaled = True  # type: ignore[attr-defined]


Captured = tuple[list[tuple[bytes, bytes]], Undo | None]
Capture = Callable[..., Captured]
_NOT_COPIED = object()


def _nothing(*_: Any, **__: Any) -> Captured:
    return [], None


def _share_motos_copy_of_updated_items() -> bool:
    """moto's update_item deep-copies the item before changing it in place (for its streams): that copy
    is the write's before-image, taken from it rather than made a second time (a deep copy costs about
    what the journal's after-image does). False, and copied here, if this moto does not."""
    import inspect

    import moto.dynamodb.models as models
    from moto.dynamodb.models.dynamo_type import Item

    try:
        source = inspect.getsource(models.DynamoDBBackend.update_item)
    except (OSError, TypeError):
        return False
    if "orig_item = copy.deepcopy(item)" not in source or source.count("copy.deepcopy(") != 1:
        return False
    real = models.copy

    class MotosCopy:
        """The copy module as moto's models see it, keeping the copy of an item for the write."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            made = real.deepcopy(value, memo)
            if value is None or type(value) is Item:
                _local.copied = made
            return made

    models.copy = MotosCopy()  # type: ignore[assignment]
    return True


def _before(backend: Any, table_name: str, key: dict[str, Any], *, copied: bool) -> Undo | None:
    """What a write to `key` will replace. moto's put swaps the item for another, leaving it as it was;
    its update changes the item in place, so for that one it is copied."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        table = backend.get_table(table_name)
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    except Exception:  # moto's own call refuses the write, saying why
        return None
    current = table.items.get(hash_key)
    if range_key is not None:
        current = current.get(range_key) if current else None
    if copied and current is not None:
        current = copy.deepcopy(current)
    return backend, table_name, hash_key, range_key, current


def _put_back(undo: Sequence[Undo | None]) -> None:
    """Undo writes, newest first (under moto's write lock)."""
    for entry in reversed(undo):
        if entry is None:
            continue
        backend, table_name, hash_key, range_key, item = entry
        table = backend.tables.get(table_name)  # (a failed transaction puts back a copy of the table)
        if table is None:
            continue
        if range_key is None:
            if item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
            continue
        partition = table.items.get(hash_key)
        if item is not None:
            if partition is None:
                partition = table.items[hash_key] = {}
            partition[range_key] = item
        elif partition is not None:
            partition.pop(range_key, None)
            if not partition:
                del table.items[hash_key]


def _wraps(original: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    import functools

    return functools.wraps(original)(wrapper)


class DurableApp:
    """WSGI middleware: a request's answer waits for the journal to hold its writes.

    Also answers GET /_punctual/status (the journal's state, for the stack and the benchmarks),
    POST /_punctual/compact (compact now) and, given a disk that fills on demand (faults.py), POST
    /_punctual/disk with `full` or `free`."""

    def __init__(
        self, app: Callable[..., Any], tables: DurableTables, disk: FillableDisk | None = None
    ) -> None:
        self._app = app
        self._tables = tables
        self._disk = disk

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_punctual/"):
            return self._control(environ, path, start_response)
        _local.first, _local.last = 0, 0
        _local.depth = 0
        started: list[tuple[Any, ...]] = []
        written: list[bytes] = []

        def deferred(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started.append((status, headers, exc_info))
            return written.append

        answer = self._app(environ, deferred)
        try:
            chunks = written + list(answer)
        finally:
            if hasattr(answer, "close"):
                answer.close()
        first, last = _local.first, _local.last
        _local.first, _local.last = 0, 0
        journal = self._tables.journal
        if last and journal is not None:
            try:
                journal.wait(last, first=first)
            except StorageFailed as exc:
                body = json.dumps({"__type": "PunctualStorageFailed", "message": str(exc)}).encode()
                start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")])
                return [body]
        status, headers, exc_info = started[0]
        start_response(status, headers, exc_info)
        return chunks

    def _control(self, environ: dict[str, Any], path: str, start_response: Callable[..., Any]) -> list[bytes]:
        post = environ.get("REQUEST_METHOD") == "POST"
        if path == "/_punctual/compact" and post:
            self._tables.request_compaction()
        elif path == "/_punctual/disk" and post and self._disk is not None:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            self._disk.full = environ["wsgi.input"].read(length).strip() == b"full"
        elif path != "/_punctual/status":
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"message": "not found"}']
        body = json.dumps(self._tables.status()).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


def _probe_writable(directory: Path) -> None:
    probe = directory / ".write-probe"
    with open(probe, "wb") as out:
        out.write(b"punctual")
        out.flush()
        os.fsync(out.fileno())
    probe.unlink()


def _check_legacy(path: Path) -> None:
    """Refuse a table.json written by a newer format now, before anything is started."""
    if not path.exists():
        return
    try:
        with open(path, "rb") as source:
            start = source.read(4096).decode("utf-8", errors="replace")
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {_describe(exc)}") from exc
    marker = '"version":'
    if marker in start:
        digits = start.split(marker, 1)[1].lstrip().split(",", 1)[0].split("}", 1)[0].strip()
        if digits.isdigit() and int(digits) > LEGACY_VERSION:
            raise StoreError(
                f"{path} was written by a newer Punctual (format version {digits}). Upgrade, or start "
                "with another --data-dir."
            )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} (errno {exc.errno})"
    return str(exc) or type(exc).__name__
