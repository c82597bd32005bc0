"""scripts/quarantine.py works on the deployment its functions see: a stack's, or the environment's."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra.settings import DeploySettings
from punctual.platform.config import Settings
from scripts import quarantine

QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/Punctual-Work"


def resource(logical: str, kind: str, physical: str) -> dict[str, Any]:
    return {
        "LogicalResourceId": logical,
        "PhysicalResourceId": physical,
        "ResourceType": kind,
        "LastUpdatedTimestamp": "2026-12-01T00:00:00Z",
        "ResourceStatus": "CREATE_COMPLETE",
    }


def a_stack(function_environments: dict[str, dict[str, str]]) -> tuple[Any, Any, list[Stubber]]:
    """A stack named Punctual with a table and these functions (name: environment)."""
    cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
    functions = boto3.client("lambda", region_name="eu-west-1")
    stacks, lambdas = Stubber(cloudformation), Stubber(functions)
    summaries = [resource("Table", "AWS::DynamoDB::Table", "Punctual-Table-1A2B")] + [
        resource(name, "AWS::Lambda::Function", name) for name in function_environments
    ]
    stacks.add_response(
        "list_stack_resources", {"StackResourceSummaries": summaries}, {"StackName": "Punctual"}
    )
    for name, environment in function_environments.items():
        lambdas.add_response(
            "get_function_configuration",
            {"FunctionName": name, "Environment": {"Variables": environment}},
            {"FunctionName": name},
        )
    stacks.activate()
    lambdas.activate()
    return cloudformation, functions, [stacks, lambdas]


def test_a_stacks_settings_are_its_functions() -> None:
    # Given a stack deployed with 8 shards and 7 days of history: its functions' environment says so
    deployed = DeploySettings(shard_count=8, retention_days=7).function_settings()
    environment = {
        "PUNCTUAL_TABLE_NAME": "Punctual-Table-1A2B",
        "PUNCTUAL_QUEUE_URL": QUEUE,
        "PUNCTUAL_SHARD_COUNT": str(deployed.shard_count),
        "PUNCTUAL_RETENTION_DAYS": str(deployed.retention_days),
    }
    cloudformation, functions, stubbers = a_stack(
        {"Ticker": {"PUNCTUAL_SCANNER_FANOUT": "64"}, "Api": environment}
    )
    settings = quarantine.settings("Punctual", None, cloudformation, functions)
    # Then the script works with them, not the local defaults (a marker filed in shard 12 of 16 would
    # never be read by 8 shards)
    assert (settings.table_name, settings.queue_url, settings.region) == (
        "Punctual-Table-1A2B",
        QUEUE,
        "eu-west-1",
    )
    assert (settings.shard_count, settings.retention_days) == (8, 7)
    assert Settings().shard_count != 8
    for stubber in stubbers:
        stubber.assert_no_pending_responses()


def test_a_stack_without_a_punctual_function_is_named_in_the_error() -> None:
    cloudformation, functions, _ = a_stack({"Other": {"X": "1"}})
    with pytest.raises(SystemExit, match="stack Punctual has no Punctual function"):
        quarantine.settings("Punctual", None, cloudformation, functions)


def test_without_a_stack_or_the_environment_it_says_what_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUNCTUAL_TABLE_NAME", raising=False)
    monkeypatch.delenv("PUNCTUAL_QUEUE_URL", raising=False)
    with pytest.raises(SystemExit, match="pass --stack NAME"):
        quarantine.settings(None, None)
    # and with the environment, as the functions read it
    monkeypatch.setenv("PUNCTUAL_TABLE_NAME", "t")
    monkeypatch.setenv("PUNCTUAL_QUEUE_URL", QUEUE)
    assert quarantine.settings(None, None).table_name == "t"
