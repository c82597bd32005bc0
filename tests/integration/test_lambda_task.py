"""The `lambda` task through the API and the worker, against moto's Lambda (which answers each
invocation with the event it was given, since it cannot run functions without Docker)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from punctual.platform.clock import ManualClock
from tests.lambdas import create_echo_function
from tests.world import World, mocked_world

ALLOWED = "arn:aws:lambda:us-east-1:123456789012:function:reports-*"


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, lambda_functions=(ALLOWED,)) as w:
        yield w


def create_function(name: str) -> str:
    return create_echo_function(name, boto3.session.Session(region_name="us-east-1"))


def lambda_task(arn: str, **params: Any) -> dict[str, Any]:
    return {"type": "lambda", "params": {"function_arn": arn, **params}}


def test_a_job_invokes_its_function_with_the_execution_in_the_event(world: World) -> None:
    # Given a function the deployment allows, and a job that invokes it now with a payload
    arn = create_function("reports-daily")
    job = world.create({"type": "now"}, lambda_task(arn, payload={"day": "2026-12-01"}))

    # When the workers poll
    world.run_for(5)

    # Then the execution succeeded, and what the function received (moto's answer is its event)
    # named the job, the execution and its attempt beside the payload
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED", execution
    assert execution["result"]["status"] == 200
    assert execution["result"]["payload"] == {
        "job_id": job["id"],
        "execution_id": execution["id"],
        "scheduled_at": execution["scheduled_at"],
        "attempt": 1,
        "payload": {"day": "2026-12-01"},
    }
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_function_the_deployment_does_not_allow_is_refused_and_nothing_is_stored(world: World) -> None:
    # Given a function outside the allowed patterns
    arn = create_function("billing")

    # When a job names it / Then the API refuses it, saying which field and which setting
    answer = world.api("POST", "/jobs", {"task": lambda_task(arn), "schedule": {"type": "now"}})
    assert answer.status == 422
    assert answer.body["field"] == "task.params.function_arn"
    assert "lambda_functions" in answer.body["message"]
    # and nothing was stored or queued
    assert world.api("GET", "/jobs").body["items"] == []
    assert world.drain() == 0


def test_a_job_can_be_changed_to_invoke_a_function_and_back(world: World) -> None:
    # Given a webhook job
    arn = create_function("reports-weekly")
    job = world.create({"type": "cron", "expression": "0 9 * * 1"})

    # When its task is changed to an allowed function / to one not allowed
    changed = world.api("PATCH", f"/jobs/{job['id']}", {"task": lambda_task(arn, invocation="async")})
    refused = world.api(
        "PATCH", f"/jobs/{job['id']}", {"task": lambda_task(arn.replace("reports-weekly", "payroll"))}
    )

    # Then the first is taken with its defaults, the second refused, leaving the first in place
    assert changed.status == 200, changed.body
    assert changed.body["task"] == lambda_task(arn, invocation="async")
    assert refused.status == 422
    assert world.job(job["id"])["task"] == lambda_task(arn, invocation="async")


def test_the_task_list_describes_the_lambda_task_and_its_parameters(world: World) -> None:
    answer = world.api("GET", "/tasks")
    [described] = [task for task in answer.body["types"] if task["type"] == "lambda"]
    assert "lambda_functions" in described["description"]
    assert set(described["params"]["properties"]) == {"function_arn", "payload", "invocation"}
