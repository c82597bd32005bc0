"""Changing existing jobs: a PATCH, cancel, pause and resume, and extra runs (run now, retry of a
finished execution). Each reads the job, decides, and writes only if the job is still as read (a 409
otherwise, withdrawing any marker it filed). Apart from job creation (`punctual.jobs.creation`), whose
idempotency concerns it does not share; `JobService` delegates to it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from punctual.domain.errors import Conflict, InvalidRequest, LostRace, NotFound, PreconditionFailed
from punctual.domain.executions import Execution, ExecutionStatus, manual_execution_id, scheduled_at_of
from punctual.domain.models import (
    DEFAULT_TIMEOUT_SECONDS,
    NO_VERSION,
    DueMarker,
    Job,
    JobStatus,
    TaskRef,
    TaskSpec,
    anchor_for,
    dispatched_runs,
    ends_in_batch,
    first_run,
    in_flight,
    marker_for,
    new_version,
    runs_taken_back,
)
from punctual.domain.policies import JobPolicy, NotifyRule, RetryPolicy
from punctual.domain.schedules import _Schedule, absolute, is_recurring
from punctual.execution import pausing
from punctual.jobs.checks import (
    NO_RUN_TO_COME,
    TaskChecker,
    bounded,
    check_job_policy,
    check_not_past,
    file_one,
)
from punctual.notify.messages import NotifyPolicy, check_rules
from punctual.platform import randomness
from punctual.platform.clock import Clock
from punctual.platform.signing import SigningKeys
from punctual.ports.store import Store
from punctual.scheduling.handoff import HandOff


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


@dataclass(frozen=True)
class JobChanges:
    """A PATCH: fields left as None (`signing_secret`, `retry`, `timeout_seconds`: UNCHANGED) are
    not changed."""

    name: str | None = None
    # A new task: inline, or a named task's name (its parameters in `params`).
    task: TaskSpec | str | None = None
    # A job with a named task: its new parameters (alone: the same task with these).
    params: dict[str, Any] | None = None
    schedule: _Schedule | None = None
    # None: back to the default, the named task's for a job with one (UNCHANGED: left as it is).
    retry: RetryPolicy | _Unchanged | None = UNCHANGED
    timeout_seconds: int | _Unchanged | None = UNCHANGED
    policy: JobPolicy | None = None
    tags: dict[str, str] | None = None
    notify: tuple[NotifyRule, ...] | None = None
    # A new secret (the current one stays valid beside it for a while), None to sign nothing.
    signing_secret: str | _Unchanged | None = UNCHANGED
    # Made only if the job is still at this revision (If-Match: the one its caller read).
    if_revision: int | None = None


class JobReader(Protocol):
    def get(self, owner: str, job_id: str) -> Job: ...


class JobLifecycle:
    def __init__(
        self,
        store: Store,
        handoff: HandOff,
        clock: Clock,
        reader: JobReader,
        tasks: TaskChecker,
        notify_policy: NotifyPolicy,
        *,
        sent_ahead: timedelta,
    ) -> None:
        """`sent_ahead`: how far ahead of its instant a run's work message may be sent (a change to a
        job whose run is that close is recorded for its pack: `_write`)."""
        self._store = store
        self._sent_ahead = sent_ahead
        self._handoff = handoff
        self._clock = clock
        # Each change reads the job through the service (`JobService.get`), as a request would.
        self._reader = reader
        self._tasks = tasks
        self._notify_policy = notify_policy

    def update(self, owner: str, job_id: str, changes: JobChanges) -> Job:
        job = self._reader.get(owner, job_id)
        _still_at(job, changes.if_revision)
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
            self._tasks.check(owner, job.task)
        if changes.tags is not None:
            fields["tags"] = changes.tags
        named = isinstance(fields.get("task", job.task), TaskRef)
        for name, given, default in (
            ("retry", changes.retry, RetryPolicy()),
            ("timeout_seconds", changes.timeout_seconds, DEFAULT_TIMEOUT_SECONDS),
        ):
            if not isinstance(given, _Unchanged):
                # (None on the item: the job takes its named task's)
                fields[name] = given if given is not None else None if named else default
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
        check_job_policy(policy, changes.schedule or job.schedule)
        if changes.policy is not None:
            # (takes effect from the next run filed: the one filed already keeps its instant)
            fields["policy"] = None if policy.is_default else policy
        marker: DueMarker | None = None
        schedule = None if changes.schedule is None else absolute(changes.schedule, now)
        if schedule is not None:
            check_not_past(schedule, now)
            anchor = anchor_for(schedule, now)
            with bounded():
                runs_at = first_run(schedule, now, anchor, job.id, policy.flexible_window_seconds)
            if runs_at is None:
                raise InvalidRequest(NO_RUN_TO_COME, field="schedule")
            version = new_version()
            status = job.status if job.status is JobStatus.PAUSED else JobStatus.ACTIVE
            fields.update(
                # (the occurrences queued under the old schedule are cancelled: none counts)
                **runs_taken_back(job, now),
                schedule=schedule,
                anchor_at=anchor,
                schedule_version=version,
                final_execution_id=None,
                queued_run_at=None,
                runs_since=now if is_recurring(schedule) else None,
                # A new schedule is a new run to come, whatever ran before it: no version's run counts.
                paused_version=NO_VERSION if status is JobStatus.PAUSED else None,
                ran_at=None,
                next_run_at=runs_at if status is JobStatus.ACTIVE else None,
                status=status,
            )
            if status is JobStatus.ACTIVE:
                marker = file_one(self._handoff, marker_for(job.id, runs_at, version))
        if fields.keys() == {"updated_at"}:
            return job  # (nothing to change: an empty PATCH writes nothing, not even updated_at)
        try:
            updated = self._write(job, fields, withdraw=marker, revision=changes.if_revision)
        except Conflict:
            if changes.if_revision is not None:
                _still_at(self._reader.get(owner, job_id), changes.if_revision)
            raise
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
        fields: dict[str, Any] = {"task": self._tasks.check(owner, task)}
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
                    if isinstance(given, _Unchanged)
                }
            )
        if named_before and not named_now:
            if isinstance(changes.retry, _Unchanged) and "retry" in job.inherits:
                fields["retry"] = RetryPolicy()
            if isinstance(changes.timeout_seconds, _Unchanged) and "timeout_seconds" in job.inherits:
                fields["timeout_seconds"] = DEFAULT_TIMEOUT_SECONDS
        return fields

    def cancel(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        job = self._reader.get(owner, job_id)
        if job.status is JobStatus.CANCELLED:
            return job
        try:
            return self._write(
                job,
                {
                    "status": JobStatus.CANCELLED,
                    "next_run_at": None,
                    "queued_run_at": None,
                    "schedule_version": new_version(),
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
        job = self._reader.get(owner, job_id)
        now = self._clock.now()
        if job.status is JobStatus.PAUSED:
            if note is None or note == job.pause_note:
                return job
            return self._write(job, {"pause_note": note, "updated_at": now})
        if job.status is not JobStatus.ACTIVE:
            raise Conflict(f"job is {job.status.value}; only an ACTIVE job can be paused")
        return self._write(job, pausing.pause_changes(job, now, note))

    def resume(self, owner: str, job_id: str, *, attempts: int = 3) -> Job:
        job = self._reader.get(owner, job_id)
        if job.status is JobStatus.ACTIVE:
            return job
        if job.status is not JobStatus.PAUSED:
            raise Conflict(f"job is {job.status.value}; only a PAUSED job can be resumed")
        now = self._clock.now()
        # A one-time job's run from before the pause (read after the job, consistently): one still
        # under way goes on, and one that ended is the job's run.
        run = pausing.run_before_pause(self._store, job)
        stored = run is not None
        run = run or pausing.unstored_run_before_pause(job, now)
        if run is not None and run.status.under_way:
            # The job takes back that run's version, so that the run goes on (its retries too) and
            # completes the job when it ends. Only while the run is still under way: one that ends
            # or is skipped meanwhile makes this write fail, and the decision is taken again.
            try:
                resumed = self._store.jobs.resume_with_run(job, run, now, stored=stored)
            except LostRace:
                if attempts <= 1:
                    raise Conflict(
                        "the job changed while this request ran; read it again and retry"
                    ) from None
                return self.resume(owner, job_id, attempts=attempts - 1)
            return replace(resumed, last_execution=job.last_execution)
        ran = run is not None and run.status.ran_to_end
        version = new_version()
        # Occurrences missed while paused are not run: the schedule picks up from now. A one-time job
        # whose instant passed while it was paused has nothing left to run.
        with bounded():
            runs_at = (
                first_run(job.schedule, now, job.anchor_at, job.id, job.policy.flexible_window_seconds)
                if job.recurring
                else pausing.resumed_one_time_run(job, now, ran=ran)
            )
        marker = None
        if runs_at is not None:
            marker = file_one(self._handoff, marker_for(job.id, runs_at, version))
        updated = self._write(
            job,
            {
                "status": JobStatus.ACTIVE if runs_at is not None else JobStatus.COMPLETED,
                "next_run_at": runs_at,
                # (a one-time job's run from before the pause, kept while paused: pausing.pause_changes)
                "queued_run_at": None,
                "runs_since": now if job.recurring else None,
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

    def run_now(self, owner: str, job_id: str) -> Execution:
        return self._run_extra(self._reader.get(owner, job_id))

    def retry(self, owner: str, job_id: str, execution_id: str) -> Execution:
        """Run a finished execution that did not succeed (FAILED, SKIPPED or CANCELLED) once more, now:
        a new extra execution of the job's current task, which names it (`retry_of`). A new id, not the
        same execution again: receivers that de-duplicate on the execution id would drop a repeat."""
        job = self._reader.get(owner, job_id)
        scheduled_at = scheduled_at_of(job.id, execution_id)
        original = (
            None if scheduled_at is None else self._store.executions.get(job.id, scheduled_at, execution_id)
        )
        if original is None:
            running = in_flight(job, self._clock.now())
            if running is None or running.id != execution_id:
                raise NotFound(f"execution {execution_id!r} of job {job_id!r} not found")
            original = running  # (under way, under its pack's lease: stored at its end)
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
            id=manual_execution_id(job.id, now, randomness.token_hex(4)),
            job_id=job.id,
            owner=job.owner,
            scheduled_at=now,
            status=ExecutionStatus.QUEUED,
            schedule_version=job.schedule_version,
            manual=True,
            created_at=now,
            retry_of=retry_of,
        )
        # Stored before it is sent: acknowledged, it is in the history whatever happens next (a pause
        # landing before its start makes it end CANCELLED there). A retry before its marker, with what
        # it retries; a run after it, so that a request dying between the two leaves a marker (which
        # the scanner sends, storing the run then), never a run stored that nothing will send. The
        # dispatch leaves a stored one as it is.
        if retry_of is not None:
            self._store.executions.put_if_absent(queued)
        marker = file_one(
            self._handoff,
            DueMarker(
                job_id=job.id,
                execution_id=queued.id,
                scheduled_at=now,
                schedule_version=job.schedule_version,
                manual=True,
            ),
        )
        if retry_of is None:
            self._store.executions.put_if_absent(queued)
        # Answered as sent, not read back: a worker may have started it, or ended it, already.
        sent = self._handoff.enqueue(marker)
        # (PENDING: not sent yet, the scanner's to send; a retry answers QUEUED, as it always has)
        return queued if sent or retry_of is not None else replace(queued, status=ExecutionStatus.PENDING)

    def _write(
        self, job: Job, fields: dict[str, Any], withdraw: DueMarker | None = None, revision: int | None = None
    ) -> Job:
        """Apply a change if the job is still as read; otherwise 409, withdrawing the marker filed for it
        (its version is unique, so even if it stayed it would be skipped as superseded)."""
        # Recorded before it is written: a pack already sent for the job's run reads the records at its
        # instant and so honours any change acknowledged before then (docs/api.md).
        now = self._clock.now()
        self._store.changes.note(job.id, dispatched_runs(job, now, self._sent_ahead))
        try:
            if (
                ends_in_batch(job)
                and job.next_run_at is not None
                and job.next_run_at <= now + self._sent_ahead
            ):
                # (its run, which a pack may hold, would end in its batch's ends item: marked there
                # first, so that it ends on the job's item; if it has ended there, the job is complete)
                self._store.batch_ends.mark_moved(job)
            updated = self._store.jobs.update(
                job,
                fields,
                allowed_statuses=[job.status],
                schedule_version=job.schedule_version,
                revision=revision,
                revise=True,
            )
            # Its last execution as read before the change: one ending meanwhile shows on the next read.
            return replace(updated, last_execution=job.last_execution)
        except LostRace:
            if withdraw is not None:
                self._store.markers.delete_many([withdraw])
            raise Conflict("the job changed while this request ran; read it again and retry") from None


def _still_at(job: Job, revision: int | None) -> None:
    """PreconditionFailed if a change made on condition of `revision` finds the job at another."""
    if revision is not None and job.revision != revision:
        raise PreconditionFailed(
            f"the job is at revision {job.revision}, not {revision}: it changed since it was read; read "
            "it again and apply the change to that"
        )
