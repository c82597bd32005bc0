"""The reads a process's executions claimed ahead of one instant make at it, made once for all of them.

An execution claimed before its instant reads, at its instant, whether its job changed since (a pause
or cancel that landed meanwhile stops it). A burst's executions share an instant and all wake at it;
each asking for its own read as it gets its turn in the interpreter, the reads would go in waves as
the threads trickle in. Which jobs will be read at an instant is known when they are claimed, before
it. So each
claimed execution says so then (`expect`), and at the instant the first of them to ask reads every
job expected there in one read (BatchGetItems side by side) while the others wait for it; those that
wake later find their answer made.

The read is never made before its instant, so a change that landed before the instant is always
seen. An execution that asks after the read was made gets its answer from it: that read came after
its instant, so whatever changed later came after its start, as with a read of its own. What the
shared read did not cover (expected after it began, or failed) is read by the caller on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from punctual.domain.errors import UnreadableItem
from punctual.execution.batched_reads import ReadMany
from punctual.platform.clock import Clock

T = TypeVar("T")
# An instant's group is dropped once this long past if some expected read never came (a crash of its
# thread): a bound on what is kept, not a time any read waits. Looked for at most this often:
FORGET_AFTER = timedelta(minutes=10)
SWEEP_EVERY = timedelta(minutes=1)


@dataclass
class _Group(Generic[T]):
    ids: set[str] = field(default_factory=set)
    pending: int = 0  # expected reads not yet taken or given up
    started: bool = False  # the shared read began: no id joins it any more
    done: threading.Event = field(default_factory=threading.Event)
    found: dict[str, T] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    answered: bool = False  # the shared read answered every id it asked (it did not fail)


class Expected(Generic[T]):
    """One execution's read at its instant: `get()` once, at or after it (or `drop()` not to read)."""

    def __init__(self, reads: InstantReads[T], job_id: str, at: datetime) -> None:
        self._reads = reads
        self.job_id = job_id
        self.at = at
        self._open = True

    def get(self) -> T | None:
        """The job's value read at (or after) the instant; None when there is no such job."""
        return self._reads._take(self)

    def drop(self) -> None:
        """Not read after all (its execution will not start); nothing if already taken."""
        self._reads._close(self)


class InstantReads(Generic[T]):
    def __init__(
        self, read_many: ReadMany[str, T], read_one: Callable[[str], T | None], clock: Clock
    ) -> None:
        self._read_many = read_many
        self._read_one = read_one  # for what the shared read did not cover
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[datetime, _Group[T]] = {}
        self._next_sweep: datetime | None = None

    def expect(self, job_id: str, at: datetime) -> Expected[T]:
        """An execution claimed ahead of `at` will read its job there."""
        with self._lock:
            self._forget(self._clock.now())
            group = self._groups.setdefault(at, _Group())
            if not group.started:
                group.ids.add(job_id)
            group.pending += 1
        return Expected(self, job_id, at)

    @property
    def instants(self) -> int:
        """Instants with reads expected or still being handed out."""
        with self._lock:
            return len(self._groups)

    def _take(self, expected: Expected[T]) -> T | None:
        with self._lock:
            group = self._groups.get(expected.at)
            lead = group is not None and not group.started
            if group is not None:
                group.started = True  # (whoever comes first leads)
        if group is None:
            return self._read_one(expected.job_id)
        try:
            if lead:
                self._read_for(group, expected.at)
            else:
                group.done.wait()
            if not group.answered or expected.job_id not in group.ids:
                return self._read_one(expected.job_id)
            if expected.job_id in group.unreadable:
                raise UnreadableItem(f"job {expected.job_id}: {group.unreadable[expected.job_id]}")
            return group.found.get(expected.job_id)
        finally:
            self._close(expected)

    def _read_for(self, group: _Group[T], at: datetime) -> None:
        try:
            # Never before the instant: a change that landed before it must be seen.
            wait = (at - self._clock.now()).total_seconds()
            if wait > 0:
                self._clock.sleep(wait)
            # (no id joins once started: `ids` is what the read asks)
            group.found, group.unreadable = self._read_many(sorted(group.ids))
            group.answered = True
        except Exception:
            pass  # (not answered: each reads on its own, and meets the failure itself)
        finally:
            group.done.set()

    def _close(self, expected: Expected[T]) -> None:
        with self._lock:
            if not expected._open:
                return
            expected._open = False
            group = self._groups.get(expected.at)
            if group is None:
                return
            group.pending -= 1
            if group.pending <= 0:
                del self._groups[expected.at]

    def _forget(self, now: datetime) -> None:
        if self._next_sweep is not None and now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for at in [at for at in self._groups if at < now - FORGET_AFTER]:
            self._groups[at].done.set()
            del self._groups[at]
