"""The worker: run one execution named by a work-queue message, at least once and never early.

Every status change is a conditional write, so a redelivered or duplicated message never re-runs a
finished execution, and a worker that lost its lease cannot overwrite the outcome of the one that
took over. Retries wait by message visibility, not by sleeping.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from punctual import pausing, tasks
from punctual.batched_reads import BatchedReads
from punctual.clock import Clock
from punctual.errors import LostRace, RetryableStoreError, UnreadableItem
from punctual.models import (
    Execution,
    ExecutionStatus,
    Job,
    Overlap,
    TaskSpec,
    completes_job,
    skip_reason,
)
from punctual.netguard import Resolver, system_resolver
from punctual.observability import (
    DEAD_LETTERED,
    EXECUTIONS_FAILED,
    EXECUTIONS_RETRIED,
    EXECUTIONS_SKIPPED,
    EXECUTIONS_STARTED,
    EXECUTIONS_SUCCEEDED,
    LATENESS_MS,
    logger,
    metrics,
)
from punctual.outcomes import Monitor
from punctual.queue import WorkItem, WorkQueue
from punctual.store import JobStamp, Store
from punctual.tasks import MAX_RESULT_DEPTH, AwsClients, LambdaClients, TaskContext, TaskFailed, TaskPolicy
from punctual.validation import json_problem

# A message that becomes visible this close to its instant waits in the worker; earlier, it goes back.
# (Beyond the head start a deployment gives its messages: WorkerConfig.early_visibility_seconds.)
MAX_EARLY_WAIT = timedelta(seconds=5)
# Time a running execution's lease outlasts its timeout, before another worker may take it over.
LEASE_MARGIN = timedelta(seconds=30)
THROTTLE_BACKOFF_SECONDS = 5
MAX_THROTTLE_BACKOFF_SECONDS = 900
PERSIST_ATTEMPTS = 4
UNREADABLE_RETRY_SECONDS = 300
# A message whose execution changed as it was being skipped comes back this much later, looked at afresh;
# a worker holding the run tries this many times first.
LOST_SKIP_RETRY_SECONDS = 5
SKIP_ATTEMPTS = 4
MAX_ERROR_CHARS = 1000
# A run buffered behind the job's previous one (overlap `buffer_one`) looks again after this long,
# doubling to the cap; after this many receives of its message it is skipped rather than left to use
# up the queue's receives (the previous run has then been under way for about twenty minutes).
BUFFER_RECHECK_SECONDS = 2
MAX_BUFFER_RECHECK_SECONDS = 60
MAX_BUFFER_RECEIVES = 20


_T = TypeVar("_T")


class Outcome(Enum):
    DONE = "done"  # delete the message
    LATER = "later"  # leave it: it comes back when its visibility timeout (set here) ends


@dataclass(frozen=True)
class WorkerConfig:
    task_policy: TaskPolicy = field(default_factory=TaskPolicy)
    result_max_bytes: int = 4096
    # Settings.early_visibility_seconds: messages meant to arrive this early wait in the worker too.
    early_visibility_seconds: int = 0

    @property
    def max_early_wait(self) -> timedelta:
        return MAX_EARLY_WAIT + timedelta(seconds=self.early_visibility_seconds)


class Worker:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        clock: Clock,
        config: WorkerConfig,
        *,
        resolver: Resolver = system_resolver,
        lambda_clients: LambdaClients | None = None,
        rng: random.Random | None = None,
        aws_clients: AwsClients | None = None,
        named_tasks: Callable[[Job | None], Job | None] | None = None,
        monitor: Monitor | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._config = config
        self._resolver = resolver
        self._lambda_clients = lambda_clients
        self._rng = rng or random.Random()
        self._jobs = BatchedReads(lambda job_ids: self._store.jobs.get_many(job_ids))
        self._stamps = BatchedReads(lambda job_ids: self._store.jobs.stamps(job_ids))
        self._aws_clients = aws_clients
        # A job as it runs now: its named task resolved (named_tasks.TaskResolver.effective).
        self._effective = named_tasks or (lambda job: job)
        # The job's outcome, auto-pause and notifications around each run (punctual.outcomes).
        self._monitor = monitor or Monitor(store, clock, None, self._rng)

    def handle(self, item: WorkItem, receipt_handle: str, receive_count: int = 1) -> Outcome:
        try:
            return self._handle(item, receipt_handle, receive_count)
        except UnreadableItem as exc:
            # Written by a newer version (a deployment under way, say): leave it as it is, and the
            # message for a worker that can read it; after its receives it goes to the dead-letter queue.
            logger.error("execution cannot be read; message returns later", extra={"error": str(exc)})
            return self._later(receipt_handle, UNREADABLE_RETRY_SECONDS)
        except RetryableStoreError as exc:
            # Throttled: come back sooner than the visibility timeout, backing off with each receive
            # so that a long throttle does not use up the receives and dead-letter the execution.
            delay = min(
                MAX_THROTTLE_BACKOFF_SECONDS, THROTTLE_BACKOFF_SECONDS * 2 ** max(0, receive_count - 1)
            )
            logger.warning(
                "store busy; message returns later", extra={"error": str(exc), "delay_seconds": delay}
            )
            return self._later(receipt_handle, delay * (1 + self._rng.random() / 2))

    def _handle(self, item: WorkItem, receipt_handle: str, receive_count: int) -> Outcome:
        wait = (item.scheduled_at - self._clock.now()).total_seconds()
        if wait > self._config.max_early_wait.total_seconds():
            return self._later(receipt_handle, wait)

        stored = self._store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
        if stored is not None and stored.status.is_final:
            # A duplicate or redelivered message. If the worker that finished it died before updating
            # the job, do that now.
            self._ensure_outcome_recorded(stored)
            return Outcome.DONE
        job = self._effective(self._jobs.get(item.job_id))
        execution = stored or unstored_execution(item, job, self._clock.now(), self._store.retention)
        if execution is None:
            return Outcome.DONE
        if self._clock.now() < execution.scheduled_at and not _early_claim(job, execution):
            # Claimed at its instant: its job's policy is judged then (whether its previous run is still
            # under way). A duplicate's claim meanwhile makes this one's fail.
            self._clock.sleep((execution.scheduled_at - self._clock.now()).total_seconds())
        now = self._clock.now()
        if (
            execution.status is ExecutionStatus.RUNNING
            and execution.lease_until
            and execution.lease_until > now
        ):
            # Another worker holds it (a duplicate message): look again when its lease would have run
            # out. Before the skip rules: the holder decides its run's end, even if its job is paused.
            return self._later(receipt_handle, (execution.lease_until - now).total_seconds() + 1)
        reason = skip_reason(job, execution)
        if reason is not None:
            if self._skip(job, execution, reason):
                return Outcome.DONE
            # Changed since read (claimed by another worker, or its job resumed): looked at afresh.
            return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)
        assert job is not None
        if execution.attempts == 0 and not execution.manual:
            held = self._by_policy(job, execution, now, receipt_handle, receive_count)
            if held is not None:
                return held

        if execution.status is ExecutionStatus.RETRYING and execution.next_attempt_at:
            early = (execution.next_attempt_at - now).total_seconds()
            if early > self._config.max_early_wait.total_seconds():
                return self._later(receipt_handle, early)
            if early > 0:
                self._clock.sleep(early)
                now = self._clock.now()

        # A message received before its instant is claimed then (its reads and its claim done in the
        # time to spare, rather than all at once at an instant many executions share), its lease
        # counted from the instant; its start and lateness are recorded when it starts.
        ahead = now < execution.scheduled_at
        starts = max(now, execution.scheduled_at)
        try:
            running = self._store.executions.claim(
                execution,
                now=now,
                lease_until=starts + timedelta(seconds=job.timeout_seconds) + LEASE_MARGIN,
                lateness_ms=None if ahead else _lateness_ms(execution, now),
                task_version=job.task_version,
            )
        except LostRace:
            return self._after_lost_claim(item, receipt_handle)
        if ahead:
            self._clock.sleep((execution.scheduled_at - self._clock.now()).total_seconds())
            began = self._clock.now()
            late = (began - running.scheduled_at).total_seconds()
            window = job.policy.max_lateness_seconds
            if window is not None and not running.manual and late > window:
                # Its catch-up window is judged at its start, as for a run claimed then.
                reason = f"skipped: it would have started {late:.0f} s after its time, past the job's " + (
                    f"max_lateness_seconds ({window})"
                )
                return self._policy_skip(job, running, reason, receipt_handle)
        # Read the job again now that the execution is claimed and its instant has come: a cancel or
        # pause that landed between the first read and now still stops it, and one after this read
        # came after its start. (Whether it changed is read first: all of it only if it did.)
        job = self._reread(job)
        for attempt in range(SKIP_ATTEMPTS):
            reason = skip_reason(job, running)
            if reason is None:
                assert job is not None
                if ahead:  # its start, recorded with its outcome
                    began = self._clock.now()
                    running = replace(running, started_at=began, lateness_ms=_lateness_ms(running, began))
                return self._run(job, running, receipt_handle)
            try:
                if self._skip(job, running, reason):
                    return Outcome.DONE
                # The job changed meanwhile (resumed, cancelled): this worker holds the run; look again.
                job = self._effective(self._store.jobs.get(item.job_id))
            except RetryableStoreError:
                # Throttled, or a resume's transaction at the same moment: look again shortly.
                self._clock.sleep(0.1 * 2**attempt)
        self._release(running)
        return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)

    def _reread(self, job: Job) -> Job | None:
        """The job as it is now: the copy read before, unless its status, schedule version or time of
        last change differ (or it is gone)."""
        if self._stamps.get(job.id) == JobStamp.of(job):
            return job
        return self._effective(self._jobs.get(job.id))

    def _by_policy(
        self, job: Job, execution: Execution, now: datetime, receipt_handle: str, receive_count: int
    ) -> Outcome | None:
        """The job's policy on a scheduled run about to start: None to start it; otherwise what was
        done (SKIPPED with its reason, or held back behind the job's previous run)."""
        policy = job.policy
        late = (now - execution.scheduled_at).total_seconds()
        if policy.max_lateness_seconds is not None and late > policy.max_lateness_seconds:
            reason = (
                f"skipped: it would have started {late:.0f} s after its time, past the job's "
                f"max_lateness_seconds ({policy.max_lateness_seconds})"
            )
            return self._policy_skip(job, execution, reason, receipt_handle)
        if not job.recurring or policy.overlap is Overlap.ALLOW:
            return None
        earlier = self._store.executions.before(execution)
        busy = next((e for e in earlier if _still_under_way(e, now)), None)
        if busy is None:
            return None
        if policy.overlap is Overlap.SKIP:
            reason = f"skipped: the job's previous run ({busy.id}) was still under way (overlap: skip)"
            return self._policy_skip(job, execution, reason, receipt_handle)
        waiting = next((e for e in earlier if e.status is ExecutionStatus.QUEUED and not e.manual), None)
        if waiting is not None:
            reason = (
                f"skipped: run {waiting.id} already waits for the job's previous run (overlap: buffer_one)"
            )
            return self._policy_skip(job, execution, reason, receipt_handle)
        if receive_count >= MAX_BUFFER_RECEIVES:
            reason = f"skipped: the job's previous run ({busy.id}) was still under way after waiting"
            return self._policy_skip(job, execution, reason, receipt_handle)
        # Stored as QUEUED so that a later run sees that one is already waiting.
        self._store.executions.put_if_absent(execution)
        delay = min(MAX_BUFFER_RECHECK_SECONDS, BUFFER_RECHECK_SECONDS * 2 ** max(0, receive_count - 1))
        logger.info(
            "execution waits for the job's previous run",
            extra={"execution_id": execution.id, "previous": busy.id, "delay_seconds": delay},
        )
        return self._later(receipt_handle, delay)

    def _policy_skip(self, job: Job, execution: Execution, reason: str, receipt_handle: str) -> Outcome:
        if not self._skip(job, execution, reason, status=ExecutionStatus.SKIPPED):
            return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)
        skipped = replace(
            execution, status=ExecutionStatus.SKIPPED, error=reason, finished_at=self._clock.now()
        )
        self._record_outcome(job, skipped)
        return Outcome.DONE

    def _release(self, running: Execution) -> None:
        try:
            self._store.executions.release_claim(running)
        except (LostRace, RetryableStoreError):
            # Its lease runs out instead: the message waits for it.
            logger.warning("claim not given back", extra={"execution_id": running.id})

    def _run(self, job: Job, execution: Execution, receipt_handle: str) -> Outcome:
        # One INFO line per attempt, at its end (CloudWatch Logs bills every byte: a start line too cost
        # as much as all of an execution's DynamoDB reads); the start is at DEBUG.
        log = _attempt_log(job, execution)
        if execution.attempts == 1:
            metrics.add_metric(name=EXECUTIONS_STARTED, unit="Count", value=1)
            metrics.add_metric(
                name=LATENESS_MS, unit="Milliseconds", value=execution.lateness_ms or 0, resolution=1
            )
            self._monitor.started(job, execution)
        logger.debug("execution started", extra=log)
        context = TaskContext(
            job_id=job.id,
            execution_id=execution.id,
            scheduled_at=execution.scheduled_at,
            attempt=execution.attempts,
            timeout_seconds=job.timeout_seconds,
            clock=self._clock,
            policy=self._config.task_policy,
            resolver=self._resolver,
            lambda_clients=self._lambda_clients,
            aws_clients=self._aws_clients,
            job_name=job.name,
            signing_keys=() if job.signing is None else job.signing.active(self._clock.now()),
        )
        began = self._clock.now()
        try:
            result = tasks.run(job.task, context)
        except TaskFailed as exc:
            took = _ms(self._clock.now() - began)
            return self._failed(job, execution, receipt_handle, str(exc), exc.retryable, exc.result, took)
        except Exception as exc:
            logger.exception("task raised", extra=log)
            error = f"{type(exc).__name__}: {exc}"
            return self._failed(
                job, execution, receipt_handle, error, True, None, _ms(self._clock.now() - began)
            )
        log["took_ms"] = _ms(self._clock.now() - began)
        try:
            finished = self._persist(
                lambda: self._store.executions.finish_attempt(
                    execution,
                    status=ExecutionStatus.SUCCEEDED,
                    finished_at=self._clock.now(),
                    error=None,
                    result=truncate(result, self._config.result_max_bytes),
                )
            )
        except LostRace:
            return Outcome.DONE  # our lease ran out and another worker took over: its outcome stands
        metrics.add_metric(name=EXECUTIONS_SUCCEEDED, unit="Count", value=1)
        logger.info("execution succeeded", extra=log)
        self._record_outcome(job, finished)
        return Outcome.DONE

    def _failed(
        self,
        job: Job,
        execution: Execution,
        receipt_handle: str,
        error: str,
        retryable: bool,
        result: Any,
        took_ms: int,
    ) -> Outcome:
        error = error[:MAX_ERROR_CHARS]
        log = {**_attempt_log(job, execution), "took_ms": took_ms, "error": error}
        if retryable and execution.attempts < job.retry.max_attempts:
            delay = job.retry.delay_after(execution.attempts, self._rng)
            try:
                self._persist(
                    lambda: self._store.executions.retry_later(
                        execution, next_attempt_at=self._clock.now() + timedelta(seconds=delay), error=error
                    )
                )
            except LostRace:
                return Outcome.DONE
            metrics.add_metric(name=EXECUTIONS_RETRIED, unit="Count", value=1)
            logger.info("execution will retry", extra={**log, "delay_seconds": round(delay, 3)})
            return self._later(receipt_handle, delay)
        try:
            finished = self._persist(
                lambda: self._store.executions.finish_attempt(
                    execution,
                    status=ExecutionStatus.FAILED,
                    finished_at=self._clock.now(),
                    error=error,
                    result=truncate(result, self._config.result_max_bytes),
                )
            )
        except LostRace:
            return Outcome.DONE
        metrics.add_metric(name=EXECUTIONS_FAILED, unit="Count", value=1)
        logger.info("execution failed", extra=log)
        self._record_outcome(job, finished)
        return Outcome.DONE

    def _record_outcome(self, job: Job, finished: Execution) -> None:
        """Complete the job if this was its last execution, or record its outcome on it; then what
        follows (Monitor.ended: auto-pause, notifications)."""
        self._monitor.ended(job, finished)

    def _ensure_outcome_recorded(self, execution: Execution) -> None:
        job = self._store.jobs.get(execution.job_id)
        # (a paused job too: a one-time job notes that its run ended, so that resuming does not repeat
        # it; and a finished one, whose notifications may not have been queued)
        if job is not None:
            self._record_outcome(job, execution)

    def _persist(self, write: Callable[[], _T]) -> _T:
        """Record a task's outcome, riding out throttling: losing it would mean running the task again."""
        for attempt in range(PERSIST_ATTEMPTS):
            try:
                return write()
            except RetryableStoreError:
                if attempt == PERSIST_ATTEMPTS - 1:
                    raise
                self._clock.sleep(0.2 * 2**attempt * (1 + self._rng.random()))
        raise AssertionError("unreachable")

    def _skip(
        self,
        job: Job | None,
        execution: Execution,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> bool:
        """End an execution that must not run (CANCELLED, or SKIPPED by its job's policy, with the
        reason) if it is still as read.
        False when it is not (another worker claimed or ended it), or, for a run under way of a
        paused job, when the job is no longer paused (resumed, it may go on)."""
        try:
            pausing.skip_run(
                self._store, job, execution, finished_at=self._clock.now(), reason=reason, status=status
            )
        except LostRace:
            return False
        metrics.add_metric(name=EXECUTIONS_SKIPPED, unit="Count", value=1)
        logger.info("execution skipped", extra={"execution_id": execution.id, "reason": reason})
        return True

    def _after_lost_claim(self, item: WorkItem, receipt_handle: str) -> Outcome:
        current = self._store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
        if current is None or current.status.is_final:
            return Outcome.DONE
        return self._later(receipt_handle, 5)

    def _later(self, receipt_handle: str, seconds: float) -> Outcome:
        self._queue.change_visibility(receipt_handle, seconds)
        return Outcome.LATER


def _lateness_ms(execution: Execution, started: datetime) -> int:
    return int((started - execution.scheduled_at) / timedelta(milliseconds=1))


def _early_claim(job: Job | None, execution: Execution) -> bool:
    """Whether an execution whose message came before its instant may be claimed before it: its first
    scheduled attempt, unless its job's overlap policy must see, at the instant, whether the previous
    run is still under way."""
    if execution.attempts or execution.status is not ExecutionStatus.QUEUED:
        return False
    if job is None or execution.manual or not job.recurring:
        return True
    return job.policy.overlap is Overlap.ALLOW


def _still_under_way(execution: Execution, now: datetime) -> bool:
    """Whether an earlier run of the job is under way: running on a live lease (a crashed worker's
    run, its lease run out, does not hold the job up), or between attempts."""
    if execution.status is ExecutionStatus.RETRYING:
        return True
    return execution.status is ExecutionStatus.RUNNING and (
        execution.lease_until is None or execution.lease_until > now
    )


def unstored_execution(
    item: WorkItem, job: Job | None, now: datetime, retention: timedelta
) -> Execution | None:
    """The execution a message names that is not stored yet (the scanner stores none: its first claim
    does), as QUEUED; None if it cannot be: its job is gone, the message predates the fields, or it is
    older than the history's retention (its record may have expired after it ran: running it anew
    would repeat it)."""
    if item.schedule_version is None or job is None or now - item.scheduled_at >= retention:
        logger.warning(
            "no such execution; dropping message",
            extra={"execution_id": item.execution_id, "job_exists": job is not None},
        )
        return None
    return Execution(
        id=item.execution_id,
        job_id=item.job_id,
        owner=job.owner,
        scheduled_at=item.scheduled_at,
        status=ExecutionStatus.QUEUED,
        schedule_version=item.schedule_version,
        manual=item.manual,
        created_at=now,
    )


def dead_letter(store: Store, clock: Clock, item: WorkItem, monitor: Monitor | None = None) -> None:
    """A message that exhausted its receives: its execution fails (marked dead-lettered), and a
    one-time job completes; with a monitor, it is kept for its owner to redrive, and notified."""
    try:
        stored = store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
    except UnreadableItem:
        # Leave the message on the dead-letter queue (its retention, 14 days) for a version that can
        # read the execution: failing here keeps it there.
        logger.error("dead-lettered execution cannot be read; the message stays on the dead-letter queue")
        raise
    if stored is not None and stored.status.is_final:
        # Ended already (the last delivery's worker died after recording it, say): its job may not
        # have been completed yet.
        ended: Execution = stored
    else:
        execution = stored or unstored_execution(
            item, store.jobs.get(item.job_id), clock.now(), store.retention
        )
        if execution is None:
            return
        try:
            ended = store.executions.give_up(
                execution,
                status=ExecutionStatus.FAILED,
                finished_at=clock.now(),
                error="gave up: the message exhausted its deliveries (dead-letter queue)",
                dead_lettered=True,
            )
        except LostRace:
            return
        metrics.add_metric(name=DEAD_LETTERED, unit="Count", value=1)
        metrics.add_metric(name=EXECUTIONS_FAILED, unit="Count", value=1)
        logger.warning("execution dead-lettered", extra={"execution_id": execution.id})
    job = store.jobs.get(item.job_id)
    if job is not None and monitor is not None:
        monitor.dead_lettered(job, ended)
    elif job is not None and completes_job(job, ended):
        pausing.complete_job(store, job, ended)


def _attempt_log(job: Job, execution: Execution) -> dict[str, Any]:
    """The fields of an attempt's log line."""
    return {
        "job_id": job.id,
        "execution_id": execution.id,
        "attempt": execution.attempts,
        "lateness_ms": execution.lateness_ms,
        "task": job.task.type if isinstance(job.task, TaskSpec) else job.task.name,
    }


def _ms(duration: timedelta) -> int:
    return round(duration / timedelta(milliseconds=1))


def truncate(result: Any, max_bytes: int) -> Any:
    """Keep a result small and readable: if its JSON is too long, or cannot be stored as JSON (nested
    too deep, a number no float holds, an unpaired surrogate), store a truncated string of it instead."""
    if result is None:
        return None
    unfit = json_problem(result, MAX_RESULT_DEPTH)
    try:
        text = json.dumps(result, default=str)  # (ASCII: a surrogate is escaped)
    except RecursionError:
        text = f"(a result nested deeper than {MAX_RESULT_DEPTH} levels)"
    if not unfit and len(text.encode()) <= max_bytes:
        return result
    return {"truncated": True, "preview": text.encode()[:max_bytes].decode("utf-8", errors="ignore")}
