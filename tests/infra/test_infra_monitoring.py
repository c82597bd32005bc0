"""Alarms (thresholds from the issue) notify an SNS topic; the dashboard shows what they watch."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from punctual.platform import observability as obs
from punctual.platform import resources

POWERTOOLS_DIMENSIONS = [{"Name": "service", "Value": obs.SERVICE}]


def _alarm(synthesized, suffix: str) -> dict[str, Any]:
    found = [
        a["Properties"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"] == f"{synthesized.stack_name}-{suffix}"
    ]
    assert len(found) == 1, suffix
    return found[0]


def _metric_math(alarm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """id -> MetricStat of each metric an expression alarm combines."""
    return {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}


def test_lateness_p99_over_two_seconds_alarms(synthesized):
    alarm = _alarm(synthesized, "LatenessP99")
    assert alarm["Namespace"] == obs.NAMESPACE
    assert alarm["MetricName"] == obs.LATENESS_MS
    assert alarm["Dimensions"] == POWERTOOLS_DIMENSIONS
    assert alarm["ExtendedStatistic"] == "p99"
    assert alarm["Threshold"] == 2000
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_scanner_errors_and_long_runs_alarm(synthesized):
    scanner, _ = synthesized.function("scanner")
    errors = _alarm(synthesized, "ScannerErrors")
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": scanner}}]
    assert errors["Threshold"] == 1
    assert errors["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    duration = _alarm(synthesized, "ScannerDuration")
    assert (duration["Namespace"], duration["MetricName"], duration["Statistic"]) == (
        "AWS/Lambda",
        "Duration",
        "Maximum",
    )
    assert duration["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": scanner}}]
    assert duration["Threshold"] == 45_000  # milliseconds
    assert duration["ComparisonOperator"] == "GreaterThanThreshold"


def test_work_queue_message_older_than_lookahead_plus_a_minute_alarms(synthesized, unprotected):
    # Given messages sent up to the lookahead (cdk.json: 90 s) early, aged from their send
    work_queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesWorkQueue")
    alarm = _alarm(synthesized, "WorkQueueOldestMessageAge")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [work_queue, "QueueName"]}}]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    # Then a message alarms only a minute past its lookahead, not while its delay holds it
    assert alarm["Threshold"] == 90 + 60
    assert "lookahead + 60 s (150 s): workers are falling behind" in alarm["AlarmDescription"]
    # and the threshold follows the context (-c lookahead_seconds=120 in the fixture)
    assert _alarm(unprotected, "WorkQueueOldestMessageAge")["Threshold"] == 120 + 60


def test_dead_letter_queue_not_empty_alarms(synthesized):
    dead_letter = synthesized.logical_id("AWS::SQS::Queue", "QueuesDeadLetterQueue")
    alarm = _alarm(synthesized, "DeadLetterQueueNotEmpty")
    stats = _metric_math(alarm)
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {
        "ApproximateNumberOfMessagesVisible",
        "ApproximateNumberOfMessagesNotVisible",
    }
    for stat in stats.values():
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead_letter, "QueueName"]}}
        ]
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    dead_lettered = _alarm(synthesized, "ExecutionsDeadLettered")
    assert (dead_lettered["Namespace"], dead_lettered["MetricName"]) == (obs.NAMESPACE, obs.DEAD_LETTERED)
    assert dead_lettered["Threshold"] == 1


def test_throttling_alarms_cover_every_function_and_the_table_with_its_indexes(synthesized):
    lambda_alarm = _alarm(synthesized, "LambdaThrottles")
    throttled = {
        json.dumps(s["Metric"]["Dimensions"], sort_keys=True)
        for s in _metric_math(lambda_alarm).values()
        if s["Metric"]["MetricName"] == "Throttles"
    }
    functions = {
        json.dumps([{"Name": "FunctionName", "Value": {"Ref": logical_id}}], sort_keys=True)
        for logical_id in synthesized.of_type("AWS::Lambda::Function")
    }
    assert throttled == functions
    table_alarms = [_alarm(synthesized, f"DynamoDb{kind}Throttles") for kind in ("Read", "Write")]
    for kind, table_alarm in zip(("Read", "Write"), table_alarms, strict=True):
        # (reads and writes apart: an alarm's math takes at most 10 metrics)
        metrics = _metric_math(table_alarm).values()
        assert {m["Metric"]["MetricName"] for m in metrics} == {f"{kind}ThrottleEvents"}
        indexes = {
            d["Value"]
            for m in metrics
            for d in m["Metric"]["Dimensions"]
            if d["Name"] == "GlobalSecondaryIndexName"
        }
        assert indexes == {index.name for index in resources.TABLE.indexes}
        assert len(metrics) == len(indexes) + 1  # and the table's own
    for alarm in (lambda_alarm, *table_alarms):
        assert alarm["Threshold"] == 1


def test_a_quarantined_execution_alarms(synthesized):
    alarm = _alarm(synthesized, "ExecutionsQuarantined")
    assert alarm["Namespace"] == obs.NAMESPACE
    assert alarm["MetricName"] == obs.EXECUTIONS_QUARANTINED
    assert alarm["Dimensions"] == POWERTOOLS_DIMENSIONS
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "scripts/quarantine.py" in alarm["AlarmDescription"]


def test_a_scanner_shard_behind_for_three_ticks_alarms(synthesized):
    alarm = _alarm(synthesized, "ScannerBehind")
    assert (alarm["Namespace"], alarm["MetricName"]) == (obs.NAMESPACE, obs.SCANNER_BEHIND_SECONDS)
    assert alarm["Dimensions"] == POWERTOOLS_DIMENSIONS
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["Statistic"]) == (120, 3, "Maximum")
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_every_alarm_notifies_the_topic_and_ignores_missing_data(synthesized):
    topic = synthesized.logical_id("AWS::SNS::Topic", "MonitoringAlarmTopic")
    alarms = synthesized.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) == 13
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching"


def test_alarm_email_subscribes_to_the_topic(synthesized, unprotected, template: Template, alarm_email):
    topic = synthesized.logical_id("AWS::SNS::Topic", "MonitoringAlarmTopic")
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "email", "Endpoint": alarm_email, "TopicArn": {"Ref": topic}},
    )
    # no e-mail in the context, no subscription
    assert unprotected.of_type("AWS::SNS::Subscription") == {}


def test_topic_requires_tls_and_lets_cloudwatch_publish(template: Template):
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        ),
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "sns:Publish",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                            }
                        ),
                    ]
                )
            }
        },
    )


# --- dashboard -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(synthesized) -> dict[str, Any]:
    (resource,) = synthesized.of_type("AWS::CloudWatch::Dashboard").values()
    body = resource["Properties"]["DashboardBody"]
    # References (queue names, function names) are spliced in by Fn::Join; stand them in.
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return dict(json.loads("".join(p if isinstance(p, str) else "REF" for p in parts)))


def _metric_names(dashboard: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for widget in dashboard["widgets"]:
        for metric in widget["properties"].get("metrics", []):
            # [namespace, name, dimension, value, ..., {options}]; "." repeats the previous entry
            names.update(m for m in metric[:2] if isinstance(m, str) and m != ".")
    return names


def test_dashboard_shows_punctual_metrics(dashboard):
    names = _metric_names(dashboard)
    for metric in (
        obs.JOBS_CREATED,
        obs.EXECUTIONS_ENQUEUED,
        obs.EXECUTIONS_STARTED,
        obs.EXECUTIONS_SUCCEEDED,
        obs.EXECUTIONS_FAILED,
        obs.EXECUTIONS_RETRIED,
        obs.LATENESS_MS,
        obs.SCANNER_DURATION_MS,
        obs.DEAD_LETTERED,
    ):
        assert metric in names, metric


def test_dashboard_shows_queues_lambda_and_dynamodb_health(dashboard):
    names = _metric_names(dashboard)
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "ApproximateNumberOfMessagesNotVisible",
        "Errors",
        "Throttles",
        "Duration",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
    ):
        assert metric in names, metric
    titles = {w["properties"].get("title") for w in dashboard["widgets"]}
    assert {"Lateness (ms)", "Dead-letter queue depth", "Lambda errors", "Alarms"} <= titles


def _api_widget(synthesized) -> dict[str, Any]:
    """The dashboard's API widget, each reference spliced in as `REF:<logical id>`."""
    (resource,) = synthesized.of_type("AWS::CloudWatch::Dashboard").values()
    parts = resource["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads(
        "".join(p if isinstance(p, str) else f"REF:{p['Ref']}" if "Ref" in p else "REF" for p in parts)
    )
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title") == "API requests and errors"]
    return dict(widget["properties"])


