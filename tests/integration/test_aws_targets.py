"""The sqs, sns, eventbridge and stepfunctions tasks through the API and the worker, delivering to
moto (which serves all four) with the execution id; what the deployment does not allow is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from punctual.platform.clock import ManualClock
from punctual.tasks.aws import execution_name
from tests.world import World, mocked_world

ACCOUNT = "123456789012"  # moto's
REGION = "us-east-1"
ALLOWED = {
    "sqs_queues": (f"arn:aws:sqs:{REGION}:{ACCOUNT}:ok-*",),
    "sns_topics": (f"arn:aws:sns:{REGION}:{ACCOUNT}:ok-*",),
    "eventbridge_buses": (f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/ok-*",),
    "state_machines": (f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:ok-*",),
}


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, **ALLOWED) as w:
        yield w


def a_queue(world: World, name: str, **attributes: str) -> tuple[str, str]:
    url = world.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = world.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def messages(world: World, url: str) -> list[dict[str, Any]]:
    answer = world.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    )
    return list(answer.get("Messages", []))


def run_one(world: World, task: dict[str, Any]) -> dict[str, Any]:
    job = world.create({"type": "now"}, task)
    world.run_for(5)
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED", execution
    return execution


def test_sqs_delivers_the_message_with_the_execution_identity(world: World) -> None:
    url, arn = a_queue(world, "ok-orders")
    execution = run_one(world, {"type": "sqs", "params": {"queue_arn": arn, "message": {"order": 7}}})
    [message] = messages(world, url)
    assert json.loads(message["Body"]) == {"order": 7}
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attributes == {
        "Punctual-Execution-Id": execution["id"],
        "Punctual-Job-Id": execution["job_id"],
        "Punctual-Scheduled-At": execution["scheduled_at"],
        "Punctual-Attempt": "1",
    }
    assert execution["result"]["message_id"] == message["MessageId"]


def test_a_fifo_queue_gets_the_execution_id_as_its_deduplication_id(world: World) -> None:
    url, arn = a_queue(world, "ok-ledger.fifo", FifoQueue="true")
    execution = run_one(world, {"type": "sqs", "params": {"queue_arn": arn, "message": "entry"}})
    [message] = messages(world, url)
    assert message["Body"] == "entry"
    assert message["Attributes"]["MessageDeduplicationId"] == execution["id"]
    assert message["Attributes"]["MessageGroupId"] == execution["job_id"]


def test_sns_publishes_with_the_execution_identity(world: World) -> None:
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="ok-alerts")["TopicArn"]
    url, queue_arn = a_queue(world, "alerts-inbox")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    execution = run_one(world, {"type": "sns", "params": {"topic_arn": topic, "message": "disk full"}})
    [delivered] = messages(world, url)
    notification = json.loads(delivered["Body"])
    assert notification["Message"] == "disk full"
    assert notification["MessageAttributes"]["Punctual-Execution-Id"]["Value"] == execution["id"]
    assert execution["result"]["message_id"] == notification["MessageId"]


def test_eventbridge_puts_an_event_whose_detail_names_the_execution(world: World) -> None:
    events = boto3.client("events", region_name=REGION)
    bus = events.create_event_bus(Name="ok-bus")["EventBusArn"]
    url, queue_arn = a_queue(world, "bus-inbox")
    events.put_rule(Name="all", EventBusName="ok-bus", EventPattern=json.dumps({"source": ["punctual"]}))
    events.put_targets(Rule="all", EventBusName="ok-bus", Targets=[{"Id": "inbox", "Arn": queue_arn}])
    execution = run_one(world, {"type": "eventbridge", "params": {"event_bus_arn": bus, "payload": {"n": 1}}})
    [delivered] = messages(world, url)
    event = json.loads(delivered["Body"])
    assert event["detail-type"] == "Punctual Execution"
    assert event["detail"] == {
        "job_id": execution["job_id"],
        "execution_id": execution["id"],
        "scheduled_at": execution["scheduled_at"],
        "attempt": 1,
        "payload": {"n": 1},
    }


def test_stepfunctions_starts_one_execution_named_after_the_execution_id(world: World) -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(
        name="ok-nightly",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
    )["stateMachineArn"]
    task = {"type": "stepfunctions", "params": {"state_machine_arn": machine, "payload": {"day": 1}}}
    execution = run_one(world, task)
    [started] = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert started["name"] == execution_name(execution["id"]) == execution["id"]
    described = sfn.describe_execution(executionArn=started["executionArn"])
    assert json.loads(described["input"]) == {
        "job_id": execution["job_id"],
        "execution_id": execution["id"],
        "scheduled_at": execution["scheduled_at"],
        "payload": {"day": 1},
    }
    # and a second delivery of the same execution (a duplicate message, a retry after a lost
    # answer) starts nothing new: Step Functions answers the same name and input with that execution
    again = sfn.start_execution(stateMachineArn=machine, name=started["name"], input=described["input"])
    assert again["executionArn"] == started["executionArn"]
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 1


NOT_ALLOWED = [
    (
        {
            "type": "sqs",
            "params": {"queue_arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:payroll", "message": "x"},
        },
        "queue_arn",
    ),
    (
        {
            "type": "sns",
            "params": {"topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:payroll", "message": "x"},
        },
        "topic_arn",
    ),
    (
        {
            "type": "eventbridge",
            "params": {"event_bus_arn": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"},
        },
        "event_bus_arn",
    ),
    (
        {
            "type": "stepfunctions",
            "params": {"state_machine_arn": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:payroll"},
        },
        "state_machine_arn",
    ),
    (
        {
            "type": "sqs",
            "params": {"queue_arn": "https://sqs.us-east-1.amazonaws.com/1/q", "message": "x"},
        },
        "queue_arn",
    ),
]


def test_a_target_the_deployment_does_not_allow_is_refused_naming_the_field(world: World) -> None:
    for task, field in NOT_ALLOWED:
        answer = world.api("POST", "/jobs", {"task": task, "schedule": {"type": "now"}})
        assert answer.status == 422, answer.body
        assert answer.body["field"] == f"task.params.{field}"
    assert world.api("GET", "/jobs").body["items"] == []
    assert world.drain() == 0


def test_a_missing_queue_fails_at_once(world: World) -> None:
    # Given an allowed queue that does not exist
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:ok-missing"
    job = world.create(
        {"type": "now"},
        {"type": "sqs", "params": {"queue_arn": arn, "message": "x"}},
        retry={"max_attempts": 3},
    )
    world.run_for(5)
    # Then the execution failed on its first attempt (another would meet the same), saying why
    [execution] = world.executions(job["id"])
    assert execution["status"] == "FAILED" and execution["attempts"] == 1, execution
    assert "sqs" in execution["error"]
