"""Logger, Metrics and Tracer, created once and imported everywhere.

Metric names are defined here and nowhere else: the dashboard and the alarms in infra/ use them too.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

_Handler = TypeVar("_Handler", bound=Callable[..., Any])

SERVICE = "punctual"
NAMESPACE = "Punctual"

# Metric names (Powertools Metrics, namespace NAMESPACE, dimension service=SERVICE).
JOBS_CREATED = "JobsCreated"
EXECUTIONS_ENQUEUED = "ExecutionsEnqueued"
EXECUTIONS_STARTED = "ExecutionsStarted"
EXECUTIONS_SUCCEEDED = "ExecutionsSucceeded"
EXECUTIONS_FAILED = "ExecutionsFailed"
EXECUTIONS_RETRIED = "ExecutionsRetried"
EXECUTIONS_SKIPPED = "ExecutionsSkipped"
LATENESS_MS = "LatenessMs"
SCANNER_DURATION_MS = "ScannerDurationMs"
# How far the scanner's furthest-behind shard is behind now (0 when every shard has read up to now).
SCANNER_BEHIND_SECONDS = "ScannerBehindSeconds"
DEAD_LETTERED = "ExecutionsDeadLettered"
# Jobs paused by their `policy.pause_after_failures`; notifications delivered and given up on.
JOBS_AUTO_PAUSED = "JobsAutoPaused"
NOTIFICATIONS_DELIVERED = "NotificationsDelivered"
NOTIFICATIONS_FAILED = "NotificationsFailed"
EXECUTIONS_QUARANTINED = "ExecutionsQuarantined"
# Burst forecast (punctual.scheduling.prescaling): the busiest coming minute's due executions, the share of what the
# deployment can start that it needs (over 100: late), and the worker mapping's minimum pollers.
COMING_MINUTE_EXECUTIONS = "ComingMinuteExecutions"
BURST_LOAD_PERCENT = "BurstLoadPercent"
WORKER_MINIMUM_POLLERS = "WorkerMinimumPollers"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class _NoSegment(BaseSegment):
    def close(self, end_time: int | None = None) -> None:
        pass

    def add_subsegment(self, subsegment: Any) -> None:
        pass

    def remove_subsegment(self, subsegment: Any) -> None:
        pass

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        pass


class _NoTracing(BaseProvider):
    """Where tracing is off. Powertools' tracer still opens a (dummy) X-Ray subsegment for every
    traced call when disabled, and each draws its id from a system call that lets go of the
    interpreter lock (punctual.platform.randomness says why that matters); this opens none."""

    _segment = _NoSegment()

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Iterator[BaseSegment]:
        yield self._segment

    @asynccontextmanager
    async def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> AsyncIterator[BaseSegment]:
        yield self._segment

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def patch(self, modules: Sequence[str]) -> None:
        pass

    def patch_all(self) -> None:
        pass


def _tracer_provider() -> BaseProvider | None:
    """None (Powertools' X-Ray provider) where tracing is on; off outside Lambda, with
    POWERTOOLS_TRACE_DISABLED and under SAM local, by Powertools' own rule."""
    return _NoTracing() if Tracer._is_tracer_disabled() else None


tracer = Tracer(service=SERVICE, provider=_tracer_provider())


def log_request_id(handler: _Handler) -> _Handler:
    """Stamp the handler's log lines with the invocation's request id, and nothing more.

    For the worker, whose every attempt writes a line: Powertools' `inject_lambda_context` adds the
    function's name, ARN and memory size and the cold-start flag to every line, about 150 bytes that
    the log group's name and the platform's own lines already say, and CloudWatch Logs bills them per
    execution.
    """

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        logger.append_keys(function_request_id=context.aws_request_id)
        try:
            return handler(event, context)
        finally:
            logger.remove_keys(["function_request_id"])

    return wrapper  # type: ignore[return-value]
