"""Each write to moto's tables journaled as it is applied, and taken back if the disk refuses it.

The writes hooked are PutItem, UpdateItem, DeleteItem, TransactWriteItems and BatchWriteItem. Each
appends the after-image of every item it changed to the journal while moto's write lock is held, so
the journal's order is the order the writes were applied in (`install_hooks` runs before
atomic.make_writes_atomic, whose lock is then outside these hooks).

A transaction's records are kept aside until it ends: moto applies a transaction's items one by one
and, when one fails, puts back a copy of the whole table, so only a transaction that succeeded is
journaled. A BatchWriteItem that fails part way is taken back whole, as DynamoDB's.

Each write keeps what it replaced (its before-image, `Undo`) until its batch is on disk, so that
durable.py can take it back when the journal loses that batch. moto's UpdateItem copies the item
before changing it; that copy is reused as the before-image where this moto makes it.

Per request, the hooks note the first and last journal sequence written (`start_request`,
`written_in_request`): durable_app.py holds the answer until those are on disk.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from punctual_local.moto.items import image, key_of
from punctual_local.moto.journal import STORAGE_FAILED, StorageFailed

# What a write replaced: (moto's backend, table name, hash key, range key, the item before it or None).
Undo = tuple[Any, str, Any, Any, Any]
Captured = tuple[list[tuple[bytes, bytes]], Undo | None]
Capture = Callable[..., Captured]
_NOT_COPIED = object()


class Tables(Protocol):
    """Where the hooks journal moto's writes (durable.DurableTables)."""

    def refusal(self) -> str | None: ...

    def after_write(
        self, records: list[tuple[bytes, bytes]], undo: list[Undo | None]
    ) -> tuple[int, int] | None: ...


_local = threading.local()
_active: Tables | None = None


def activate(tables: Tables) -> None:
    """Journal the writes into `tables` from now on."""
    global _active
    _active = tables


def deactivate(tables: Tables) -> None:
    global _active
    if _active is tables:
        _active = None


def start_request() -> None:
    _local.first, _local.last = 0, 0
    _local.depth = 0


def written_in_request() -> tuple[int, int]:
    """The first and last journal sequence the request's writes took (0, 0 if none)."""
    first, last = getattr(_local, "first", 0), getattr(_local, "last", 0)
    _local.first, _local.last = 0, 0
    return first, last


def _note_written(first: int, last: int) -> None:
    _local.first = min(getattr(_local, "first", 0) or first, first)
    _local.last = max(getattr(_local, "last", 0), last)


def _refused(why: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError(STORAGE_FAILED, why)
    error.code = 400  # not a status the SDK retries: the answer is the same every time
    return error


def install_hooks() -> None:
    """Journal moto's writes (see the module's doc). Call before atomic.make_writes_atomic, so
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
                    put_back(_local.undo)
                    _local.pending, _local.undo = [], []
                raise
            finally:
                _local.depth = depth
            if depth == 0:
                records, undone = _local.pending, _local.undo
                _local.pending, _local.undo = [], []
                if records:
                    try:
                        written = tables.after_write(records, undone)
                    except StorageFailed as exc:
                        raise _refused(str(exc)) from exc
                    if written is not None:
                        _note_written(*written)
            return result

        return write

    def replacing(backend: Any, table_name: str, attrs: dict[str, Any], *_: Any, **__: Any) -> Undo | None:
        return _before(backend, table_name, attrs, copied=False)

    def put(backend: Any, result: Any, prior: Undo | None, table_name: str, *_: Any, **__: Any) -> Captured:
        return [(key_of(table_name, result), image(result))], prior

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
        return [(key_of(table_name, result), image(result))], prior

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


def put_back(undo: Sequence[Undo | None]) -> None:
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
    return functools.wraps(original)(wrapper)
