"""The worker: run one execution named by a work-queue message, at least once and never early.

Every status change is a conditional write, so a redelivered or duplicated message never re-runs a
finished execution, and a worker that lost its lease cannot overwrite the outcome of the one that
took over. Retries wait by message visibility, not by sleeping.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from functools import partial
from typing import Any, Protocol

from punctual.domain.errors import LostRace, RetryableStoreError, UnreadableItem
from punctual.domain.executions import LEASE_MARGIN, Execution, ExecutionStatus
from punctual.domain.models import Job, skip_reason
from punctual.execution import pausing, run_policy, run_records
from punctual.execution.attempts import Attempts
from punctual.execution.batched_reads import BatchedReads
from punctual.execution.hooks import RunHooks
from punctual.execution.instant_reads import Expected, InstantReads
from punctual.execution.run_records import unstored_execution
from punctual.execution.starts_first import StartsFirst
from punctual.platform.clock import Clock
from punctual.platform.concurrency import parallel_map
from punctual.platform.config import FIRE_THREADS
from punctual.platform.observability import EXECUTIONS_SKIPPED, logger, metrics
from punctual.platform.resources import WORK_QUEUE
from punctual.store import Store
from punctual.store.execution_reads import ExecutionRef
from punctual.store.jobs import JobStamp
from punctual.store.queue import WorkItem, WorkQueue
from punctual.tasks import AwsClients, LambdaClients, TaskPolicy
from punctual.tasks.netguard import Resolver, system_resolver

# A message that becomes visible this close to its instant waits in the worker; earlier, it goes back.
# (Beyond the head start a deployment gives its messages: WorkerConfig.early_visibility_seconds.)
MAX_EARLY_WAIT = timedelta(seconds=5)
THROTTLE_BACKOFF_SECONDS = 5
MAX_THROTTLE_BACKOFF_SECONDS = 900
UNREADABLE_RETRY_SECONDS = 300
# An unexpected error (a store or network failure no rule covers, a bug) brings the message back after
# this, doubling with each receive up to the work queue's visibility timeout: a passing fault costs
# seconds, not the 6.5 minutes a message left to its visibility timeout would, and a lasting one ends
# in the dead-letter queue after its receives (about 2 h 10 min rather than 2 h 45).
UNEXPECTED_RETRY_SECONDS = 5
# A message whose execution changed as it was being skipped comes back this much later, looked at afresh;
# a worker holding the run tries this many times first.
LOST_SKIP_RETRY_SECONDS = 5
SKIP_ATTEMPTS = 4


class Resolve(Protocol):
    """A job as it runs (its named task resolved) for an execution due at `at`
    (`named_tasks.TaskResolver.effective`)."""

    def __call__(self, job: Job | None, at: datetime | None = None) -> Job | None: ...


def _as_claimed(job: Job, claimed: Job, running: Execution) -> tuple[Job, Execution]:
    """A run whose named task changed between its claim (`claimed`: the job as claimed for) and its
    instant: the version it runs recorded with its outcome, and no longer a timeout than its claim's
    lease was sized for (a longer one given to the task since applies from its next run)."""
    if job.timeout_seconds > claimed.timeout_seconds:
        job = replace(job, timeout_seconds=claimed.timeout_seconds)
    return job, replace(running, task_version=job.task_version)


def _doubling(first_seconds: int, receive_count: int, most_seconds: int) -> int:
    """A delay that doubles with each receive of a message, from its first up to its most."""
    return min(most_seconds, first_seconds * 2 ** max(0, receive_count - 1))


@dataclass
class Member:
    """A pack member's receipt: when the member must be looked at again is noted here (for the pack
    to decide, punctual.execution.packs) rather than set on a message's visibility."""

    later: float | None = None


# A message's receipt handle, or a pack member's.
Receipt = str | Member


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


class Disposition(Enum):
    """What becomes of a work message once handled."""

    DONE = "done"  # delete the message
    LATER = "later"  # leave it: it comes back when its visibility timeout (set here) ends


