"""Pausing and resuming a one-time job around its run, and driving the run, for the tests of a job
paused while its run is under way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import boto3

from punctual import tasks
from punctual.domain.work import WorkItem
from punctual.execution.dead_letters import dead_letter
from punctual.platform import resources
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from punctual.tasks import TaskContext
from tests.world import World


def at(world: World, seconds: float) -> dict[str, str]:
    return {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=seconds))}


@contextmanager
def during_the_run(
    world: World,
    action: Callable[[], Any],
    *,
    first_fails: bool = False,
    noted: Callable[[TaskContext], Any] = lambda context: context.job_id,
) -> Iterator[list[Any]]:
    """Do `action` while the task runs its first time (a user pausing the job meanwhile); with
    `first_fails`, that attempt then fails, to be retried. Yields what `noted` says of each run."""
    runs: list[Any] = []
    real = tasks.run

    def run(spec: Any, context: TaskContext) -> Any:
        runs.append(noted(context))
        if len(runs) == 1:
            action()
            if first_fails:
                raise tasks.TaskFailed("try again", retryable=True)
        return real(spec, context)

    with mock.patch("punctual.tasks.run", side_effect=run):
        yield runs


def first_attempt_fails(
    world: World, action: Callable[[], Any] = lambda: None
) -> AbstractContextManager[list[Any]]:
    """The task's first attempt does `action` and fails (to be retried); later ones run. Yields the
    attempts' numbers."""
    return during_the_run(world, action, first_fails=True, noted=lambda context: context.attempt)


def expire_executions(job_id: str) -> None:
    """What DynamoDB's TTL does to a job's history `retention_days` after it (moto never does)."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    items = client.query(
        TableName=resources.TABLE.name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :exec)",
        ExpressionAttributeValues={":pk": {"S": f"JOB#{job_id}"}, ":exec": {"S": "EXEC#"}},
    )["Items"]
    for item in items:
        client.delete_item(TableName=resources.TABLE.name, Key={"pk": item["pk"], "sk": item["sk"]})


def dead_lettered(world: World, execution: dict[str, Any]) -> None:
    """What the dead-letter handler does with a message of this (stored) execution."""
    item = WorkItem(
        job_id=execution["job_id"],
        execution_id=execution["id"],
        scheduled_at=parse_rfc3339(execution["scheduled_at"]),
    )
    dead_letter(world.store, world.clock, item)


def pause(world: World, job_id: str) -> None:
    answer = world.api("POST", f"/jobs/{job_id}/pause")
    assert answer.status == 200, answer.body


def resume(world: World, job_id: str) -> dict[str, Any]:
    answer = world.api("POST", f"/jobs/{job_id}/resume")
    assert answer.status == 200, answer.body
    return dict(answer.body)


def stored_status(world: World, job_id: str) -> str:
    """The job's status as stored (GET /jobs/{id} shows a run's end on its job before it is written)."""
    job = world.store.jobs.get(job_id)
    assert job is not None
    return str(job.status.value)
