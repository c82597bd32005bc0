"""What the API does, as plain domain operations: no HTTP, no Lambda events.

`JobService` is the one entry point the API routes call. It answers reads itself (a job, lists,
executions, a schedule's preview) and the bulk changes by tag, and hands creation to
`punctual.jobs.creation` and changes to existing jobs to `punctual.jobs.changes`; the request types
those take are re-exported here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from punctual import tasks
from punctual.domain.errors import Conflict, InvalidRequest, NotFound
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus, anchor_for, first_run, job_as_seen
from punctual.domain.schedules import _Schedule, absolute, is_recurring, preview
from punctual.jobs.changes import JobChanges, JobLifecycle
from punctual.jobs.checks import TaskChecker, bounded, check_not_past
from punctual.jobs.creation import JobCreation, NewJob
from punctual.notify.messages import NotifyPolicy
from punctual.platform.clock import Clock
from punctual.ports.pages import Page, within_bytes
from punctual.ports.store import Store
from punctual.scheduling.dispatch import Dispatcher
from punctual.scheduling.handoff import HandOff

if TYPE_CHECKING:
    from punctual.jobs.named_tasks import TaskService


@dataclass(frozen=True)
class BulkChange:
    """What a pause or resume by tag did to one page of the owner's jobs."""

    changed: list[Job]
    failed: list[tuple[str, str]]  # (job id, why)
    last_key: dict[str, Any] | None


