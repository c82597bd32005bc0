"""The compactor: folds closed journal segments into a new snapshot, in a process of its own.

    python -m punctual_local.moto.compactor DIR THROUGH

It takes neither moto's interpreter nor its lock. It streams the old snapshot and holds in memory
only the keys the segments wrote. durable.py starts it when the journal has grown enough.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from punctual_local.moto.data_files import (
    SNAPSHOT_NAME,
    Snapshot,
    SnapshotWriter,
    StoreError,
    describe,
    read_segment,
    read_snapshot,
    remove_segments_through,
    segments,
    snapshot_header,
)

# The compactor checks this often (in lines) whether the process that started it is still there.
_PARENT_CHECK_LINES = 20_000


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


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m punctual_local.moto.compactor DIR THROUGH", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # behind moto and the handlers on a busy machine
    started = time.monotonic()
    try:
        snapshot = compact(Path(argv[1]), int(argv[2]), parent=os.getppid())
    except (OSError, StoreError) as exc:
        print(f"compaction failed: {describe(exc)}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    print(json.dumps({"items": snapshot.items, "bytes": snapshot.bytes, "seconds": round(took, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
