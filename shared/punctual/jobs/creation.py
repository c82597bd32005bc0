"""Creating jobs: one or a batch, validated whole before anything is stored, and made idempotent
by the request's Idempotency-Key (a retry answers with the jobs the first attempt stored, and finishes
what it left undone, its hand-offs included). Apart from the changes to existing jobs
(`punctual.jobs.changes`) because its concerns (fingerprints, replays, the order markers and jobs
are written in) are its own; `JobService` delegates to it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from punctual.domain.errors import Conflict, InvalidRequest, LostRace
from punctual.domain.models import (
    DEFAULT_TIMEOUT_SECONDS,
    DueMarker,
    Job,
    JobStatus,
    TaskRef,
    TaskSpec,
    anchor_for,
    first_run,
    marker_for,
    new_version,
)
from punctual.domain.policies import JobPolicy, NotifyRule, RetryPolicy
from punctual.domain.schedules import _Schedule, absolute
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
from punctual.platform.observability import JOBS_CREATED, metrics
from punctual.platform.signing import SigningKeys
from punctual.ports.store import Store
from punctual.scheduling.handoff import HandOff

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


class JobCreation:
    def __init__(
        self, store: Store, handoff: HandOff, clock: Clock, tasks: TaskChecker, notify_policy: NotifyPolicy
    ) -> None:
        self._store = store
        self._handoff = handoff
        self._clock = clock
        self._tasks = tasks
        self._notify_policy = notify_policy

    def create(self, owner: str, new: NewJob, idempotency_key: str | None = None) -> tuple[Job, bool]:
        """Create a job; returns it and whether it is new (False: an idempotent repeat)."""
        now = self._clock.now()
        try:
            job = self.new_job(owner, new, now, _new_id("job"))
        except InvalidRequest as refused:
            return self._replay(owner, idempotency_key, lambda: _fingerprint(new), refused)[0], False
        if idempotency_key is not None:
            fingerprint = _fingerprint(new)
            seen = self._store.idempotency.claim(owner, idempotency_key, fingerprint, [job.id], now)
            if seen is not None:
                if seen.fingerprint != fingerprint or len(seen.job_ids) != 1:
                    raise Conflict("Idempotency-Key was already used with a different request body")
                existing = self._store.jobs.get_with_last_execution(seen.job_ids[0])
                if existing is not None:
                    self._handoff.resume([existing])
                    return existing, False
                job = _reissued(job, seen.job_ids[0])  # the first attempt failed before storing it
        stored, marker = self._store_one(job)
        if marker is not None:
            metrics.add_metric(name=JOBS_CREATED, unit="Count", value=1)
            self._handoff.enqueue(marker, new_jobs=[stored])
        return stored, marker is not None

    def create_many(
        self,
        owner: str,
        news: Sequence[NewJob],
        idempotency_key: str | None = None,
        within: Callable[[Sequence[Job]], None] | None = None,
    ) -> tuple[list[Job], bool]:
        """Create jobs in one go, all or none validated; returns them in order and whether they are new.

        Every job is validated before anything is written: an invalid one is refused (its field named
        `jobs[i].<field>`) and nothing is stored. Then all markers are filed, then all jobs stored
        (BatchWriteItem both): a failure part way leaves markers without jobs, which the scanner drops
        once the request must have ended, never a job without its marker. With an Idempotency-Key, a retry of a batch that failed part way
        returns the jobs that were stored and creates the others. `within`, given the validated jobs
        before anything is stored, may refuse them (raising).
        """
        now = self._clock.now()
        named: dict[str, Any] = {}  # the named tasks read for this batch
        # Every job's shape first (its task's kind, schedule, policy, rules: cheap), then, only if all
        # pass, every job's task parameters (up to 256 KiB each): a job refused late in a batch costs
        # no reading of the others' parameters.
        checked = _each(news, lambda new: self._shaped_job(owner, new, now, _new_id("job")))
        if isinstance(checked, list):
            pairs = list(zip(checked, news, strict=True))
            checked = _each(pairs, lambda pair: self._with_task(pair[0], pair[1], named))
        if isinstance(checked, InvalidRequest):
            return self._replay(owner, idempotency_key, lambda: _batch_fingerprint(news), checked), False
        jobs = checked
        if within is not None:
            try:
                within(jobs)
            except Exception as refused:
                # (a batch an earlier version took, whose answer it could send, is answered again)
                return self._replay(owner, idempotency_key, lambda: _batch_fingerprint(news), refused), False
        if idempotency_key is not None:
            fingerprint = _batch_fingerprint(news)
            ids = [job.id for job in jobs]
            seen = self._store.idempotency.claim(owner, idempotency_key, fingerprint, ids, now)
            if seen is not None:
                if seen.fingerprint != fingerprint or len(seen.job_ids) != len(jobs):
                    raise Conflict("Idempotency-Key was already used with a different request body")
                return self._finish_batch(owner, jobs, seen.job_ids), False
        jobs = _listed_together(jobs)
        markers = self._handoff.file(*[_first_marker(job) for job in jobs])
        self._store.jobs.put_new_many(jobs)
        metrics.add_metric(name=JOBS_CREATED, unit="Count", value=len(jobs))
        self._handoff.enqueue(*markers)
        return jobs, True

    def _replay(
        self, owner: str, key: str | None, fingerprint: Callable[[], str], refused: Exception
    ) -> list[Job]:
        """A request that validation now refuses (its instant has passed since, say) but that was taken
        earlier under the same Idempotency-Key and body: answered with the jobs it created, as it was
        then. Raises `refused` if there was no such request, and Conflict if it stored only some of its
        jobs (it failed part way, or is still running): the rest cannot be created now."""
        now = self._clock.now()
        seen = None if key is None else self._store.idempotency.get(owner, key, now)
        if seen is None or seen.fingerprint != fingerprint():
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
        self._handoff.resume(jobs)
        return self._store.jobs.with_last_executions(jobs)

    def _finish_batch(self, owner: str, drafts: list[Job], ids: list[str]) -> list[Job]:
        """A repeated batch: the jobs the first attempt stored, and the others created now under the ids
        it claimed (one by one: this only follows a failure)."""
        existing = self._store.jobs.get_many(ids).readable()
        if any(job.owner != owner for job in existing.values()):
            raise Conflict("Idempotency-Key was already used with a different request body")
        self._handoff.resume(list(existing.values()))
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

    def new_job(
        self, owner: str, new: NewJob, now: datetime, job_id: str, seen: dict[str, Any] | None = None
    ) -> Job:
        """A validated new job (not stored). Raises InvalidRequest naming the field."""
        return self._with_task(self._shaped_job(owner, new, now, job_id), new, seen)

    def _with_task(self, job: Job, new: NewJob, seen: dict[str, Any] | None) -> Job:
        """The job with its task checked, parameters and all (`TaskChecker.check`)."""
        return replace(job, task=self._tasks.check(job.owner, new.task, seen))

    def _shaped_job(self, owner: str, new: NewJob, now: datetime, job_id: str) -> Job:
        """The new job, all checked but its task's parameters: its task's kind, schedule, policy and
        notification rules, and its first run."""
        self._tasks.check_kind(new.task)
        # A job with a named task takes the task's retry and timeout unless it gives its own.
        inherits = frozenset(
            name
            for name, given in (("retry", new.retry), ("timeout_seconds", new.timeout_seconds))
            if isinstance(new.task, TaskRef) and given is None
        )
        schedule = absolute(new.schedule, now)
        check_not_past(schedule, now)
        policy = new.policy or JobPolicy()
        check_job_policy(policy, schedule)
        notify = check_rules(new.notify, self._notify_policy)
        anchor = anchor_for(schedule, now)
        with bounded():
            runs_at = first_run(schedule, now, anchor, job_id, policy.flexible_window_seconds)
        if runs_at is None:
            raise InvalidRequest(NO_RUN_TO_COME, field="schedule")
        return Job(
            id=job_id,
            owner=owner,
            name=new.name or job_id,
            status=JobStatus.ACTIVE,
            task=new.task,
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
        # without its job is dropped by the scanner once this request must have ended (`storing`).
        marker = file_one(self._handoff, _first_marker(job))
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


def _each(items: Sequence[Any], check: Callable[[Any], Job]) -> list[Job] | InvalidRequest:
    """Each of a batch's items checked: the jobs, or the refusal listing every job's problem (each
    `jobs[i].<field>`), the first named."""
    jobs: list[Job] = []
    problems: list[InvalidRequest] = []
    for i, item in enumerate(items):
        try:
            jobs.append(check(item))
        except InvalidRequest as exc:
            field = f"jobs[{i}].{exc.field}" if exc.field else f"jobs[{i}]"
            message = str(exc).removeprefix(f"{exc.field}: ") if exc.field else str(exc)
            problems.append(InvalidRequest(f"{field}: {message}", field=field))
    if problems:
        return InvalidRequest(str(problems[0]), field=problems[0].field, problems=tuple(problems))
    return jobs


def _new_id(prefix: str) -> str:
    return f"{prefix}_{randomness.token_hex(10)}"


def _reissued(draft: Job, job_id: str) -> Job:
    """A new job under the id a failed first attempt claimed, to finish that attempt. Its schedule
    version is new, so that a marker the first attempt filed is dropped as superseded: the job runs once.
    Listed on its own: the first attempt's list entry may not have been written."""
    name = job_id if draft.name == draft.id else draft.name  # the default name is the id
    return replace(draft, id=job_id, name=name, schedule_version=new_version(), listed_in=None)


def _listed_together(jobs: list[Job]) -> list[Job]:
    """A batch's jobs, its one-time jobs without a name of their own listed in one list entry of the
    batch's (one write and one by_owner entry for them all, not one each). A named job keeps its own,
    which by_name needs; a recurring one too, as it lives on past any entry's expiry."""
    together = [job.id for job in jobs if job.name == job.id and not job.recurring]
    if len(together) < 2:
        return jobs
    batch_id = _new_id("batch")
    return [replace(job, listed_in=batch_id) if job.id in together else job for job in jobs]


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
