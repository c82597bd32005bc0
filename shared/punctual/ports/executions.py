"""Ports for executions, their notifications' deliveries, and dead letters."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol

from punctual.domain.executions import DeadLetter, Delivery, Execution, ExecutionRef, ExecutionStatus
from punctual.domain.models import DueMarker
from punctual.ports.pages import Page


class ExecutionStore(Protocol):
    """Executions: read, listed, and moved from status to status only as the lifecycle allows."""

    def get(self, job_id: str, scheduled_at: datetime, execution_id: str) -> Execution | None: ...

    def get_many(
        self, refs: Iterable[ExecutionRef]
    ) -> tuple[dict[ExecutionRef, Execution], dict[ExecutionRef, str]]: ...

    def statuses(self, markers: Iterable[DueMarker]) -> dict[str, ExecutionStatus | None]: ...

    def page(
        self,
        job_id: str,
        limit: int,
        start_key: dict[str, Any] | None,
        *,
        status: ExecutionStatus | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
        size: Callable[[Execution], int] | None = None,
    ) -> Page: ...

    def before(self, execution: Execution, limit: int = 10) -> list[Execution]: ...

    def scheduled_run(self, job_id: str, schedule_version: int) -> Execution | None: ...

    def put_new_many(self, executions: Iterable[Execution], markers: Iterable[DueMarker] = ()) -> None: ...

    def put_if_absent(self, execution: Execution) -> None: ...

    def claim(
        self,
        execution: Execution,
        *,
        now: datetime,
        lease_until: datetime,
        lateness_ms: int | None,
        task_version: int | None = None,
        stored: bool = False,
    ) -> Execution: ...

    def release_claim(self, running: Execution) -> None: ...

    def wait_behind(self, busy: Execution, waiter: Execution) -> None: ...

    def finish_attempt(
        self,
        execution: Execution,
        *,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str | None,
        result: Any,
    ) -> Execution: ...

    def put_end(self, execution: Execution) -> Execution: ...

    def retry_later(self, execution: Execution, *, next_attempt_at: datetime, error: str) -> Execution: ...

    def skip(
        self,
        execution: Execution,
        *,
        finished_at: datetime,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> None: ...

    def skip_while_paused(
        self,
        execution: Execution,
        *,
        finished_at: datetime,
        reason: str,
        status: ExecutionStatus = ExecutionStatus.CANCELLED,
    ) -> None: ...

    def give_up(
        self,
        execution: Execution,
        *,
        status: ExecutionStatus,
        finished_at: datetime,
        error: str,
        dead_lettered: bool = False,
    ) -> Execution: ...

    def requeue_dead_lettered(self, execution: Execution, now: datetime) -> Execution: ...


class DeliveryStore(Protocol):
    """A notification's delivery, kept on its execution."""

    def record(self, job_id: str, scheduled_at: datetime, execution_id: str, delivery: Delivery) -> None: ...


class DeadLetterStore(Protocol):
    """An owner's dead letters: executions whose message gave up, until redriven or dismissed."""

    def put(self, letter: DeadLetter) -> None: ...

    def page(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page: ...

    def get(self, owner: str, execution_id: str) -> DeadLetter | None: ...

    def delete(self, owner: str, execution_id: str) -> None: ...
