"""Ports for jobs, idempotency keys and named tasks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStamp, JobStatus
from punctual.domain.named_tasks import NamedTask
from punctual.platform.observability import logger
from punctual.ports.pages import Page


class JobsRead(NamedTuple):
    """Jobs by id, and apart the ids of items that exist but cannot be read (e.g. a time zone this
    runtime's tzdata no longer has), with the reason."""

    found: dict[str, Job]
    unreadable: dict[str, str]

    def readable(self) -> dict[str, Job]:
        """The jobs found, the unreadable ones logged as errors."""
        for job_id, error in self.unreadable.items():
            logger.error("job item cannot be read", extra={"job_id": job_id, "error": error})
        return self.found


class JobStore(Protocol):
    """Jobs: read by id, listed, stored, changed while in the status and version read."""

    def get(self, job_id: str, owner: str | None = None) -> Job | None: ...

    def get_many(self, job_ids: Iterable[str], *, consistent: bool = True, ends: bool = True) -> JobsRead:
        """Jobs by id; `consistent=False`: an eventually consistent read, at half the read units,
        which may miss a write of the last second or so. `ends=False`: a batch's job's run that ended in
        its batch's ends item is not looked for (a read less; the job reads as not yet run)."""
        ...

    def stamps(self, job_ids: Iterable[str]) -> tuple[dict[str, JobStamp], dict[str, str]]: ...

    @staticmethod
    def completed_bytes(job: Job | None) -> int | None:
        """For a one-time job's run under its pack's lease: its item's size once completed, less the
        run (None: the run is not to go on it)."""
        ...

    def page(
        self,
        owner: str,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        tag: tuple[str, str | None] | None = None,
        *,
        outcome: ExecutionStatus | None = None,
        name_prefix: str | None = None,
        now: datetime | None = None,
        size: Callable[[Job], int] | None = None,
    ) -> Page: ...

    def with_outcome_executions(self, jobs: Sequence[Job]) -> list[Job]: ...

    def get_with_last_execution(self, job_id: str, owner: str | None = None) -> Job | None: ...

    def with_last_executions(self, jobs: Sequence[Job]) -> list[Job]: ...

    def put_new(self, job: Job) -> None: ...

    def put_new_many(self, jobs: Sequence[Job]) -> None: ...

    def update(
        self,
        job: Job,
        changes: dict[str, Any],
        *,
        allowed_statuses: Iterable[JobStatus] | None = None,
        schedule_version: int | None = None,
        next_run_before: datetime | None = None,
        revision: int | None = None,
        revise: bool = False,
    ) -> Job: ...

    def complete(self, job: Job, execution: Execution) -> int | None: ...

    def record_outcome(self, execution: Execution) -> int | None: ...

    def note_ran_while_paused(self, job: Job, execution: Execution, finished: datetime) -> bool: ...

    def resume_with_run(self, job: Job, run: Execution, now: datetime, *, stored: bool = True) -> Job:
        """`stored`: the run has an item of its own (else: while nothing of it is stored)."""
        ...


@dataclass(frozen=True)
class IdempotencyRecord:
    """What a key was first used with: the request's fingerprint, the jobs it creates, and when."""

    fingerprint: str
    job_ids: list[str]
    claimed_at: datetime


class IdempotencyStore(Protocol):
    """Idempotency keys: claimed by the first request that uses one, read back by its retries."""

    def claim(
        self, owner: str, key: str, fingerprint: str, job_ids: Sequence[str], now: datetime
    ) -> IdempotencyRecord | None: ...

    def get(self, owner: str, key: str, now: datetime) -> IdempotencyRecord | None: ...


class TaskStore(Protocol):
    """An owner's named tasks, changed only at the version read, and the jobs that use one."""

    def put_new(self, task: NamedTask) -> None: ...

    def get(self, owner: str, name: str, *, consistent: bool = True) -> NamedTask | None: ...

    def page(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page: ...

    @staticmethod
    def key_after(task: NamedTask) -> dict[str, str]: ...

    def replace(self, task: NamedTask, expected_version: int) -> NamedTask: ...

    def delete(self, task: NamedTask) -> None: ...

    def count_jobs_using(self, owner: str, name: str, at_most: int) -> int: ...

    def job_ids_using(self, owner: str, name: str, limit: int, start_key: dict[str, Any] | None) -> Page: ...

    @staticmethod
    def key_after_job(owner: str, name: str, job: Job) -> dict[str, str]: ...


class BatchEndStore(Protocol):
    """A batch's runs' ends at one instant, in one item (store/batch_ends.py)."""

    def write(self, batch_id: str, instant: datetime, owner: str, ends: Mapping[str, Execution]) -> set[str]:
        """These runs' ends (by job id) in one write; returns the jobs a change marked (not written)."""
        ...

    def mark_moved(self, job: Job) -> None:
        """Before a change to a job whose run may end in its batch's ends item; LostRace if it has."""
        ...
