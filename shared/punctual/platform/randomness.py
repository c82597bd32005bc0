"""Random ids from the system's generator, read a block at a time.

Every `os.urandom` call (and so `secrets.token_hex` and `uuid.uuid4`) lets go of the interpreter
lock for its system call, and a thread that lets go of it waits its turn to get it back. In one
process running many threads at once (a Lambda running a batch side by side; the local stack, which
runs every function's invocations in one interpreter) that turn can be long: at a burst's instant a
thousand threads stand in line. A block of system randomness read once serves many ids, with the
same unpredictability as reading each on its own.
"""

from __future__ import annotations

import os
import threading
import uuid

BLOCK_BYTES = 4096


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block = b""
        self._used = 0

    def take(self, count: int) -> bytes:
        if count > BLOCK_BYTES:
            return os.urandom(count)
        with self._lock:
            if self._used + count > len(self._block):
                self._block = os.urandom(BLOCK_BYTES)
                self._used = 0
            start = self._used
            self._used += count
            return self._block[start : self._used]

    def forget(self) -> None:
        """Drop the block read so far (a forked child must not hand out its parent's ids)."""
        self._lock = threading.Lock()
        self._block = b""
        self._used = 0


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def token_bytes(count: int) -> bytes:
    """`count` random bytes, never handed out twice."""
    return _pool.take(count)


def token_hex(count: int) -> str:
    """As `secrets.token_hex`: `count` random bytes in hexadecimal."""
    return _pool.take(count).hex()


def uuid4() -> uuid.UUID:
    """As `uuid.uuid4`."""
    return uuid.UUID(bytes=_pool.take(16), version=4)
