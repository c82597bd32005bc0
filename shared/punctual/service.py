"""What the API does, as plain domain operations: no HTTP, no Lambda events."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from punctual import pausing, tasks
from punctual.clock import Clock
from punctual.dispatch import Dispatcher
from punctual.errors import Conflict, InvalidRequest, LostRace, NotFound
from punctual.handoff import HandOff
from punctual.models import (
    NO_VERSION,
    DueMarker,
    Execution,
    ExecutionStatus,
    Job,
    JobPolicy,
    JobStatus,
    NotifyRule,
    RetryPolicy,
    TaskRef,
    TaskSpec,
    anchor_for,
    check_policy,
    first_run,
    manual_execution_id,
    marker_for,
    new_version,
    scheduled_at_of,
)
from punctual.notify import NotifyPolicy, check_rules
from punctual.observability import JOBS_CREATED, metrics
from punctual.schedules import (
    PAST_TOLERANCE,
    AtSchedule,
    CronBoundExceeded,
    _Schedule,
    absolute,
    is_recurring,
    preview,
)
from punctual.signing import SigningKeys
from punctual.store import DEFAULT_TIMEOUT_SECONDS, Page, Store

if TYPE_CHECKING:
    from punctual.named_tasks import TaskService

# A request that claimed an Idempotency-Key this recently may still be storing its jobs (API Gateway
# gives up on it after 29 s): a retry meanwhile is told to wait, not that its jobs cannot be created.
REQUEST_IN_PROGRESS = timedelta(seconds=30)


@dataclass(frozen=True)
class NewJob:
    task: TaskSpec | TaskRef
    schedule: _Schedule
    name: str | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    policy: JobPolicy | None = None
    tags: dict[str, str] | None = None
    notify: tuple[NotifyRule, ...] = ()
    signing_secret: str | None = None


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


@dataclass(frozen=True)
class JobChanges:
    """A PATCH: fields left as None (`signing_secret`: UNCHANGED) are not changed."""

    name: str | None = None
    # A new task: inline, or a named task's name (its parameters in `params`).
    task: TaskSpec | str | None = None
    # A job with a named task: its new parameters (alone: the same task with these).
    params: dict[str, Any] | None = None
    schedule: _Schedule | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    policy: JobPolicy | None = None
    tags: dict[str, str] | None = None
    notify: tuple[NotifyRule, ...] | None = None
    # A new secret (the current one stays valid beside it for a while), None to sign nothing.
    signing_secret: str | _Unchanged | None = UNCHANGED


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
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        self._handoff = HandOff(store, dispatcher, clock)
        self._task_policy = task_policy or tasks.TaskPolicy()
        self._named_tasks = named_tasks
        self._notify_policy = notify_policy or NotifyPolicy()

    # --------------------------------------------------------------- create
    def create(self, owner: str, new: NewJob, idempotency_key: str | None = None) -> tuple[Job, bool]:
        """Create a job; returns it and whether it is new (False: an idempotent repeat)."""
        now = self._clock.now()
        try:
            job = self._new_job(owner, new, now, _new_id("job"))
        except InvalidRequest as refused:
            return self._replay(owner, idempotency_key, _fingerprint(new), refused)[0], False
        if idempotency_key is not None:
            fingerprint = _fingerprint(new)
            seen = self._store.idempotency.claim(owner, idempotency_key, fingerprint, [job.id], now)
            if seen is not None:
                if seen.fingerprint != fingerprint or len(seen.job_ids) != 1:
                    raise Conflict("Idempotency-Key was already used with a different request body")
                existing = self._store.jobs.get_with_last_execution(seen.job_ids[0])
                if existing is not None:
                    return existing, False
                job = _reissued(job, seen.job_ids[0])  # the first attempt failed before storing it
        stored, marker = self._store_one(job)
        if marker is not None:
            metrics.add_metric(name=JOBS_CREATED, unit="Count", value=1)
            self._handoff.enqueue(marker, new_jobs=[stored])
        return stored, marker is not None

    def create_many(
        self, owner: str, news: Sequence[NewJob], idempotency_key: str | None = None
    ) -> tuple[list[Job], bool]:
        """Create jobs in one go, all or none validated; returns them in order and whether they are new.

        Every job is validated before anything is written: an invalid one is refused (its field named
        `jobs[i].<field>`) and nothing is stored. Then all markers are filed, then all jobs stored
        (BatchWriteItem both): a failure part way leaves markers without jobs, which the scanner drops,
        never a job without its marker. With an Idempotency-Key, a retry of a batch that failed part way
        returns the jobs that were stored and creates the others.
        """
        now = self._clock.now()
        jobs: list[Job] = []
        named: dict[str, Any] = {}  # the named tasks read for this batch
        for i, new in enumerate(news):
            try:
                jobs.append(self._new_job(owner, new, now, _new_id("job"), named))
            except InvalidRequest as exc:
                field = f"jobs[{i}].{exc.field}" if exc.field else f"jobs[{i}]"
                message = str(exc).removeprefix(f"{exc.field}: ") if exc.field else str(exc)
                refused = InvalidRequest(f"{field}: {message}", field=field)
                return self._replay(owner, idempotency_key, _batch_fingerprint(news), refused), False
        if idempotency_key is not None:
            fingerprint = _batch_fingerprint(news)
            ids = [job.id for job in jobs]
            seen = self._store.idempotency.claim(owner, idempotency_key, fingerprint, ids, now)
            if seen is not None:
                if seen.fingerprint != fingerprint or len(seen.job_ids) != len(jobs):
                    raise Conflict("Idempotency-Key was already used with a different request body")
                return self._finish_batch(owner, jobs, seen.job_ids), False
        markers = self._handoff.file(*[_first_marker(job) for job in jobs])
        self._store.jobs.put_new_many(jobs)
        metrics.add_metric(name=JOBS_CREATED, unit="Count", value=len(jobs))
        self._handoff.enqueue(*markers)
        return jobs, True

    def _replay(self, owner: str, key: str | None, fingerprint: str, refused: InvalidRequest) -> list[Job]:
        """A request that validation now refuses (its instant has passed since, say) but that was taken
        earlier under the same Idempotency-Key and body: answered with the jobs it created, as it was
        then. Raises `refused` if there was no such request, and Conflict if it stored only some of its
        jobs (it failed part way, or is still running): the rest cannot be created now."""
        now = self._clock.now()
        seen = None if key is None else self._store.idempotency.get(owner, key, now)
        if seen is None or seen.fingerprint != fingerprint:
            raise refused
        found = self._store.jobs.get_many(seen.job_ids).readable()
        jobs = [found[job_id] for job_id in seen.job_ids if job_id in found and found[job_id].owner == owner]
        if len(jobs) < len(seen.job_ids) and now - seen.claimed_at < REQUEST_IN_PROGRESS:
            raise Conflict(
                "a request with this Idempotency-Key is still in progress (taken "
                f"{(now - seen.claimed_at).total_seconds():.0f} s ago): retry in a few seconds"
            ) from None
        if len(jobs) < len(seen.job_ids):
            raise Conflict(
                f"the request first made with this Idempotency-Key stored {len(jobs)} of its "
                f"{len(seen.job_ids)} jobs (it failed part way, or is still running), and the rest cannot be "
                f"created now: {refused}"
            ) from None
        return self._store.jobs.with_last_executions(jobs)

    def _finish_batch(self, owner: str, drafts: list[Job], ids: list[str]) -> list[Job]:
        """A repeated batch: the jobs the first attempt stored, and the others created now under the ids
        it claimed (one by one: this only follows a failure)."""
        existing = self._store.jobs.get_many(ids).readable()
        if any(job.owner != owner for job in existing.values()):
            raise Conflict("Idempotency-Key was already used with a different request body")
        jobs: list[Job] = []
        for draft, job_id in zip(drafts, ids, strict=True):
            job = existing.get(job_id)
            if job is None:
                job, marker = self._store_one(_reissued(draft, job_id))
                if marker is not None:
                    metrics.add_metric(name=JOBS_CREATED, unit="Count", value=1)
                    self._handoff.enqueue(marker)
            jobs.append(job)
        return self._store.jobs.with_last_executions(jobs)

    def _checked_task(
        self, owner: str, task: TaskSpec | TaskRef, seen: dict[str, Any] | None = None
    ) -> TaskSpec | TaskRef:
        """A job's task, validated: inline, or a reference to one of the owner's named tasks."""
        if isinstance(task, TaskRef):
            if self._named_tasks is None:
                raise InvalidRequest("task: named tasks are not available here", field="task")
            return self._named_tasks.check_job_task(owner, task, seen=seen)
        return tasks.validate(task, self._task_policy)

    def _new_job(
        self, owner: str, new: NewJob, now: datetime, job_id: str, seen: dict[str, Any] | None = None
    ) -> Job:
        """A validated new job (not stored). Raises InvalidRequest naming the field."""
        task = self._checked_task(owner, new.task, seen)
        # A job with a named task takes the task's retry and timeout unless it gives its own.
        inherits = frozenset(
            name
            for name, given in (("retry", new.retry), ("timeout_seconds", new.timeout_seconds))
            if isinstance(task, TaskRef) and given is None
        )
        schedule = absolute(new.schedule, now)
        self._check_not_past(schedule, now)
        policy = new.policy or JobPolicy()
        _check_policy(policy, schedule)
        notify = check_rules(new.notify, self._notify_policy)
        anchor = anchor_for(schedule, now)
        with _bounded():
            runs_at = first_run(schedule, now, anchor, job_id, policy.flexible_window_seconds)
        if runs_at is None:
            raise InvalidRequest("schedule has no run time in the future", field="schedule")
        return Job(
            id=job_id,
            owner=owner,
            name=new.name or job_id,
            status=JobStatus.ACTIVE,
            task=task,
            schedule=schedule,
            retry=new.retry or RetryPolicy(),
            timeout_seconds=new.timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
            created_at=now,
            updated_at=now,
            next_run_at=runs_at,
            anchor_at=anchor,
            policy=policy,
            tags=dict(new.tags or {}),
            inherits=inherits,
            notify=notify,
            signing=None if new.signing_secret is None else SigningKeys(current=new.signing_secret),
        )

    def _store_one(self, job: Job) -> tuple[Job, DueMarker | None]:
        """Store a new job with its marker; returns the stored job and, if this call stored it, the
        marker it filed (None: a concurrent retry stored it first)."""
        # The marker goes first: a job stored without its marker would never run, while a marker
        # without its job is dropped harmlessly by the scanner.
        marker = self._file(_first_marker(job))
        try:
            self._store.jobs.put_new(job)
        except LostRace:
            # A concurrent retry with the same idempotency key stored the job first, with its own
            # marker: withdraw ours so the job runs once.
            self._store.markers.delete_many([marker])
            existing = self._store.jobs.get(job.id)
            if existing is None or existing.owner != job.owner:
                raise
            return existing, None
        return job, marker

    # ----------------------------------------------------------------- read
    def get(self, owner: str, job_id: str) -> Job:
        """The caller's job, with its last execution (read with it)."""
        return _owned(self._store.jobs.get_with_last_execution(job_id), owner, job_id)

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
    ) -> Page:
        """A page of the owner's jobs, newest first, with their last executions (those their outcomes
        name): by status, tag, outcome and name prefix (filters on the owner's list, bounded reads a
        page), or the ACTIVE and PAUSED jobs using a named task (its index). None read per job."""
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
            page = Page(jobs, ids.last_key)
        else:
            page = self._store.jobs.page(
                owner, status, limit, start_key, tag=tag, outcome=outcome, name_prefix=name_prefix
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
    ) -> Page:
        _owned(self._store.jobs.get(job_id), owner, job_id)  # the page reads the executions itself
        if since is not None and until is not None and until <= since:
            raise InvalidRequest("until: must be after since", field="until")
        return self._store.executions.page(job_id, limit, start_key, status=status, since=since, until=until)

    def preview(self, schedule: _Schedule, count: int) -> list[datetime]:
        now = self._clock.now()
        schedule = absolute(schedule, now)
        self._check_not_past(schedule, now)
        anchor = anchor_for(schedule, now)
        with _bounded():
            if is_recurring(schedule):
                return preview(schedule, now, count, anchor)
            first = first_run(schedule, now, anchor)
        return [] if first is None else [first]

    # --------------------------------------------------------------- change
    def update(self, owner: str, job_id: str, changes: JobChanges) -> Job:
        job = self.get(owner, job_id)
        if job.status is JobStatus.CANCELLED:
            raise Conflict("job is CANCELLED and cannot be changed")
        now = self._clock.now()
        fields: dict[str, Any] = {"updated_at": now}
        if changes.name is not None:
            fields["name"] = changes.name
        if changes.task is not None or changes.params is not None:
            fields.update(self._task_change(owner, job, changes))
        elif changes.schedule is not None and isinstance(job.task, TaskRef):
            # A new schedule may revive a COMPLETED job: its named task must still be there and
            # take its parameters.
            self._checked_task(owner, job.task)
        if changes.tags is not None:
            fields["tags"] = changes.tags
        if changes.retry is not None:
            fields["retry"] = changes.retry
        if changes.timeout_seconds is not None:
            fields["timeout_seconds"] = changes.timeout_seconds
        if changes.notify is not None:
            fields["notify"] = check_rules(changes.notify, self._notify_policy)
        if not isinstance(changes.signing_secret, _Unchanged):
            new_secret = changes.signing_secret
            fields["signing"] = (
                None
                if new_secret is None
                else SigningKeys(current=new_secret)
                if job.signing is None
                else job.signing.rotated(new_secret, now)
            )
        policy = changes.policy or job.policy
        _check_policy(policy, changes.schedule or job.schedule)
        if changes.policy is not None:
            # (takes effect from the next run filed: the one filed already keeps its instant)
            fields["policy"] = None if policy.is_default else policy
        marker: DueMarker | None = None
        schedule = None if changes.schedule is None else absolute(changes.schedule, now)
        if schedule is not None:
            self._check_not_past(schedule, now)
            anchor = anchor_for(schedule, now)
            with _bounded():
                runs_at = first_run(schedule, now, anchor, job.id, policy.flexible_window_seconds)
            if runs_at is None:
                raise InvalidRequest("schedule has no run time in the future", field="schedule")
            version = _new_version()
            status = job.status if job.status is JobStatus.PAUSED else JobStatus.ACTIVE
            fields.update(
                schedule=schedule,
                anchor_at=anchor,
                schedule_version=version,
                final_execution_id=None,
                queued_run_at=None,
                # A new schedule is a new run to come, whatever ran before it: no version's run counts.
                paused_version=NO_VERSION if status is JobStatus.PAUSED else None,
                ran_at=None,
                next_run_at=runs_at if status is JobStatus.ACTIVE else None,
                status=status,
            )
            if status is JobStatus.ACTIVE:
                marker = self._file(marker_for(job.id, runs_at, version))
        updated = self._write(job, fields, withdraw=marker)
        if marker is not None:
            self._handoff.enqueue(marker)
        return updated

    def _task_change(self, owner: str, job: Job, changes: JobChanges) -> dict[str, Any]:
        """The fields a PATCH of a job's task (or of a named task's parameters) sets."""
        task: TaskSpec | TaskRef
        if changes.task is None:
            if not isinstance(job.task, TaskRef):
                raise InvalidRequest(
                    "params: only a job with a named task takes params; change task.params instead",
                    field="params",
                )
            task = TaskRef(name=job.task.name, params=changes.params or {})
        elif isinstance(changes.task, str):
            task = TaskRef(name=changes.task, params=changes.params or {})
        else:
            if changes.params is not None:
                raise InvalidRequest(
                    "params: an inline task takes its parameters in task.params", field="params"
                )
            task = changes.task
        fields: dict[str, Any] = {"task": self._checked_task(owner, task)}
        named_before, named_now = isinstance(job.task, TaskRef), isinstance(task, TaskRef)
        # Moving to a named task without a retry or timeout of the job's own takes the task's; moving
        # to an inline task keeps the defaults where the job took the task's.
        if named_now and not named_before:
            fields.update(
                {
                    name: None
                    for name, given in (
                        ("retry", changes.retry),
                        ("timeout_seconds", changes.timeout_seconds),
                    )
                    if given is None
                }
            )
        if named_before and not named_now:
            if changes.retry is None and "retry" in job.inherits:
                fields["retry"] = RetryPolicy()
            if changes.timeout_seconds is None and "timeout_seconds" in job.inherits:
                fields["timeout_seconds"] = DEFAULT_TIMEOUT_SECONDS
        return fields

    def cancel(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        job = self.get(owner, job_id)
        if job.status is JobStatus.CANCELLED:
            return job
        try:
            return self._write(
                job,
                {
                    "status": JobStatus.CANCELLED,
                    "next_run_at": None,
                    "queued_run_at": None,
                    "schedule_version": _new_version(),
                    "updated_at": self._clock.now(),
                },
            )
        except Conflict:
            # The job changed between the read and the write: a run ended (completing a one-time job,
            # or moving a recurring one on), or another request changed it. A job in any status can
            # be cancelled, so the caller's intent still holds: read it again and cancel that.
            if attempts <= 1:
                raise
            return self.cancel(owner, job_id, attempts=attempts - 1)

    def pause(self, owner: str, job_id: str, note: str | None = None) -> Job:
        """Pause the job, noting why (`note`); pausing a PAUSED job again only changes its note."""
        job = self.get(owner, job_id)
        now = self._clock.now()
        if job.status is JobStatus.PAUSED:
            if note is None or note == job.pause_note:
                return job
            return self._write(job, {"pause_note": note, "updated_at": now})
        if job.status is not JobStatus.ACTIVE:
            raise Conflict(f"job is {job.status.value}; only an ACTIVE job can be paused")
        return self._write(job, pausing.pause_changes(job, now, note))

    def resume(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        job = self.get(owner, job_id)
        if job.status is JobStatus.ACTIVE:
            return job
        if job.status is not JobStatus.PAUSED:
            raise Conflict(f"job is {job.status.value}; only a PAUSED job can be resumed")
        now = self._clock.now()
        # A one-time job's run from before the pause (read after the job, consistently): one still
        # under way goes on, and one that ended is the job's run.
        run = pausing.run_before_pause(self._store, job)
        if run is not None and run.status.under_way:
            # The job takes back that run's version, so that the run goes on (its retries too) and
            # completes the job when it ends. Only while the run is still under way: one that ends
            # or is skipped meanwhile makes this write fail, and the decision is taken again.
            try:
                resumed = self._store.jobs.resume_with_run(job, run, now)
            except LostRace:
                if attempts <= 1:
                    raise Conflict(
                        "the job changed while this request ran; read it again and retry"
                    ) from None
                return self.resume(owner, job_id, attempts=attempts - 1)
            return replace(resumed, last_execution=job.last_execution)
        ran = run is not None and run.status.ran_to_end
        version = _new_version()
        # Occurrences missed while paused are not run: the schedule picks up from now. A one-time job
        # whose instant passed while it was paused has nothing left to run.
        with _bounded():
            runs_at = (
                first_run(job.schedule, now, job.anchor_at, job.id, job.policy.flexible_window_seconds)
                if job.recurring
                else pausing.resumed_one_time_run(job, now, ran=ran)
            )
        marker = None
        if runs_at is not None:
            marker = self._file(marker_for(job.id, runs_at, version))
        updated = self._write(
            job,
            {
                "status": JobStatus.ACTIVE if runs_at is not None else JobStatus.COMPLETED,
                "next_run_at": runs_at,
                "schedule_version": version,
                "paused_version": None,
                "ran_at": None,
                "pause_note": None,
                "paused_at": None,
                "updated_at": now,
            },
            withdraw=marker,
        )
        if marker is not None:
            self._handoff.enqueue(marker)
        return updated

    def pause_tagged(
        self, owner: str, tag: tuple[str, str | None], limit: int, start_key: dict[str, Any] | None
    ) -> BulkChange:
        """Pause the owner's ACTIVE jobs with this tag, one page at a time (at most `limit` jobs, and
        the list's read budget): each through `pause`, as a single request would."""
        return self._bulk(owner, JobStatus.ACTIVE, tag, limit, start_key, self.pause)

    def resume_tagged(
        self, owner: str, tag: tuple[str, str | None], limit: int, start_key: dict[str, Any] | None
    ) -> BulkChange:
        """Resume the owner's PAUSED jobs with this tag, a page at a time, each through `resume`."""
        return self._bulk(owner, JobStatus.PAUSED, tag, limit, start_key, self.resume)

    def _bulk(
        self,
        owner: str,
        status: JobStatus,
        tag: tuple[str, str | None],
        limit: int,
        start_key: dict[str, Any] | None,
        change: Any,
    ) -> BulkChange:
        page = self._store.jobs.page(owner, status, limit, start_key, tag=tag)
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
        return self._run_extra(self.get(owner, job_id))

    def retry(self, owner: str, job_id: str, execution_id: str) -> Execution:
        """Run a finished execution that did not succeed (FAILED, SKIPPED or CANCELLED) once more, now:
        a new extra execution of the job's current task, which names it (`retry_of`). A new id, not the
        same execution again: receivers that de-duplicate on the execution id would drop a repeat."""
        job = self.get(owner, job_id)
        scheduled_at = scheduled_at_of(job.id, execution_id)
        original = (
            None if scheduled_at is None else self._store.executions.get(job.id, scheduled_at, execution_id)
        )
        if original is None:
            raise NotFound(f"execution {execution_id!r} of job {job_id!r} not found")
        if not original.status.is_final:
            raise Conflict(f"execution is {original.status.value}; only a finished execution can be retried")
        if original.status is ExecutionStatus.SUCCEEDED:
            raise Conflict("execution SUCCEEDED; run the job again instead (POST /jobs/{id}/run)")
        return self._run_extra(job, retry_of=original.id)

    def _run_extra(self, job: Job, retry_of: str | None = None) -> Execution:
        if job.status is JobStatus.PAUSED:
            raise Conflict("job is PAUSED; resume it to run it")
        if job.status is JobStatus.CANCELLED:
            raise Conflict("job is CANCELLED and cannot run again; create a new job")
        now = self._clock.now()
        queued = Execution(
            id=manual_execution_id(job.id, now, secrets.token_hex(4)),
            job_id=job.id,
            owner=job.owner,
            scheduled_at=now,
            status=ExecutionStatus.QUEUED,
            schedule_version=job.schedule_version,
            manual=True,
            created_at=now,
            retry_of=retry_of,
        )
        if retry_of is not None:
            # Stored before its marker, with what it retries: the dispatch leaves a stored one as it is.
            self._store.executions.put_if_absent(queued)
        marker = self._file(
            DueMarker(
                job_id=job.id,
                execution_id=queued.id,
                scheduled_at=now,
                schedule_version=job.schedule_version,
                manual=True,
            )
        )
        self._handoff.enqueue(marker)
        execution = self._store.executions.get(job.id, now, marker.execution_id)
        return execution or replace(queued, status=ExecutionStatus.PENDING)

    # -------------------------------------------------------------- helpers
    def _write(self, job: Job, fields: dict[str, Any], withdraw: DueMarker | None = None) -> Job:
        """Apply a change if the job is still as read; otherwise 409, withdrawing the marker filed for it
        (its version is unique, so even if it stayed it would be skipped as superseded)."""
        try:
            updated = self._store.jobs.update(
                job, fields, allowed_statuses=[job.status], schedule_version=job.schedule_version
            )
            # Its last execution as read before the change: one ending meanwhile shows on the next read.
            return replace(updated, last_execution=job.last_execution)
        except LostRace:
            if withdraw is not None:
                self._store.markers.delete_many([withdraw])
            raise Conflict("the job changed while this request ran; read it again and retry") from None

    def _file(self, marker: DueMarker) -> DueMarker:
        """File a marker, claimed for this request to enqueue if due before the next tick (handoff.py)."""
        [filed] = self._handoff.file(marker)
        return filed

    def _check_not_past(self, schedule: _Schedule, now: datetime) -> None:
        if isinstance(schedule, AtSchedule) and schedule.at < now - PAST_TOLERANCE:
            raise InvalidRequest("schedule.at is in the past", field="schedule.at")
        end_at = getattr(schedule, "end_at", None)
        if end_at is not None and end_at <= now:
            raise InvalidRequest("schedule.end_at is in the past", field="schedule.end_at")


def _check_policy(policy: JobPolicy, schedule: _Schedule) -> None:
    try:
        check_policy(policy, schedule)
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise InvalidRequest(str(exc), field=field) from None


@contextmanager
def _bounded() -> Iterator[None]:
    """A schedule whose runs cannot be found within the computation's bound is refused, by field."""
    try:
        yield
    except CronBoundExceeded as exc:
        raise InvalidRequest(
            f"schedule.expression: {exc} (within its bound); choose a schedule that runs more often",
            field="schedule.expression",
        ) from None


def _owned(job: Job | None, owner: str, job_id: str) -> Job:
    """The job, if it is the owner's; another owner's job is as missing as one that does not exist."""
    if job is None or job.owner != owner:
        raise NotFound(f"job {job_id!r} not found")
    return job


_new_version = new_version


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def _reissued(draft: Job, job_id: str) -> Job:
    """A new job under the id a failed first attempt claimed, to finish that attempt. Its schedule
    version is new, so that a marker the first attempt filed is dropped as superseded: the job runs once.
    """
    name = job_id if draft.name == draft.id else draft.name  # the default name is the id
    return replace(draft, id=job_id, name=name, schedule_version=_new_version())


def _first_marker(job: Job) -> DueMarker:
    assert job.next_run_at is not None, "a new job has a first run"
    return marker_for(job.id, job.next_run_at, job.schedule_version)


def _body(new: NewJob) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": new.task.model_dump(mode="json"),
        "schedule": new.schedule.model_dump(mode="json"),
        "name": new.name,
        "retry": None if new.retry is None else new.retry.model_dump(mode="json"),
        "timeout_seconds": new.timeout_seconds,
    }
    if new.tags is not None:  # (likewise)
        body["tags"] = dict(sorted(new.tags.items()))
    if new.policy is not None:  # (absent otherwise: a retry across an upgrade matches its stored fingerprint)
        body["policy"] = new.policy.model_dump(mode="json")
    if new.notify:
        body["notify"] = [rule.model_dump(mode="json") for rule in new.notify]
    if new.signing_secret is not None:  # (hashed with the rest: the fingerprint never shows it)
        body["signing_secret"] = new.signing_secret
    return body


def _fingerprint(new: NewJob) -> str:
    return hashlib.sha256(json.dumps(_body(new), sort_keys=True).encode()).hexdigest()


def _batch_fingerprint(news: Sequence[NewJob]) -> str:
    """Of the whole batch, in order; never equal to a single job's (the same key on both is a 409)."""
    body = {"jobs": [_body(new) for new in news]}
    return "batch:" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
