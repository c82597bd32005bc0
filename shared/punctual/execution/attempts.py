"""One attempt of a claimed execution: run its task, then record its outcome.

The worker (punctual.execution.worker) decides whether and when an execution runs and claims it; this runs the
task with its context, writes success, failure or the retry to come (riding out throttling: an
outcome lost would mean running the task again) and hands the end to the run hooks. It answers
in seconds until the retry, so that the work message's visibility stays the worker's to set.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from punctual import tasks
from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, end_in_batch
from punctual.execution import run_records
from punctual.execution.hooks import RunHooks, persist
from punctual.execution.run_records import truncate
from punctual.platform.clock import Clock
from punctual.platform.observability import (
    EXECUTIONS_FAILED,
    EXECUTIONS_RETRIED,
    EXECUTIONS_STARTED,
    EXECUTIONS_SUCCEEDED,
    LATENESS_MS,
    logger,
    metrics,
)
from punctual.ports.store import Store
from punctual.tasks import AwsClients, LambdaClients, Prepared, TaskContext, TaskFailed, TaskPolicy
from punctual.tasks.netguard import Resolver

MAX_ERROR_CHARS = 1000

_T = TypeVar("_T")


def _nothing() -> None:
    pass


class Attempts:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        hooks: RunHooks,
        rng: random.Random,
        *,
        task_policy: TaskPolicy,
        result_max_bytes: int,
        resolver: Resolver,
        lambda_clients: LambdaClients | None,
        aws_clients: AwsClients | None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._hooks = hooks
        self._rng = rng
        self._task_policy = task_policy
        self._result_max_bytes = result_max_bytes
        self._resolver = resolver
        self._lambda_clients = lambda_clients
        self._aws_clients = aws_clients

    def prepare(self, job: Job, execution: Execution) -> Prepared:
        """The attempt's task made ready ahead of its start (tasks.prepare); `run` it with `prepared`."""
        return tasks.prepare(job.task, self._context(job, execution))

    def launch(self, job: Job, execution: Execution, prepared: Prepared) -> bool:
        """Start the attempt's prepared task now without waiting for its answer (Prepared.launch):
        True if it went; `run` it then, with `prepared`, to take the answer and record the outcome."""
        return prepared.launch(self._context(job, execution))

    def run(
        self,
        job: Job,
        execution: Execution,
        started: Callable[[], None] = _nothing,
        *,
        leased: bool = False,
        prepared: Prepared | None = None,
        ends_after: Callable[[], None] = _nothing,
        noted: Callable[[dict[str, Any]], None] | None = None,
        defer: Callable[[Job, Execution], None] | None = None,
    ) -> float | None:
        """Run the claimed attempt and record its outcome: the seconds until its retry, or None when
        the work message is done with (ended, or another worker took over). `started` is called as
        its task starts, `ends_after` before its outcome is written (the environment's StartsFirst).
        `leased`: a first attempt run under its pack's lease, unclaimed and not stored (RUNNING only
        in memory): its end stores it, start and all, in one write. `prepared`: its task as
        `prepare` made it ready (None: started cold). `noted`: where a success's log fields go
        instead of a line of its own (its pack's one line); a failure or a retry has its own line,
        with its error. `defer`: where a leased success whose end goes in its batch's ends item
        (`models.end_in_batch`) goes instead of its write: its pack writes it with the others
        (`write_deferred`)."""
        # One INFO line per attempt, at its end, or a share of its pack's (CloudWatch Logs bills every
        # byte: a start line too cost as much as all of an execution's DynamoDB reads); the start is
        # at DEBUG.
        log = run_records.attempt_log(job, execution)
        if execution.attempts == 1:
            metrics.add_metric(name=EXECUTIONS_STARTED, unit="Count", value=1)
            metrics.add_metric(
                name=LATENESS_MS, unit="Milliseconds", value=execution.lateness_ms or 0, resolution=1
            )
            self._hooks.started(job, execution)
        logger.debug("execution started", extra=log)
        context = self._context(job, execution)
        # (a run under its pack's lease began as its pack started it: Firing may have launched it)
        began = execution.started_at if leased and execution.started_at else self._clock.now()
        started()
        try:
            result = tasks.run(job.task, context) if prepared is None else prepared.fire(context)
        except TaskFailed as exc:
            took = run_records.ms(self._clock.now() - began)
            return self._failed(job, execution, str(exc), exc.retryable, exc.result, took, leased, ends_after)
        except Exception as exc:
            logger.exception("task raised", extra=log)
            error = f"{type(exc).__name__}: {exc}"
            took = run_records.ms(self._clock.now() - began)
            return self._failed(job, execution, error, True, None, took, leased, ends_after)
        ended = self._clock.now()
        log["took_ms"] = run_records.ms(ended - began)
        if leased and defer is not None:
            done = _ended(
                execution, ExecutionStatus.SUCCEEDED, ended, None, truncate(result, self._result_max_bytes)
            )
            if end_in_batch(job, done, ended):
                defer(job, done)
                metrics.add_metric(name=EXECUTIONS_SUCCEEDED, unit="Count", value=1)
                self._log_success(log, noted)
                return None
        try:
            finished = self._persist(
                lambda: self._end(
                    execution,
                    ExecutionStatus.SUCCEEDED,
                    ended,
                    None,
                    truncate(result, self._result_max_bytes),
                    leased,
                ),
                ends_after,
            )
        except LostRace:
            return None  # our lease ran out and another worker took over: its outcome stands
        metrics.add_metric(name=EXECUTIONS_SUCCEEDED, unit="Count", value=1)
        self._log_success(log, noted)
        self._hooks.ended(job, finished)
        return None

    def write_deferred(self, job: Job, execution: Execution) -> None:
        """The end of a run `defer`red whose batch's ends item did not take it (a change marked its
        job, or it is too large): written as a leased run's end is (the pause protocol's way if its
        job moved on), and its job's end hooks run."""
        try:
            finished = self._persist(lambda: self._store.executions.put_end(execution), _nothing)
        except LostRace:
            return  # another worker's end of this run stands
        self._hooks.ended(job, finished)

    def _log_success(self, log: dict[str, Any], noted: Callable[[dict[str, Any]], None] | None) -> None:
        if noted is None:
            logger.info("execution succeeded", extra=log)
        else:
            logger.debug("execution succeeded", extra=log)
            noted(log)

    def _context(self, job: Job, execution: Execution) -> TaskContext:
        return TaskContext(
            job_id=job.id,
            execution_id=execution.id,
            scheduled_at=execution.scheduled_at,
            attempt=execution.attempts,
            timeout_seconds=job.timeout_seconds,
            clock=self._clock,
            policy=self._task_policy,
            resolver=self._resolver,
            lambda_clients=self._lambda_clients,
            aws_clients=self._aws_clients,
            job_name=job.name,
            signing_keys=() if job.signing is None else job.signing.active(self._clock.now()),
        )

    def _failed(
        self,
        job: Job,
        execution: Execution,
        error: str,
        retryable: bool,
        result: Any,
        took_ms: int,
        leased: bool = False,
        ends_after: Callable[[], None] = _nothing,
    ) -> float | None:
        error = error[:MAX_ERROR_CHARS]
        ended = self._clock.now()
        log = {**run_records.attempt_log(job, execution), "took_ms": took_ms, "error": error}
        if retryable and execution.attempts < job.retry.max_attempts:
            delay = job.retry.delay_after(execution.attempts, self._rng)
            next_attempt_at = self._clock.now() + timedelta(seconds=delay)
            try:
                self._persist(lambda: self._retry(execution, next_attempt_at, error, leased), ends_after)
            except LostRace:
                return None
            metrics.add_metric(name=EXECUTIONS_RETRIED, unit="Count", value=1)
            logger.info("execution will retry", extra={**log, "delay_seconds": round(delay, 3)})
            return delay
        try:
            finished = self._persist(
                lambda: self._end(
                    execution,
                    ExecutionStatus.FAILED,
                    ended,
                    error,
                    truncate(result, self._result_max_bytes),
                    leased,
                ),
                ends_after,
            )
        except LostRace:
            return None
        metrics.add_metric(name=EXECUTIONS_FAILED, unit="Count", value=1)
        logger.info("execution failed", extra=log)
        self._hooks.ended(job, finished)
        return None

    def _end(
        self,
        execution: Execution,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str | None,
        result: Any,
        leased: bool,
    ) -> Execution:
        if not leased:
            return self._store.executions.finish_attempt(
                execution, status=status, finished_at=finished_at, error=error, result=result
            )
        return self._store.executions.put_end(_ended(execution, status, finished_at, error, result))

    def _retry(self, execution: Execution, next_attempt_at: datetime, error: str, leased: bool) -> Execution:
        if not leased:
            return self._store.executions.retry_later(execution, next_attempt_at=next_attempt_at, error=error)
        waiting = replace(
            execution,
            status=ExecutionStatus.RETRYING,
            next_attempt_at=next_attempt_at,
            error=error,
            lease_until=None,
        )
        return self._store.executions.put_end(waiting)

    def _persist(self, write: Callable[[], _T], ends_after: Callable[[], None]) -> _T:
        ends_after()  # (the starts of its instant first)
        return persist(write, self._clock, self._rng)


def _ended(
    execution: Execution, status: ExecutionStatus, finished_at: datetime, error: str | None, result: Any
) -> Execution:
    """A run under its pack's lease, ended: its end as stored, its lease let go."""
    return replace(
        execution, status=status, finished_at=finished_at, error=error, result=result, lease_until=None
    )