class JobService:
    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        clock: Clock,
        *,
        task_policy: tasks.TaskPolicy | None = None,
        named_tasks: TaskService | None = None,
        notify_policy: NotifyPolicy | None = None,
        handoff_claim: timedelta | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._named_tasks = named_tasks
        handoff = HandOff(store, dispatcher, clock, handoff_claim)
        checker = TaskChecker(task_policy or tasks.TaskPolicy(), named_tasks)
        policy = notify_policy or NotifyPolicy()
        self._creation = JobCreation(store, handoff, clock, checker, policy)
        # (changes are decided on the job as stored, not as shown: `get`)
        self._lifecycle = JobLifecycle(
            store, handoff, clock, _StoredJobs(store), checker, policy, sent_ahead=dispatcher.sends_ahead
        )

    # --------------------------------------------------------------- create
    def create(self, owner: str, new: NewJob, idempotency_key: str | None = None) -> tuple[Job, bool]:
        """Create a job; returns it and whether it is new (False: an idempotent repeat)."""
        return self._creation.create(owner, new, idempotency_key)

    def create_many(
        self,
        owner: str,
        news: Sequence[NewJob],
        idempotency_key: str | None = None,
        within: Callable[[Sequence[Job]], None] | None = None,
    ) -> tuple[list[Job], bool]:
        """Create jobs in one go, all or none validated; returns them in order and whether they are new
        (`JobCreation.create_many` says how a failure part way is left, and what `within` may refuse)."""
        return self._creation.create_many(owner, news, idempotency_key, within)

    # ----------------------------------------------------------------- read
    def get(self, owner: str, job_id: str) -> Job:
        """The caller's job, with its last execution (read with it), as users see it
        (`models.job_as_seen`: a run that has just ended shows on the job too)."""
        return job_as_seen(_StoredJobs(self._store).get(owner, job_id))

    def list_jobs(
        self,
        owner: str,
        status: JobStatus | None,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        tag: tuple[str, str | None] | None = None,
        task: str | None = None,
        outcome: ExecutionStatus | None = None,
        name_prefix: str | None = None,
        size: Callable[[Job], int] | None = None,
    ) -> Page:
        """A page of the owner's jobs, newest first, with their last executions (those their outcomes
        name): by status, tag, outcome and name prefix (filters on the owner's list, bounded reads a
        page), or the ACTIVE and PAUSED jobs using a named task (its index). None read per job. With
        `size` (a job's bytes in the answer), the page ends early once it holds PAGE_BYTES."""
        if task is not None:
            if status is not None or tag is not None or outcome is not None or name_prefix is not None:
                raise InvalidRequest(
                    "task: lists the jobs using a task; give no status, tag, outcome or name prefix with it",
                    field="task",
                )
            if self._named_tasks is None:
                raise InvalidRequest("task: named tasks are not available here", field="task")
            ids = self._named_tasks.jobs_using(owner, task, limit, start_key)
            found = self._store.jobs.get_many(ids.items).readable()
            jobs = [found[i] for i in ids.items if i in found and found[i].owner == owner]
            page = within_bytes(
                Page(jobs, ids.last_key), size, lambda job: self._store.tasks.key_after_job(owner, task, job)
            )
        else:
            page = self._store.jobs.page(
                owner,
                status,
                limit,
                start_key,
                tag=tag,
                outcome=outcome,
                name_prefix=name_prefix,
                now=self._clock.now(),  # (how old a tag entry of a job gone must be to be deleted)
                size=size,
            )
        return replace(page, items=self._store.jobs.with_outcome_executions(page.items))

    def executions(
        self,
        owner: str,
        job_id: str,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        status: ExecutionStatus | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        size: Callable[[Execution], int] | None = None,
    ) -> Page:
        """`size` (an execution's bytes in the answer): the page ends early once it holds PAGE_BYTES."""
        _owned(self._store.jobs.get(job_id, owner), owner, job_id)  # the page reads the executions itself
        if since is not None and until is not None and until <= since:
            raise InvalidRequest("until: must be after since", field="until")
        return self._store.executions.page(
            job_id,
            limit,
            start_key,
            status=status,
            since=since,
            until=until,
            now=self._clock.now(),
            size=size,
        )

    def preview(self, schedule: _Schedule, count: int) -> list[datetime]:
        now = self._clock.now()
        schedule = absolute(schedule, now)
        check_not_past(schedule, now)
        anchor = anchor_for(schedule, now)
        with bounded():
            if is_recurring(schedule):
                return preview(schedule, now, count, anchor)
            first = first_run(schedule, now, anchor)
        return [] if first is None else [first]

    # --------------------------------------------------------------- change
    # (each answers the job as users see it, `get`: a run that ended as the change was made shows)
    def update(self, owner: str, job_id: str, changes: JobChanges) -> Job:
        return job_as_seen(self._lifecycle.update(owner, job_id, changes))

    def cancel(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        return job_as_seen(self._lifecycle.cancel(owner, job_id, attempts=attempts))

    def pause(self, owner: str, job_id: str, note: str | None = None) -> Job:
        """Pause the job, noting why (`note`); pausing a PAUSED job again only changes its note."""
        return job_as_seen(self._lifecycle.pause(owner, job_id, note))

    def resume(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        return job_as_seen(self._lifecycle.resume(owner, job_id, attempts=attempts))

    def pause_tagged(
        self,
        owner: str,
        tag: tuple[str, str | None],
        limit: int,
        start_key: dict[str, Any] | None,
        size: Callable[[Job], int] | None = None,
    ) -> BulkChange:
        """Pause the owner's ACTIVE jobs with this tag, one page at a time (at most `limit` jobs, and
        the list's read budget, and PAGE_BYTES given `size`, as a list): each through `pause`, as a
        single request would."""
        return self._bulk(owner, JobStatus.ACTIVE, tag, limit, start_key, self.pause, size)

    def resume_tagged(
        self,
        owner: str,
        tag: tuple[str, str | None],
        limit: int,
        start_key: dict[str, Any] | None,
        size: Callable[[Job], int] | None = None,
    ) -> BulkChange:
        """Resume the owner's PAUSED jobs with this tag, a page at a time, each through `resume`."""
        return self._bulk(owner, JobStatus.PAUSED, tag, limit, start_key, self.resume, size)

    def _bulk(
        self,
        owner: str,
        status: JobStatus,
        tag: tuple[str, str | None],
        limit: int,
        start_key: dict[str, Any] | None,
        change: Any,
        size: Callable[[Job], int] | None,
    ) -> BulkChange:
        page = self._store.jobs.page(
            owner, status, limit, start_key, tag=tag, now=self._clock.now(), size=size
        )
        changed: list[Job] = []
        failed: list[tuple[str, str]] = []
        for job in page.items:
            try:
                changed.append(change(owner, job.id))
            except (Conflict, NotFound, InvalidRequest) as exc:
                # (one job that changed meanwhile, or cannot resume, does not stop the others)
                failed.append((job.id, str(exc)))
        return BulkChange(changed, failed, page.last_key)

    def run_now(self, owner: str, job_id: str) -> Execution:
        return self._lifecycle.run_now(owner, job_id)

    def retry(self, owner: str, job_id: str, execution_id: str) -> Execution:
        """Run a finished execution that did not succeed (FAILED, SKIPPED or CANCELLED) once more, now,
        as a new extra execution that names it (`retry_of`)."""
        return self._lifecycle.retry(owner, job_id, execution_id)


class _StoredJobs:
    """The caller's job as stored, with its last execution: what changes to it are decided on."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, owner: str, job_id: str) -> Job:
        # (keyed by owner: another owner's job costs the same reads as an id that does not exist)
        return _owned(self._store.jobs.get_with_last_execution(job_id, owner), owner, job_id)


def _owned(job: Job | None, owner: str, job_id: str) -> Job:
    """The job, if it is the owner's; another owner's job is as missing as one that does not exist."""
    if job is None or job.owner != owner:
        raise NotFound(f"job {job_id!r} not found")
    return job
