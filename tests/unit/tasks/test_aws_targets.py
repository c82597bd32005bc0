"""The AWS target tasks' answers to AWS's errors, and their allow-lists, with stand-in clients (no network)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from punctual import tasks
from punctual.domain.models import TaskSpec
from punctual.platform.clock import ManualClock
from punctual.platform.target_arns import TARGETS
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy
from punctual.tasks.aws import execution_name, queue_url

QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders"
MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:nightly"
POLICY = TaskPolicy(sqs_queues=("arn:aws:sqs:*:123456789012:orders",), state_machines=(MACHINE,))


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, operation: str) -> Any:
        def call(**request: Any) -> Any:
            self.calls.append(request)
            raise self.error

        return call


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )


def context(client: Any, asked: list[tuple[str, str]] | None = None) -> TaskContext:
    def clients(service: str, region: str, timeout: int) -> Any:
        if asked is not None:
            asked.append((service, region))
        return client

    return TaskContext(
        job_id="job_1",
        execution_id="job_1.19a.7",
        scheduled_at=datetime(2026, 12, 1, 9, tzinfo=UTC),
        attempt=2,
        timeout_seconds=30,
        clock=ManualClock(datetime(2026, 12, 1, 9, tzinfo=UTC)),
        policy=POLICY,
        aws_clients=clients,
    )


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (client_error("ThrottlingException", 400), True),
        (client_error("KmsThrottled", 400), True),
        (client_error("InternalError", 500), True),
        (client_error("Whatever", 503), True),
        (client_error("AWS.SimpleQueueService.NonExistentQueue", 400), False),
        (client_error("AccessDenied", 403), False),
        (EndpointConnectionError(endpoint_url="https://sqs"), True),
    ],
)
def test_sqs_errors_are_retried_only_when_another_attempt_could_succeed(
    error: Exception, retryable: bool
) -> None:
    client = Failing(error)
    asked: list[tuple[str, str]] = []
    spec = TaskSpec(type="sqs", params={"queue_arn": QUEUE, "message": "x"})
    with pytest.raises(TaskFailed) as failed:
        tasks.run(spec, context(client, asked))
    assert failed.value.retryable is retryable
    # (a client of the queue's own region, sent to the queue's URL)
    assert asked == [("sqs", "eu-west-1")]
    assert (
        client.calls[0]["QueueUrl"]
        == queue_url(QUEUE)
        == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
    )


def test_a_resource_no_longer_allowed_fails_at_once_without_a_call() -> None:
    client = Failing(AssertionError("called"))
    spec = TaskSpec(type="sqs", params={"queue_arn": QUEUE.replace("orders", "payroll"), "message": "x"})
    with pytest.raises(TaskFailed) as failed:
        tasks.run(spec, context(client))
    assert not failed.value.retryable and "sqs_queues" in str(failed.value)
    assert client.calls == []


def test_a_step_functions_execution_already_started_by_an_earlier_attempt_is_this_one() -> None:
    client = Failing(client_error("ExecutionAlreadyExists", 400))
    spec = TaskSpec(type="stepfunctions", params={"state_machine_arn": MACHINE})
    result = tasks.run(spec, context(client))
    assert result == {
        "execution_arn": "arn:aws:states:eu-west-1:123456789012:execution:nightly:job_1.19a.7",
        "already_started": True,
    }
    # (its input is the same on every attempt: no attempt number in it)
    assert "attempt" not in client.calls[0]["input"]


def test_execution_names_are_the_execution_id_or_a_stable_digest() -> None:
    assert execution_name("job_1.19a.7") == "job_1.19a.7"
    long = "job_" + "a" * 100
    assert execution_name(long) == execution_name(long) != long
    assert len(execution_name(long)) <= 80


def test_every_target_refuses_at_creation_what_its_setting_does_not_allow() -> None:
    for target in TARGETS:
        arn = target.example.replace("*", "x").replace("123456789012", "999999999999")
        params = {target.param: arn, "message": "x"} if target.type in ("sqs", "sns") else {target.param: arn}
        with pytest.raises(tasks.InvalidRequest) as refused:
            tasks.validate(TaskSpec(type=target.type, params=params), TaskPolicy())
        assert refused.value.field == f"task.params.{target.param}", target.type
        assert target.setting in str(refused.value)
        # and the local stack's pattern allows anything in its moto
        assert target.is_allowed(target.example.replace("*", "x"), [target.local])
