"""The worker: run one execution named by a work-queue message, at least once and never early.

Every status change is a conditional write, so a redelivered or duplicated message never re-runs a
finished execution, and a worker that lost its lease cannot overwrite the outcome of the one that
took over. Retries wait by message visibility, not by sleeping (what becomes of a message:
receipts.py; what the worker reads on receipt: receipt_reads.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.domain.executions import LEASE_MARGIN, Execution, ExecutionStatus
from punctual.domain.models import Job, JobStamp, ran_on_job, skip_reason
from punctual.domain.work import WorkItem
from punctual.execution import pausing, run_policy, run_records
from punctual.execution.attempts import Attempts
from punctual.execution.config import WorkerConfig
from punctual.execution.hooks import RunHooks
from punctual.execution.instant_reads import Expected
from punctual.execution.receipt_reads import Known, ReceiptReads
from punctual.execution.receipts import Disposition, Member, Receipt, failure_delay, later
from punctual.execution.run_records import unstored_execution
from punctual.platform.clock import Clock
from punctual.platform.observability import EXECUTIONS_SKIPPED, logger, metrics
from punctual.ports.queue import WorkQueue
from punctual.ports.store import Store
from punctual.tasks import AwsClients, LambdaClients, Prepared
from punctual.tasks.netguard import Resolver, system_resolver

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
        self._reads = ReceiptReads(store, clock)
        self._aws_clients = aws_clients
        # A job as it runs now: its named task resolved (named_tasks.TaskResolver.effective).
        self._effective: Resolve = named_tasks or (lambda job, at=None: job)
        # The job's outcome, auto-pause and notifications around each run (punctual.execution.hooks).
        # (without the deployment's hooks: every change within a day recorded for packs)
        self._hooks = hooks or RunHooks(
            store, clock, None, self._rng, sent_ahead=timedelta(days=1), queue=queue
        )
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
        )

    def read_ahead(self, items: Sequence[WorkItem]) -> Known:
        """The executions and jobs of a pack's members, read together (ReceiptReads.ahead)."""
        return self._reads.ahead(items)

    # ----------------------------- for a pack's members run under its lease (packs.py, firing.py)
    @property
    def store(self) -> Store:
        return self._store

    def effective(self, job: Job | None, at: datetime) -> Job | None:
        """The job as it runs at `at`: its named task resolved."""
        return self._effective(job, at)

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

    def prepare(self, job: Job, execution: Execution) -> Prepared:
        """A first attempt's task made ready ahead of its instant, for `run_leased` (tasks.prepare)."""
        return self._attempts.prepare(job, replace(execution, attempts=1))

    def launch(self, job: Job, running: Execution, prepared: Prepared) -> bool:
        """A first attempt's prepared task started without waiting for its answer (Attempts.launch):
        True if it went; `run_leased` then takes the answer and records the outcome."""
        return self._attempts.launch(job, running, prepared)

    def run_leased(
        self,
        job: Job,
        running: Execution,
        started: Callable[[], None],
        ends_after: Callable[[], None],
        receipt: Receipt,
        prepared: Prepared | None = None,
        defer: Callable[[Job, Execution], None] | None = None,
    ) -> Disposition:
        """Run a first attempt under its pack's lease (`running`: unclaimed, RUNNING in memory only;
        `prepared`: its task as `prepare` made it ready; `started` called as it starts, `ends_after`
        before its outcome is written: the environment's StartsFirst). `defer`: where its end goes if
        it ends in its batch's ends item (Attempts.run), for its pack to write."""
        delay = self._attempts.run(
            job,
            running,
            started,
            leased=True,
            prepared=prepared,
            ends_after=ends_after,
            noted=receipt.note if isinstance(receipt, Member) else None,
            defer=defer,
        )
        return Disposition.DONE if delay is None else self._later(receipt, delay)

    def write_deferred(self, job: Job, execution: Execution) -> None:
        """A deferred end its batch's ends item did not take, on its job's item (Attempts.write_deferred)."""
        self._attempts.write_deferred(job, execution)

    def handle(
        self,
        item: WorkItem,
        receipt_handle: Receipt,
        receive_count: int = 1,
        known: Known | None = None,
        *,
        early_wait: timedelta | None = None,
    ) -> Disposition:
        """`known`: its execution and job, read with its pack's (None: read here). `early_wait`: how
        early before its instant it waits here (None: a lone message's, `WorkerConfig.lone_early_wait`;
        a member of a pack held under its lease waits with its pack)."""
        try:
            return self._handle(item, receipt_handle, receive_count, known, early_wait)
        except Exception as exc:
            return self._later(
                receipt_handle, failure_delay(exc, item.execution_id, receive_count, self._rng)
            )

    def _handle(
        self,
        item: WorkItem,
        receipt_handle: Receipt,
        receive_count: int,
        known: Known | None = None,
        early_wait: timedelta | None = None,
    ) -> Disposition:
        allowed = self._config.lone_early_wait if early_wait is None else early_wait
        wait = (item.scheduled_at - self._clock.now()).total_seconds()
        if wait > allowed.total_seconds():
            return self._later(receipt_handle, wait)

        ref = (item.job_id, item.scheduled_at, item.execution_id)
        stored = self._reads.execution(ref, known)
        if stored is not None and stored.status.is_final:
            # A duplicate or redelivered message. If the worker that finished it died before updating
            # the job, do that now.
            self._hooks.found_ended(stored)
            return Disposition.DONE
        stored_job = self._reads.job(item.job_id, known)
        if stored is None and stored_job is not None and ran_on_job(stored_job, item.execution_id):
            # Ended, its end stored on its job's item with the job's completion (a one-time job's run
            # in a pack): as for one stored ended, above.
            assert stored_job.last_execution is not None
            self._hooks.ended(stored_job, stored_job.last_execution)
            return Disposition.DONE
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
            if early > self._config.lone_early_wait.total_seconds():
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
        expected = self._reads.expect(job.id, execution.scheduled_at) if ahead else None
        try:
            if ahead:
                self._clock.sleep((execution.scheduled_at - self._clock.now()).total_seconds())
                began = self._clock.now()
                # Its catch-up window is judged at its start, as for a run claimed then.
                late = None if running.manual else run_policy.too_late(job, running, began)
                if late is not None:
                    return self._policy_skip(job, running, late, receipt_handle)
            return self._start(stored_job or job, job, running, receipt_handle, expected, known)
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
        known: Known | None = None,
    ) -> Disposition:
        """Its instant has come and it is claimed: start it unless its job changed meanwhile.
        `read`: its job as read on receipt; `claimed`: that job as it was claimed for (its named task
        resolved); `expected`: its read at the instant, when it was claimed ahead of it."""
        # Read the job again now that the execution is claimed and its instant has come: a cancel or
        # pause that landed between the first read and now still stops it, and one after this read
        # came after its start. (Whether it changed is read first: all of it only if it did.) Its named
        # task is resolved as of its instant too: a change to it acknowledged before then is run.
        job = self._effective(self._reads.reread(read, expected, known), running.scheduled_at)
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
                return self._run(job, running, receipt_handle)
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
        busy = decision.busy
        if busy.waiter is None or busy.waiter.execution_id != execution.id:
            # Named on the run it waits for, whose end sends it on at once (RunHooks.ended); the
            # looks below are for when that is lost (a worker that died with the run).
            try:
                self._store.executions.wait_behind(busy, execution)
            except LostRace:
                return self._later(receipt_handle, 0)  # it has just ended: look again now
        logger.info(
            "execution waits for the job's previous run",
            extra={
                "execution_id": execution.id,
                "previous": decision.busy.id,
                "delay_seconds": decision.delay_seconds,
            },
        )
        return self._later(receipt_handle, decision.delay_seconds)

    def _run(self, job: Job, execution: Execution, receipt_handle: Receipt) -> Disposition:
        delay = self._attempts.run(job, execution)
        return Disposition.DONE if delay is None else self._later(receipt_handle, delay)

    def _policy_skip(
        self, job: Job, execution: Execution, reason: str, receipt_handle: Receipt
    ) -> Disposition:
        if not self._skip(job, execution, reason, status=ExecutionStatus.SKIPPED):
            return self._later(receipt_handle, LOST_SKIP_RETRY_SECONDS)
        skipped = replace(
            execution, status=ExecutionStatus.SKIPPED, error=reason, finished_at=self._clock.now()
        )
        self._hooks.ended(job, skipped)
        return Disposition.DONE

    def _release(self, running: Execution) -> None:
        try:
            self._store.executions.release_claim(running)
        except (LostRace, RetryableStoreError):
            # Its lease runs out instead: the message waits for it.
            logger.warning("claim not given back", extra={"execution_id": running.id})

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
        return later(self._queue, receipt_handle, seconds)
