"""The data directory's first format: the whole table in one JSON document, `table.json`.

A stack that finds one reads it once, writes it out as a snapshot and deletes it. A table.json
written by a newer format is refused before anything starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from punctual_local.moto.data_files import Snapshot, SnapshotWriter, StoreError, describe, fsync_directory
from punctual_local.moto.items import key_of, put

LEGACY_SNAPSHOT_NAME = "table.json"
LEGACY_VERSION = 1


def restore_legacy(directory: Path, tables: dict[str, Any]) -> tuple[Snapshot, int]:
    """Read table.json into moto's tables and write it out as a snapshot; the snapshot, and how many
    items it held."""
    path = directory / LEGACY_SNAPSHOT_NAME
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
    writer = SnapshotWriter(directory, 0)
    try:
        for attrs in items:
            stored = put(table, attrs)
            writer.add(key_of(name, stored), json.dumps(attrs, separators=(",", ":")).encode())
        snapshot = writer.commit()
    except BaseException:
        writer.abort()
        raise
    path.unlink()
    fsync_directory(directory)
    return snapshot, len(items)


def check_legacy(directory: Path) -> None:
    """Refuse a table.json written by a newer format now, before anything is started."""
    path = directory / LEGACY_SNAPSHOT_NAME
    if not path.exists():
        return
    try:
        with open(path, "rb") as source:
            start = source.read(4096).decode("utf-8", errors="replace")
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {describe(exc)}") from exc
    marker = '"version":'
    if marker in start:
        digits = start.split(marker, 1)[1].lstrip().split(",", 1)[0].split("}", 1)[0].strip()
        if digits.isdigit() and int(digits) > LEGACY_VERSION:
            raise StoreError(
                f"{path} was written by a newer Punctual (format version {digits}). Upgrade, or start "
                "with another --data-dir."
            )
