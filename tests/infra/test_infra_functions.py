"""The four functions: one set of defaults, their triggers, and only the permissions they use."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from punctual.platform import observability, resources, target_arns
from punctual.platform.config import Settings
from tests.infra.conftest import BILLING_FUNCTION, REPORTS_FUNCTIONS, TARGET_PATTERNS

NAMES = sorted(resources.FUNCTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_function_has_the_shared_defaults(synthesized, name: str):
    _, props = synthesized.function(name)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    variables = props["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == observability.SERVICE
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == observability.NAMESPACE
    assert variables["LOG_LEVEL"] == "INFO"
    (layer,) = props["Layers"]
    layer_arn = layer if isinstance(layer, str) else str(layer)
    assert ":017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-arm64:32" in layer_arn
    # Its own log group, with a retention
    log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
    assert synthesized.resources[log_group]["Properties"]["RetentionInDays"] == 30


def test_all_functions_share_one_code_asset(synthesized):
    keys = {synthesized.function(name)[1]["Code"]["S3Key"] for name in NAMES}
    assert len(keys) == 1


@pytest.mark.parametrize("name", NAMES)
def test_function_environment_configures_punctual_settings(synthesized, name: str):
    # Given the variables CDK gives the function (the resource names are CloudFormation references)
    variables: dict[str, Any] = synthesized.function(name)[1]["Environment"]["Variables"]
    for key in (resources.ENV_TABLE_NAME, resources.ENV_QUEUE_URL, resources.ENV_DLQ_URL):
        assert isinstance(variables[key], dict), f"{key} should reference the deployed resource"
    # When the function reads them as it does at cold start
    settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
    # Then it has the deployment's configuration from cdk.json, not its local defaults
    assert settings.shard_count == 64
    assert settings.lookahead_seconds == 90
    assert settings.tick_seconds == 60
    assert settings.retention_days == 30


def test_command_line_context_configures_the_functions(unprotected, synthesized):
    # Given -c shard_count=32 -c webhook_allowed_networks=... -c log_level=debug (see the fixture)
    variables = unprotected.function("worker")[1]["Environment"]["Variables"]
    settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
    assert settings.shard_count == 32
    assert settings.webhook_allowed_networks == ("10.0.0.0/8", "192.168.1.0/24")
    assert variables["LOG_LEVEL"] == "DEBUG"
    (mapping,) = [
        m["Properties"]
        for m in unprotected.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": unprotected.function("worker")[0]}
    ]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 5}
    # and the default stack allows no private network at all
    default = synthesized.function("worker")[1]["Environment"]["Variables"]
    assert "PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS" not in default


def test_only_the_api_reads_the_cursor_secret_and_its_value_is_in_no_configuration(synthesized):
    (secret,) = synthesized.of_type("AWS::SecretsManager::Secret")
    for name in NAMES:
        variables = synthesized.function(name)[1]["Environment"]["Variables"]
        # (no value, and no dynamic reference CloudFormation would resolve into the environment)
        assert "PUNCTUAL_CURSOR_SECRET" not in variables and "resolve:secretsmanager" not in str(variables)
        reads = [
            s for s in synthesized.statements_of(name) if "secretsmanager:GetSecretValue" in str(s["Action"])
        ]
        if name == "api":
            assert variables["PUNCTUAL_CURSOR_SECRET_ARN"] == {"Ref": secret}
            assert [s["Resource"] for s in reads] == [{"Ref": secret}]
        else:
            assert "PUNCTUAL_CURSOR_SECRET_ARN" not in variables and reads == []


def test_worker_consumes_the_work_queue_with_partial_batch_responses(synthesized, template: Template):
    work_queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesWorkQueue")
    worker, _ = synthesized.function("worker")
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [work_queue, "Arn"]},
            "FunctionName": {"Ref": worker},
            "BatchSize": 1,
            "MaximumBatchingWindowInSeconds": 0,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 20},
        },
    )


def test_dead_letter_handler_consumes_the_dead_letter_queue(synthesized, template: Template):
    dead_letter_queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesDeadLetterQueue")
    handler, _ = synthesized.function("dead_letter")
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [dead_letter_queue, "Arn"]},
            "FunctionName": {"Ref": handler},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_scanner_runs_every_minute_without_retrying_a_stale_tick(synthesized, template: Template):
    scanner, props = synthesized.function("scanner")
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "State": "ENABLED",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [scanner, "Arn"]}})],
        },
    )
    assert props["Timeout"] < 60


def test_scanner_async_invocations_are_not_retried_and_expire_within_a_tick(synthesized):
    # Given the scanner's async invocation config: it governs the tick and the fan-out's invocations
    scanner, _ = synthesized.function("scanner")
    (config,) = [
        c["Properties"]
        for c in synthesized.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": scanner}
    ]
    # Then a missed shard group is left to the next tick, never retried beside it
    assert config["MaximumRetryAttempts"] == 0
    assert config["MaximumEventAgeInSeconds"] == 60
    assert config["Qualifier"] == "$LATEST"


def _scanner_fanout(synthesized) -> int:
    variables = synthesized.function("scanner")[1]["Environment"]["Variables"]
    return Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)}).scanner_fanout


def test_scanner_fans_out_as_the_context_says(synthesized, unprotected):
    # cdk.json deploys one scanner invocation per shard (64); -c scanner_fanout=1 (the fixture) turns it off
    assert _scanner_fanout(synthesized) == 64
    assert _scanner_fanout(unprotected) == 1
    # and only the scanner reads it
    for name in NAMES:
        if name != "scanner":
            assert "PUNCTUAL_SCANNER_FANOUT" not in synthesized.function(name)[1]["Environment"]["Variables"]


# --- least privilege -------------------------------------------------------------------------


def _actions_on(statements: list[dict[str, Any]], logical_id: str) -> set[str]:
    """Actions allowed on the resource `logical_id` (by Ref or GetAtt, including /index/*)."""
    actions: set[str] = set()
    for statement in statements:
        targets = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        if statement["Effect"] == "Allow" and any(logical_id in str(t) for t in targets):
            found = statement["Action"]
            actions.update([found] if isinstance(found, str) else found)
    return actions


@pytest.fixture(scope="module")
def ids(synthesized) -> dict[str, str]:
    return {
        "table": synthesized.logical_id("AWS::DynamoDB::Table", "StorageTable"),
        "work": synthesized.logical_id("AWS::SQS::Queue", "QueuesWorkQueue"),
        "dlq": synthesized.logical_id("AWS::SQS::Queue", "QueuesDeadLetterQueue"),
    }


def test_api_and_scanner_send_to_the_work_queue_and_nothing_more(synthesized, ids):
    for name in ("api", "scanner"):
        statements = synthesized.statements_of(name)
        assert "sqs:SendMessage" in _actions_on(statements, ids["work"])
        assert "sqs:ReceiveMessage" not in _actions_on(statements, ids["work"])
        assert _actions_on(statements, ids["dlq"]) == set()
        assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"} <= _actions_on(
            statements, ids["table"]
        )


def _lambda_statements(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def actions(statement: dict[str, Any]) -> list[str]:
        found = statement["Action"]
        return [found] if isinstance(found, str) else list(found)

    return [s for s in statements if any(a.startswith("lambda:") for a in actions(s))]


def test_scanner_may_invoke_itself_and_no_other_function(synthesized):
    # Given the fanned-out scanner (cdk.json) and its role's statements
    scanner, _ = synthesized.function("scanner")
    (statement,) = _lambda_statements(synthesized.statements_of("scanner"))
    # Then it may invoke its own unqualified ARN, the one the tick invokes and the handler reuses
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "lambda:InvokeFunction"
    assert statement["Resource"] == {"Fn::GetAtt": [scanner, "Arn"]}
    # and no other function may invoke anything
    for name in NAMES:
        if name != "scanner":
            assert _lambda_statements(synthesized.statements_of(name)) == [], name


def test_the_tick_starts_only_once_the_scanner_may_fan_out(synthesized):
    (policy,) = [
        logical_id
        for logical_id, p in synthesized.of_type("AWS::IAM::Policy").items()
        if _lambda_statements(p["Properties"]["PolicyDocument"]["Statement"])
    ]
    (rule,) = synthesized.of_type("AWS::Events::Rule").values()
    assert policy in rule["DependsOn"]


def test_the_worker_may_invoke_the_functions_the_deployment_allows_and_no_other(unprotected, synthesized):
    # Given -c lambda_functions=REPORTS_FUNCTIONS,BILLING_FUNCTION (see the fixture)
    (statement,) = _lambda_statements(unprotected.statements_of("worker"))
    # Then the worker may invoke exactly those, with their versions and aliases
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "lambda:InvokeFunction"
    assert sorted(statement["Resource"]) == sorted(
        [REPORTS_FUNCTIONS, f"{REPORTS_FUNCTIONS}:*", BILLING_FUNCTION, f"{BILLING_FUNCTION}:*"]
    )
    # and both the API (which refuses other functions) and the worker (which checks again) know them
    for name in ("api", "worker"):
        variables = unprotected.function(name)[1]["Environment"]["Variables"]
        settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
        assert settings.lambda_functions == (REPORTS_FUNCTIONS, BILLING_FUNCTION), name
    # while the default stack allows no function at all, and grants the worker none
    assert "PUNCTUAL_LAMBDA_FUNCTIONS" not in synthesized.function("worker")[1]["Environment"]["Variables"]
    assert _lambda_statements(synthesized.statements_of("worker")) == []


def test_scanner_without_fan_out_may_invoke_nothing(unprotected):
    assert _lambda_statements(unprotected.statements_of("scanner")) == []


def test_worker_consumes_and_holds_messages_but_does_not_send(synthesized, ids):
    on_queue = _actions_on(synthesized.statements_of("worker"), ids["work"])
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= on_queue
    assert "sqs:SendMessage" not in on_queue
    assert _actions_on(synthesized.statements_of("worker"), ids["dlq"]) == set()


def test_dead_letter_handler_reads_the_dead_letter_queue_and_updates_the_table(synthesized, ids):
    statements = synthesized.statements_of("dead_letter")
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage"} <= _actions_on(statements, ids["dlq"])
    assert _actions_on(statements, ids["work"]) == set()
    assert {"dynamodb:GetItem", "dynamodb:UpdateItem"} <= _actions_on(statements, ids["table"])


# Actions that support no resource-level permissions: X-Ray's (active tracing), and DynamoDB Streams'
# ListStreams, which a function reading the table's stream needs (execution_events).
_UNSCOPED = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}


@pytest.mark.parametrize("name", NAMES)
def test_wildcard_resources_are_only_actions_without_resource_permissions(synthesized, name: str):
    for statement in synthesized.statements_of(name):
        if statement["Resource"] == "*":
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert set(actions) <= _UNSCOPED, statement
            assert name == "execution_events" or all(action.startswith("xray:") for action in actions), (
                statement
            )


def test_function_roles_have_no_managed_policies(synthesized):
    for name in NAMES:
        role = synthesized.function(name)[1]["Role"]["Fn::GetAtt"][0]
        assert "ManagedPolicyArns" not in synthesized.resources[role]["Properties"]


def test_the_scanner_gets_a_full_vcpu_and_the_others_the_default(synthesized):
    # The scanner is CPU-bound (bench/scanner_throughput.py); Lambda gives a full vCPU at 1,769 MB
    assert synthesized.function("scanner")[1]["MemorySize"] == 1769
    assert synthesized.function("worker")[1]["MemorySize"] == 512


@pytest.mark.parametrize("name", ["api", "worker"])
def test_the_api_and_worker_may_write_in_transactions(synthesized, ids, name: str):
    # A resume giving a job back its run's version, and a worker cancelling a paused job's run, are
    # each a TransactWriteItems: an UpdateItem and a ConditionCheckItem
    actions = _actions_on(synthesized.statements_of(name), ids["table"])
    assert {"dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"} <= actions


def test_the_worker_may_reach_the_targets_the_deployment_allows_and_no_other(unprotected, synthesized):
    # Given -c sqs_queues=...,sns_topics=...,eventbridge_buses=...,state_machines=... (see the fixture)
    statements = unprotected.statements_of("worker")
    for target in target_arns.TARGETS:
        granted = _granted(statements, target.action)
        # Then the worker has the target's one action, on exactly the allowed resources (beside
        # Punctual's own: sqs:SendMessage on the notification queue, a reference, not a pattern)
        (statement,) = granted
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == target.action
        assert sorted(_as_list(statement["Resource"])) == sorted(TARGET_PATTERNS[target.setting]), target.type
        # and the API (which refuses others) and the worker (which checks again) know the setting
        for name in ("api", "worker"):
            variables = unprotected.function(name)[1]["Environment"]["Variables"]
            settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
            assert getattr(settings, target.setting) == TARGET_PATTERNS[target.setting], (name, target.type)
        # while the default stack allows none, and grants none
        default_statements = synthesized.statements_of("worker")
        assert _granted(default_statements, target.action) == []
        assert target.env not in synthesized.function("worker")[1]["Environment"]["Variables"]
    # and no other function may reach any of them (the work queue aside, which is Punctual's own)
    allowed = {pattern for patterns in TARGET_PATTERNS.values() for pattern in patterns}
    for name in NAMES:
        if name != "worker":
            for statement in unprotected.statements_of(name):
                resources_of = {r for r in _as_list(statement["Resource"]) if isinstance(r, str)}
                assert not allowed & resources_of, (name, statement)


def _granted(statements, action):
    """The statements granting `action` on ARN patterns (the deployment's allow-lists): Punctual's own
    resources are CloudFormation references instead."""
    return [
        s
        for s in statements
        if action in _as_list(s["Action"]) and all(isinstance(r, str) for r in _as_list(s["Resource"]))
    ]


def _as_list(value):
    return list(value) if isinstance(value, list) else [value]
