"""The checks a job's request passes whether it creates the job or changes it: its task (inline or
named), that its schedule still has a future, that its policy fits its schedule. Each refusal is an
InvalidRequest naming the field. Shared by `punctual.jobs.creation`, `punctual.jobs.changes` and the
service's preview, so that a new job and a changed one are refused alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from punctual import tasks
from punctual.domain.cron.bounds import CronBoundExceeded
from punctual.domain.errors import InvalidRequest
from punctual.domain.models import DueMarker, TaskRef, TaskSpec
from punctual.domain.policies import JobPolicy, check_policy
from punctual.domain.schedules import PAST_TOLERANCE, AtSchedule, _Schedule
from punctual.scheduling.handoff import HandOff

if TYPE_CHECKING:
    from punctual.jobs.named_tasks import TaskService


@dataclass(frozen=True)
class TaskChecker:
    """Validates a job's task against the deployment's task policy and the owner's named tasks."""

    task_policy: tasks.TaskPolicy
    named_tasks: TaskService | None = None

    def check_kind(self, task: TaskSpec | TaskRef) -> None:
        """What can be told of a job's task without reading its parameters: an inline task's type is
        known, a named task's name is a name. (`check` then reads its parameters, which may take
        256 KiB: a batch checks every job's kind first.)"""
        if isinstance(task, TaskRef):
            if self.named_tasks is None:
                raise InvalidRequest("task: named tasks are not available here", field="task")
            self.named_tasks.check_ref_name(task)
        else:
            tasks.get(task.type)

    def check(
        self, owner: str, task: TaskSpec | TaskRef, seen: dict[str, Any] | None = None
    ) -> TaskSpec | TaskRef:
        """A job's task, validated: inline, or a reference to one of the owner's named tasks."""
        if isinstance(task, TaskRef):
            if self.named_tasks is None:
                raise InvalidRequest("task: named tasks are not available here", field="task")
            return self.named_tasks.check_job_task(owner, task, seen=seen)
        return tasks.validate(task, self.task_policy)


# Why a schedule without a run to come is refused: no run at or after now, before its `end_at` and
# before the latest instant a schedule may name.
NO_RUN_TO_COME = "schedule has no run time in the future (before its end_at, and before 2200-01-01T00:00:00Z)"


def check_not_past(schedule: _Schedule, now: datetime) -> None:
    if isinstance(schedule, AtSchedule) and schedule.at < now - PAST_TOLERANCE:
        late = int((now - schedule.at).total_seconds())
        tolerance = int(PAST_TOLERANCE.total_seconds()) // 60
        raise InvalidRequest(
            f"schedule.at is in the past ({late} s ago): a time up to {tolerance} minutes past runs at once, "
            "an earlier one is refused",
            field="schedule.at",
        )
    end_at = getattr(schedule, "end_at", None)
    if end_at is not None and end_at <= now:
        raise InvalidRequest("schedule.end_at is in the past", field="schedule.end_at")


def check_job_policy(policy: JobPolicy, schedule: _Schedule) -> None:
    try:
        check_policy(policy, schedule)
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise InvalidRequest(str(exc), field=field) from None


@contextmanager
def bounded() -> Iterator[None]:
    """A schedule whose runs cannot be found within the computation's bound is refused, by field."""
    try:
        yield
    except CronBoundExceeded as exc:
        raise InvalidRequest(
            f"schedule.expression: {exc} (within its bound); choose a schedule that runs more often",
            field="schedule.expression",
        ) from None


def file_one(handoff: HandOff, marker: DueMarker) -> DueMarker:
    """File a marker, claimed for this request to enqueue if due before the next tick (handoff.py)."""
    [filed] = handoff.file(marker)
    return filed