@dataclass(frozen=True)
class WorkerConfig:
    task_policy: TaskPolicy = field(default_factory=TaskPolicy)
    result_max_bytes: int = 4096
    # Settings.early_visibility_seconds: messages meant to arrive this early wait in the worker too.
    early_visibility_seconds: int = 0
    # Settings.fire_threads: a pack's members started at once.
    fire_threads: int = FIRE_THREADS

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
        named_tasks: Resolve | None = None,
        hooks: RunHooks | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._config = config
        self._resolver = resolver
        self._lambda_clients = lambda_clients
        self._rng = rng or random.Random()
        # Executions read on receipt, and their jobs: many received together share a call each.
        self._executions = BatchedReads(self._read_executions, what="execution")
        self._jobs = BatchedReads(lambda job_ids: self._store.jobs.get_many(job_ids))
        self._stamps = BatchedReads(self._read_stamps)
        # Executions claimed ahead read their jobs' stamps at their instant together.
        self._stamps_at: InstantReads[JobStamp] = InstantReads(self._read_stamps, self._stamps.get, clock)
        self._aws_clients = aws_clients
        # A job as it runs now: its named task resolved (named_tasks.TaskResolver.effective).
        self._effective: Resolve = named_tasks or (lambda job, at=None: job)
        # The job's outcome, auto-pause and notifications around each run (punctual.execution.hooks).
        self._hooks = hooks or RunHooks(store, clock, None, self._rng)
        # Attempts that ended write their outcome once the starts due meanwhile are made.
        self._starts = StartsFirst()
        self._attempts = Attempts(
            store,
            clock,
            self._hooks,
            self._rng,
            task_policy=config.task_policy,
            result_max_bytes=config.result_max_bytes,
            resolver=resolver,
            lambda_clients=lambda_clients,
            aws_clients=aws_clients,
            starts=self._starts,
        )

    def read_ahead(self, items: Sequence[WorkItem]) -> Known:
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

    # ------------------------------------------- for a pack's members run under its lease (packs.py)
    @property
    def store(self) -> Store:
        return self._store

    def effective(self, job: Job | None, at: datetime) -> Job | None:
        """The job as it runs at `at`: its named task resolved."""
        return self._effective(job, at)

    def starting(self) -> Callable[[], None]:
        """An execution's instant has come: its outcome waits for the starts due meanwhile until the
        function returned is called (StartsFirst.enter)."""
        return self._starts.enter()

    def end_unstarted(
        self, job: Job | None, execution: Execution, reason: str, receipt: Receipt, *, by_policy: bool
    ) -> Disposition:
        """An execution that must not run: CANCELLED (or SKIPPED by its job's policy) with the reason."""
        if by_policy:
            assert job is not None
            return self._policy_skip(job, execution, reason, receipt)
        if self._skip(job, execution, reason):
            return Disposition.DONE
        return self._later(receipt, LOST_SKIP_RETRY_SECONDS)

    def run_leased(
        self, job: Job, running: Execution, started: Callable[[], None], receipt: Receipt
    ) -> Disposition:
        """Run a first attempt under its pack's lease (`running`: unclaimed, RUNNING in memory only)."""
        delay = self._attempts.run(job, running, started, leased=True)
        return Disposition.DONE if delay is None else self._later(receipt, delay)

    def handle(
        self, item: WorkItem, receipt_handle: Receipt, receive_count: int = 1, known: Known | None = None
    ) -> Disposition:
        """`known`: its execution and job, read with its pack's (None: read here)."""
        try:
            return self._handle(item, receipt_handle, receive_count, known)
        except UnreadableItem as exc:
            # Written by a newer version (a deployment under way, say): leave it as it is, and the
            # message for a worker that can read it; after its receives it goes to the dead-letter queue.
            logger.error("execution cannot be read; message returns later", extra={"error": str(exc)})
            return self._later(receipt_handle, UNREADABLE_RETRY_SECONDS)
        except RetryableStoreError as exc:
            # Throttled: come back sooner than the visibility timeout, backing off with each receive
            # so that a long throttle does not use up the receives and dead-letter the execution.
            delay = _doubling(THROTTLE_BACKOFF_SECONDS, receive_count, MAX_THROTTLE_BACKOFF_SECONDS)
            logger.warning(
                "store busy; message returns later", extra={"error": str(exc), "delay_seconds": delay}
            )
            return self._later(receipt_handle, delay * (1 + self._rng.random() / 2))
        except Exception:
            delay = _doubling(UNEXPECTED_RETRY_SECONDS, receive_count, WORK_QUEUE.visibility_timeout_seconds)
            logger.exception(
                "execution failed unexpectedly; message returns later",
                extra={"execution_id": item.execution_id, "delay_seconds": delay},
            )
            return self._later(receipt_handle, delay)

    def _handle(
        self, item: WorkItem, receipt_handle: Receipt, receive_count: int, known: Known | None = None
    ) -> Disposition:
        wait = (item.scheduled_at - self._clock.now()).total_seconds()
        if wait > self._config.max_early_wait.total_seconds():
            return self._later(receipt_handle, wait)

        ref = (item.job_id, item.scheduled_at, item.execution_id)
        stored = known.execution(ref) if known is not None else self._executions.get(ref)
        if stored is not None and stored.status.is_final:
            # A duplicate or redelivered message. If the worker that finished it died before updating
            # the job, do that now.
            self._ensure_outcome_recorded(stored)
            return Disposition.DONE
        stored_job = known.job(item.job_id) if known is not None else self._jobs.get(item.job_id)
        job = self._effective(stored_job, item.scheduled_at)
        execution = stored or unstored_execution(item, job, self._clock.now(), self._store.retention)
        if execution is None:
            return Disposition.DONE
        if self._clock.now() < execution.scheduled_at and not run_policy.early_claim(job, execution):
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
                return Disposition.DONE
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
        claim = partial(
            self._store.executions.claim,
            execution,
            now=now,
            lease_until=starts + timedelta(seconds=job.timeout_seconds) + LEASE_MARGIN,
            lateness_ms=None if ahead else run_records.lateness_ms(execution, now),
            task_version=job.task_version,
        )
        # One read as stored is claimed as stored: the write need not carry the fields that would
        # store it. Should it have gone since it was read, it is claimed as if never stored.
        for as_stored in (True, False) if stored is not None else (False,):
            try:
                running = claim(stored=as_stored)
                break
            except LostRace:
                current = self._store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
                if not as_stored or current is not None:
                    return self._after_lost_claim(current, receipt_handle)
        expected = self._stamps_at.expect(job.id, execution.scheduled_at) if ahead else None
        try:
            if ahead:
                self._clock.sleep((execution.scheduled_at - self._clock.now()).total_seconds())
                began = self._clock.now()
                # Its catch-up window is judged at its start, as for a run claimed then.
                late = None if running.manual else run_policy.too_late(job, running, began)
                if late is not None:
                    return self._policy_skip(job, running, late, receipt_handle)
            leave = self._starts.enter()
            try:
                return self._start(stored_job or job, job, running, receipt_handle, expected, leave, known)
            finally:
                leave()
        finally:
            if expected is not None:
                expected.drop()

    def _start(
        self,
        read: Job,
        claimed: Job,
        running: Execution,
        receipt_handle: Receipt,
        expected: Expected[JobStamp] | None,
        started: Callable[[], None],
        known: Known | None = None,
    ) -> Disposition:
        """Its instant has come and it is claimed: start it unless its job changed meanwhile.
        `read`: its job as read on receipt; `claimed`: that job as it was claimed for (its named task
        resolved); `expected`: its read at the instant, when it was claimed ahead of it."""
        # Read the job again now that the execution is claimed and its instant has come: a cancel or
        # pause that landed between the first read and now still stops it, and one after this read
        # came after its start. (Whether it changed is read first: all of it only if it did.) Its named
        # task is resolved as of its instant too: a change to it acknowledged before then is run.
        job = self._effective(self._reread(read, expected, known), running.scheduled_at)
        ahead = expected is not None
        if job is not None and job.task_version != claimed.task_version:
            job, running = _as_claimed(job, claimed, running)
        for attempt in range(SKIP_ATTEMPTS):
            reason = skip_reason(job, running)
            if reason is None:
                assert job is not None
                if ahead:  # its start, recorded with its outcome
                    began = self._clock.now()
                    running = replace(
                        running, started_at=began, lateness_ms=run_records.lateness_ms(running, began)
                    )
                return self._run(job, running, receipt_handle, started)
            try:
                if self._skip(job, running, reason):
                    return Disposition.DONE
                # The job changed meanwhile (resumed, cancelled): this worker holds the run; look again.
                job = self._effective(self._store.jobs.get(running.job_id), running.scheduled_at)
            except RetryableStoreError:
                # Throttled, or a resume's transaction at the same moment: look again shortly.
                self._clock.sleep(0.1 * 2**attempt)
        self._release(running)
        return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)

    def _read_executions(
        self, refs: Iterable[ExecutionRef]
    ) -> tuple[dict[ExecutionRef, Execution], dict[ExecutionRef, str]]:
        """Executions as stored, for the batched reads on receipt (the store's method looked up at
        each call, so that a test may replace it)."""
        return self._store.executions.get_many(refs)

    def _read_stamps(self, job_ids: Iterable[str]) -> tuple[dict[str, JobStamp], dict[str, str]]:
        """Whether jobs changed (status, schedule version, time of last change), for the batched reads
        (the store's method looked up at each call, so that a test may replace it)."""
        return self._store.jobs.stamps(job_ids)

    def _reread(
        self, job: Job, expected: Expected[JobStamp] | None, known: Known | None = None
    ) -> Job | None:
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

    def _by_policy(
        self, job: Job, execution: Execution, now: datetime, receipt_handle: Receipt, receive_count: int
    ) -> Disposition | None:
        """The job's policy on a scheduled run about to start: None to start it; otherwise what was
        done (SKIPPED with its reason, or held back behind the job's previous run)."""
        decision = run_policy.before_start(
            job, execution, now, receive_count, lambda: self._store.executions.before(execution)
        )
        if decision is None:
            return None
        if isinstance(decision, run_policy.Skip):
            return self._policy_skip(job, execution, decision.reason, receipt_handle)
        # Stored as QUEUED so that a later run sees that one is already waiting.
        self._store.executions.put_if_absent(execution)
        logger.info(
            "execution waits for the job's previous run",
            extra={
                "execution_id": execution.id,
                "previous": decision.busy.id,
                "delay_seconds": decision.delay_seconds,
            },
        )
        return self._later(receipt_handle, decision.delay_seconds)

    def _run(
        self, job: Job, execution: Execution, receipt_handle: Receipt, started: Callable[[], None]
    ) -> Disposition:
        delay = self._attempts.run(job, execution, started)
        return Disposition.DONE if delay is None else self._later(receipt_handle, delay)

    def _policy_skip(
        self, job: Job, execution: Execution, reason: str, receipt_handle: Receipt
    ) -> Disposition:
        if not self._skip(job, execution, reason, status=ExecutionStatus.SKIPPED):
            return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)
        skipped = replace(
            execution, status=ExecutionStatus.SKIPPED, error=reason, finished_at=self._clock.now()
        )
        self._record_outcome(job, skipped)
        return Disposition.DONE

    def _release(self, running: Execution) -> None:
        try:
            self._store.executions.release_claim(running)
        except (LostRace, RetryableStoreError):
            # Its lease runs out instead: the message waits for it.
            logger.warning("claim not given back", extra={"execution_id": running.id})

    def _record_outcome(self, job: Job, finished: Execution) -> None:
        """Complete the job if this was its last execution, or record its outcome on it; then what
        follows (RunHooks.ended: auto-pause, notifications)."""
        self._hooks.ended(job, finished)

    def _ensure_outcome_recorded(self, execution: Execution) -> None:
        job = self._store.jobs.get(execution.job_id)
        # (a paused job too: a one-time job notes that its run ended, so that resuming does not repeat
        # it; and a finished one, whose notifications may not have been queued)
        if job is not None:
            self._record_outcome(job, execution)

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

    def _after_lost_claim(self, current: Execution | None, receipt_handle: Receipt) -> Disposition:
        """`current`: the execution as read after its claim failed (None: not stored)."""
        if current is None or current.status.is_final:
            return Disposition.DONE
        return self._later(receipt_handle, 5)

    def _later(self, receipt_handle: Receipt, seconds: float) -> Disposition:
        if isinstance(receipt_handle, Member):
            receipt_handle.later = seconds
        else:
            self._queue.change_visibility(receipt_handle, seconds)
        return Disposition.LATER