def test_dashboard_shows_the_http_apis_stage_metrics(synthesized):
    # Given the default stack (an HTTP API), then its widget reads the HTTP API's metrics by ApiId
    # and Stage: requests, 4xx, 5xx and p99 latency
    api = synthesized.logical_id("AWS::ApiGatewayV2::Api", "ApiHttpApi")
    metrics = _api_widget(synthesized)["metrics"]
    assert [m[:6] for m in metrics] == [
        ["AWS/ApiGateway", name, "ApiId", f"REF:{api}", "Stage", "v1"]
        for name in ("Count", "4xx", "5xx", "Latency")
    ]
    assert [m[6]["stat"] for m in metrics] == ["Sum", "Sum", "Sum", "p99"]
    assert metrics[3][6]["yAxis"] == "right"


def test_dashboard_shows_the_rest_apis_metrics(rest):
    # Given a REST API, then its widget reads the REST API's metrics by ApiName
    metrics = _api_widget(rest)["metrics"]
    assert [m[:4] for m in metrics] == [
        ["AWS/ApiGateway", name, "ApiName", f"{rest.stack_name}-api"]
        for name in ("Count", "4XXError", "5XXError", "Latency")
    ]
    assert [m[4]["stat"] for m in metrics] == ["Sum", "Sum", "Sum", "p99"]
