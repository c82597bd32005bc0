"""A disk that fills up on demand, for testing how the local stack's journal meets a full disk.

moto's process puts its journal on one when started with PUNCTUAL_LOCAL_FAULTS=1, and then answers
POST /_punctual/disk with the body `full` or `free` (durable_app.DurableApp). Nothing else uses it.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import IO, Any

ENVIRONMENT_SWITCH = "PUNCTUAL_LOCAL_FAULTS"


class FillableDisk:
    """Opens real files; while `full`, a write puts down all but the last byte of its data and fails
    with ENOSPC, as a disk that fills up in the middle of a write leaves a torn record behind."""

    def __init__(self) -> None:
        self.full = False

    def open(self, path: Path, mode: str) -> IO[bytes]:
        return _File(self, open(path, mode))  # type: ignore[return-value]


class _File:
    def __init__(self, disk: FillableDisk, file: IO[bytes]) -> None:
        self._disk = disk
        self._file = file

    def write(self, data: bytes) -> int:
        if self._disk.full:
            self._file.write(data[:-1])
            self._file.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)
