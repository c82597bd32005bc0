"""What the worker reads of the executions and jobs of the messages it receives: batched across
the messages received together (BatchedReads), a pack's read ahead in one go (`Known`), and the
jobs' stamps at an instant, which tell whether a job changed since it was read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from punctual.domain.errors import UnreadableItem
from punctual.domain.executions import Execution, ExecutionRef
from punctual.domain.models import Job, JobStamp
from punctual.domain.work import WorkItem
from punctual.execution.batched_reads import BatchedReads
from punctual.execution.instant_reads import Expected, InstantReads
from punctual.platform.clock import Clock
from punctual.platform.concurrency import parallel_map
from punctual.ports.store import Store


class PackStamps:
    """A pack's jobs' stamps at its instant, read once for all its members: by the first to ask, after
    its claim at or past the instant (a change that landed later came after their start, as with
    InstantReads), while the others wait for that read."""

    def __init__(
        self, read: Callable[[list[str]], tuple[dict[str, JobStamp], dict[str, str]]], job_ids: list[str]
    ):
        self._read = read
        self._job_ids = job_ids
        self._lock = threading.Lock()
        self._answer: tuple[dict[str, JobStamp], dict[str, str]] | None = None

    def get(self, job_id: str) -> JobStamp | None:
        with self._lock:
            if self._answer is None:
                self._answer = self._read(self._job_ids)
        found, unreadable = self._answer
        if job_id in unreadable:
            raise UnreadableItem(f"job {job_id}: {unreadable[job_id]}")
        return found.get(job_id)


@dataclass(frozen=True)
class Known:
    """A pack's executions and jobs, read together on receipt: its members look them up here."""

    executions: dict[ExecutionRef, Execution]
    unreadable_executions: dict[ExecutionRef, str]
    jobs: dict[str, Job]
    unreadable_jobs: dict[str, str]
    stamps: PackStamps | None = None

    def execution(self, ref: ExecutionRef) -> Execution | None:
        if ref in self.unreadable_executions:
            raise UnreadableItem(f"execution {ref[2]}: {self.unreadable_executions[ref]}")
        return self.executions.get(ref)

    def job(self, job_id: str) -> Job | None:
        if job_id in self.unreadable_jobs:
            raise UnreadableItem(f"job {job_id}: {self.unreadable_jobs[job_id]}")
        return self.jobs.get(job_id)


class ReceiptReads:
    """The worker's reads of stored executions and jobs; the store's methods are looked up at each
    call, so that a test may replace them."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        # Executions read on receipt, and their jobs: many received together share a call each.
        self._executions = BatchedReads(self._read_executions, what="execution")
        self._jobs = BatchedReads(lambda job_ids: self._store.jobs.get_many(job_ids))
        self._stamps = BatchedReads(self._read_stamps)
        # Executions claimed ahead read their jobs' stamps at their instant together.
        self._stamps_at: InstantReads[JobStamp] = InstantReads(self._read_stamps, self._stamps.get, clock)

    def execution(self, ref: ExecutionRef, known: Known | None = None) -> Execution | None:
        """An execution as stored (`known`: read with its pack's)."""
        return known.execution(ref) if known is not None else self._executions.get(ref)

    def job(self, job_id: str, known: Known | None = None) -> Job | None:
        """A job as stored (`known`: read with its pack's)."""
        return known.job(job_id) if known is not None else self._jobs.get(job_id)

    def ahead(self, items: Sequence[WorkItem]) -> Known:
        """The executions and jobs of a pack's members, in a BatchGetItem (a hundred) each, side by side."""
        refs = [(item.job_id, item.scheduled_at, item.execution_id) for item in items]
        job_ids = [item.job_id for item in items]
        reads: list[Callable[[], Any]] = [
            lambda: self._read_executions(refs),
            lambda: tuple(self._store.jobs.get_many(job_ids)),
        ]
        (executions, bad_executions), (jobs, bad_jobs) = parallel_map(lambda read: read(), reads)
        stamps = PackStamps(lambda ids: self._read_stamps(ids), list(dict.fromkeys(job_ids)))
        return Known(executions, bad_executions, jobs, bad_jobs, stamps)

    def expect(self, job_id: str, at: datetime) -> Expected[JobStamp]:
        """The job's stamp as read at `at` (InstantReads.expect): for a run claimed ahead of it."""
        return self._stamps_at.expect(job_id, at)

    def reread(self, job: Job, expected: Expected[JobStamp] | None, known: Known | None = None) -> Job | None:
        """The job as it is now: the copy read before, unless its status, schedule version or time of
        last change differ (or it is gone)."""
        if expected is not None:
            stamp = expected.get()
        elif known is not None and known.stamps is not None:
            stamp = known.stamps.get(job.id)
        else:
            stamp = self._stamps.get(job.id)
        if stamp == JobStamp.of(job):
            return job
        return self._jobs.get(job.id)

    def _read_executions(
        self, refs: Iterable[ExecutionRef]
    ) -> tuple[dict[ExecutionRef, Execution], dict[ExecutionRef, str]]:
        return self._store.executions.get_many(refs)

    def _read_stamps(self, job_ids: Iterable[str]) -> tuple[dict[str, JobStamp], dict[str, str]]:
        """Whether jobs changed (status, schedule version, time of last change)."""
        return self._store.jobs.stamps(job_ids)
