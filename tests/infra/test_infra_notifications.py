"""Job notifications (the notification queue, the notifier) and execution status events (the table's
stream, its function, the stack's bus): their wiring and only the permissions they use."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.components.notifications import EVENTS_BATCH_SIZE
from infra.settings import DeploySettings
from punctual.platform import resources
from punctual.platform.config import Settings
from punctual.store import streams
from punctual_cli import capacity
from tests.infra.conftest import ALERT_TOPICS, OPS_BUS, TARGET_PATTERNS


def _actions_on(statements: list[dict[str, Any]], logical_id: str) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        targets = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        if statement["Effect"] == "Allow" and any(logical_id in str(t) for t in targets):
            found = statement["Action"]
            actions.update([found] if isinstance(found, str) else found)
    return actions


def _statements_with(statements: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    def actions(statement: dict[str, Any]) -> list[str]:
        found = statement["Action"]
        return [found] if isinstance(found, str) else list(found)

    return [s for s in statements if any(a.startswith(prefix) for a in actions(s))]


def test_the_notification_queue_redrives_to_its_own_dead_letter_queue(synthesized):
    queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesNotifyQueue")
    dead = synthesized.logical_id("AWS::SQS::Queue", "QueuesNotifyDeadLetterQueue")
    props = synthesized.resources[queue]["Properties"]
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dead, "Arn"]},
        "maxReceiveCount": resources.NOTIFY_QUEUE.max_receive_count,
    }
    assert props["VisibilityTimeout"] >= synthesized.function("notifier")[1]["Timeout"]
    # and an alarm says when a message reaches it
    alarms = [a["Properties"] for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()]
    [alarm] = [a for a in alarms if a["AlarmName"].endswith("NotifyDeadLetterQueueNotEmpty")]
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dead, "QueueName"]}}]


def test_the_notifier_consumes_the_notification_queue_with_partial_batch_responses(
    synthesized, template: Template
):
    queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesNotifyQueue")
    notifier, _ = synthesized.function("notifier")
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]},
            "FunctionName": {"Ref": notifier},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )
    on_queue = _actions_on(synthesized.statements_of("notifier"), queue)
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= on_queue


def test_only_the_worker_and_the_dead_letter_handler_queue_notifications(synthesized):
    queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesNotifyQueue")
    for name in sorted(resources.FUNCTIONS):
        sends = "sqs:SendMessage" in _actions_on(synthesized.statements_of(name), queue)
        assert sends == (name in ("worker", "dead_letter")), name
    # and every function knows the queue's URL
    for name in sorted(resources.FUNCTIONS):
        variables = synthesized.function(name)[1]["Environment"]["Variables"]
        assert variables[resources.ENV_NOTIFY_QUEUE_URL] == {"Ref": queue}


def test_the_notifier_reaches_only_the_targets_the_deployment_allows(unprotected, synthesized):
    # Given -c notification_targets=ALERT_TOPICS,OPS_BUS (see the fixture)
    statements = unprotected.statements_of("notifier")
    [publish] = _statements_with(statements, "sns:")
    [put] = _statements_with(statements, "events:")
    assert (publish["Action"], publish["Resource"]) == ("sns:Publish", ALERT_TOPICS)
    assert (put["Action"], put["Resource"]) == ("events:PutEvents", OPS_BUS)
    # and the API (which refuses jobs naming others) and the notifier (which checks again) know them
    for name in ("api", "notifier"):
        variables = unprotected.function(name)[1]["Environment"]["Variables"]
        settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
        assert settings.notification_targets == (ALERT_TOPICS, OPS_BUS), name
    # while the default stack allows none, and grants the notifier nothing beyond its queue and table
    assert _statements_with(synthesized.statements_of("notifier"), "sns:") == []
    assert _statements_with(synthesized.statements_of("notifier"), "events:") == []
    # and no other function may publish anywhere, but the worker where its own sns and eventbridge
    # tasks may (their allow-lists, sns_topics and eventbridge_buses: test_infra_functions), which
    # notification_targets does not widen
    for name in sorted(resources.FUNCTIONS):
        if name in ("notifier", "execution_events"):
            continue
        for prefix, setting in (("sns:", "sns_topics"), ("events:", "eventbridge_buses")):
            found = _statements_with(unprotected.statements_of(name), prefix)
            granted = sorted(
                r
                for s in found
                for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
            )
            assert granted == (sorted(TARGET_PATTERNS[setting]) if name == "worker" else []), name


def test_execution_status_changes_go_from_the_table_stream_to_the_stacks_bus(synthesized, template: Template):
    table = synthesized.logical_id("AWS::DynamoDB::Table", "StorageTable")
    assert synthesized.resources[table]["Properties"]["StreamSpecification"] == {
        "StreamViewType": "NEW_AND_OLD_IMAGES"
    }
    function, props = synthesized.function("execution_events")
    bus = synthesized.logical_id("AWS::Events::EventBus", "ExecutionEventsBus")
    assert synthesized.resources[bus]["Properties"]["Name"] == "Punctual-executions"
    assert props["Environment"]["Variables"][resources.ENV_EVENT_BUS_NAME] == {"Ref": bus}
    assert props["Environment"]["Variables"]["PUNCTUAL_EXECUTION_EVENTS"] == "all"
    (mapping,) = [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function}
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table, "StreamArn"]}
    assert mapping["StartingPosition"] == "LATEST"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # in batches of 100 records, whose changes it puts grouped (as the cost figures assume)
    assert mapping["BatchSize"] == EVENTS_BATCH_SIZE == capacity.Assumptions().events_batch
    assert "grouped by owner and status" in props["Description"]
    # only the records the store says write an execution (the integration tests apply the same
    # patterns to moto's stream): an execution's item, a run stored on its job's item, a batch's ends
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == streams.record_filters()
    sks = [p["dynamodb"]["Keys"]["sk"]["S"][0] for p in patterns]
    assert sks == [{"prefix": "EXEC#"}, "JOB", "ENDS"]
    # and what the stream gives up on after its retries is described on a queue, which alarms
    dropped = synthesized.logical_id("AWS::SQS::Queue", "ExecutionEventsDropped")
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [dropped, "Arn"]}}}
    alarms = [a["Properties"] for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()]
    [alarm] = [a for a in alarms if a["AlarmName"].endswith("ExecutionEventsDropped")]
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dropped, "QueueName"]}}]


def test_final_only_events_are_filtered_at_the_source(unprotected):
    function, props = unprotected.function("execution_events")
    assert props["Environment"]["Variables"]["PUNCTUAL_EXECUTION_EVENTS"] == "final"
    (mapping,) = [
        m["Properties"]
        for m in unprotected.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function}
    ]
    finals = '["CANCELLED","FAILED","SKIPPED","SUCCEEDED"]'
    for pattern in (f["Pattern"] for f in mapping["FilterCriteria"]["Filters"]):
        assert (
            f'"NewImage":{{"status":{{"S":{finals}}}}}' in pattern
            or f'"NewImage":{{"run":{{"M":{{"st":{{"S":{finals}}}}}}}}}' in pattern
            # (a batch's ends item holds only ends: the function checks each)
            or '"sk":{"S":["ENDS"]}' in pattern
        )


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        ({"execution_events": "sometimes"}, "execution_events"),
        ({"notification_targets": ["arn:aws:sqs:us-east-1:123456789012:q"]}, "SNS topic ARN pattern"),
    ],
)
def test_bad_settings_are_refused_at_synthesis(context: dict[str, Any], problem: str):
    with pytest.raises(ValueError, match=problem):
        DeploySettings.from_context(context.get)
