"""Named tasks and the AWS targets on the local stack, over HTTP: a task used by three jobs, changed
once, and the next executions of all three run the new version; each target delivering to the
stack's moto with the execution id."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from punctual_client.transport import PunctualClient
from tests.e2e.conftest import Stack, api_error, eventually, executions, in_seconds, wait_for_executions

pytestmark = pytest.mark.e2e

ACCOUNT = "123456789012"  # moto's
LOCAL_TASK_CACHE_SECONDS = 2.0


def a_queue(stack: Stack, name: str) -> tuple[str, str]:
    sqs = stack.aws("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def drain(stack: Stack, url: str, count: int) -> list[dict[str, Any]]:
    sqs = stack.aws("sqs")
    found: list[dict[str, Any]] = []

    def enough() -> bool:
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
        for message in answer.get("Messages", []):
            found.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return len(found) >= count

    eventually(enough, timeout=15, what=f"{count} message(s) in {url}", stack=stack)
    return found


def test_a_named_task_changed_once_runs_its_new_version_in_all_three_jobs(
    stack: Stack, alice: PunctualClient
) -> None:
    # Given a named task sending to a queue of the stack's moto, with a schema for what jobs give
    suffix = uuid.uuid4().hex[:8]
    url, arn = a_queue(stack, f"mail-{suffix}")
    name = f"mail-{suffix}"
    schema = {
        "type": "object",
        "required": ["message"],
        "properties": {
            "message": {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}}
        },
    }
    message = {"v": 1, "at": "{{ execution.scheduled_at }}"}
    alice.create_task(
        {
            "name": name,
            "type": "sqs",
            "params": {"queue_arn": arn, "message": message},
            "params_schema": schema,
        }
    )
    # (a job whose params break the schema is refused, the parameter named)
    refused = api_error(
        lambda: alice.create_job(
            {"task": name, "params": {"message": {"to": 7}}, "schedule": {"type": "now"}}
        )
    )
    assert (refused.status, refused.body["field"]) == (422, "params.message.to")

    # When three jobs use it, each with its own recipient
    recipients = ["ann", "bob", "cy"]
    jobs = [
        alice.create_job(
            {"task": name, "params": {"message": {"to": to}}, "schedule": {"type": "at", "at": in_seconds(1)}}
        )
        for to in recipients
    ]
    firsts = [wait_for_executions(stack, job["id"])[0] for job in jobs]
    sent = {json.loads(m["Body"])["to"]: m for m in drain(stack, url, 3)}
    # Then each ran version 1, its message carrying its execution's id and instant
    for to, execution in zip(recipients, firsts, strict=True):
        assert (execution["status"], execution["task_version"]) == ("SUCCEEDED", 1), execution
        body = json.loads(sent[to]["Body"])
        assert body == {"v": 1, "at": execution["scheduled_at"], "to": to}
        assert sent[to]["MessageAttributes"]["Punctual-Execution-Id"]["StringValue"] == execution["id"]

    # When the task is changed once, and each job runs again
    assert alice.update_task(name, {"params": {"queue_arn": arn, "message": {"v": 2}}})["version"] == 2
    time.sleep(LOCAL_TASK_CACHE_SECONDS + 0.5)  # (the workers' copy of a task lasts this long locally)
    for job in jobs:
        alice.run_job(job["id"])

    # Then the next execution of all three ran version 2
    for job in jobs:
        latest = wait_for_executions(stack, job["id"], count=2)[0]
        assert (latest["status"], latest["task_version"]) == ("SUCCEEDED", 2), latest
    assert sorted(
        (json.loads(m["Body"])["v"], json.loads(m["Body"])["to"]) for m in drain(stack, url, 3)
    ) == [(2, to) for to in recipients]


def test_every_aws_target_delivers_to_the_local_moto_with_the_execution_id(
    stack: Stack, alice: PunctualClient
) -> None:
    # Given a queue that hears from an SNS topic and an EventBridge bus, and a state machine
    suffix = uuid.uuid4().hex[:8]
    url, queue_arn = a_queue(stack, f"inbox-{suffix}")
    sns, events, sfn = stack.aws("sns"), stack.aws("events"), stack.aws("stepfunctions")
    topic = sns.create_topic(Name=f"alerts-{suffix}")["TopicArn"]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    bus = events.create_event_bus(Name=f"bus-{suffix}")["EventBusArn"]
    events.put_rule(Name=f"all-{suffix}", EventBusName=bus, EventPattern=json.dumps({"source": ["punctual"]}))
    events.put_targets(Rule=f"all-{suffix}", EventBusName=bus, Targets=[{"Id": "inbox", "Arn": queue_arn}])
    machine = sfn.create_state_machine(
        name=f"nightly-{suffix}",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
    )["stateMachineArn"]

    # When a job for each target runs now
    tasks = {
        "sqs": {"queue_arn": queue_arn, "message": "to sqs"},
        "sns": {"topic_arn": topic, "message": "to sns"},
        "eventbridge": {"event_bus_arn": bus, "payload": "to eventbridge"},
        "stepfunctions": {"state_machine_arn": machine, "payload": "to stepfunctions"},
    }
    jobs = {
        kind: alice.create_job({"task": {"type": kind, "params": params}, "schedule": {"type": "now"}})
        for kind, params in tasks.items()
    }
    ran = {kind: wait_for_executions(stack, job["id"])[0] for kind, job in jobs.items()}
    for kind, execution in ran.items():
        assert execution["status"] == "SUCCEEDED", (kind, execution)

    # Then each delivered, carrying its execution's id
    delivered = drain(stack, url, 3)
    by_body: dict[str, str] = {}
    for message in delivered:
        attributes = message.get("MessageAttributes") or {}
        if "Punctual-Execution-Id" in attributes:  # sqs itself, and sns delivering raw
            by_body[message["Body"]] = attributes["Punctual-Execution-Id"]["StringValue"]
        else:  # an EventBridge event
            event = json.loads(message["Body"])
            by_body[event["detail"]["payload"]] = event["detail"]["execution_id"]
    assert by_body == {
        "to sqs": ran["sqs"]["id"],
        "to sns": ran["sns"]["id"],
        "to eventbridge": ran["eventbridge"]["id"],
    }
    [started] = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert started["name"] == ran["stepfunctions"]["id"]
    assert (
        executions(alice, jobs["stepfunctions"]["id"])[0]["result"]["execution_arn"]
        == started["executionArn"]
    )
