"""scripts/quarantine.py finds the deployment it works on: a stack's outputs, or the environment."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from scripts import quarantine

QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/Punctual-Work"


def stack_with(outputs: dict[str, str]) -> tuple[object, Stubber]:
    client = boto3.client("cloudformation", region_name="eu-west-1")
    stubber = Stubber(client)
    stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "Punctual",
                    "CreationTime": "2026-12-01T00:00:00Z",
                    "StackStatus": "CREATE_COMPLETE",
                    "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                }
            ]
        },
        {"StackName": "Punctual"},
    )
    stubber.activate()
    return client, stubber


def test_a_stacks_outputs_name_its_table_queue_and_region() -> None:
    client, stubber = stack_with({"TableName": "Punctual-Table-1A2B", "WorkQueueUrl": QUEUE, "ApiUrl": "x"})
    settings = quarantine.settings("Punctual", None, client)
    assert (settings.table_name, settings.queue_url, settings.region) == (
        "Punctual-Table-1A2B",
        QUEUE,
        "eu-west-1",
    )
    stubber.assert_no_pending_responses()


def test_a_stack_without_the_outputs_is_named_in_the_error() -> None:
    client, _ = stack_with({"ApiUrl": "x"})
    with pytest.raises(SystemExit, match="stack Punctual has no TableName, WorkQueueUrl output"):
        quarantine.settings("Punctual", None, client)


def test_without_a_stack_or_the_environment_it_says_what_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUNCTUAL_TABLE_NAME", raising=False)
    monkeypatch.delenv("PUNCTUAL_QUEUE_URL", raising=False)
    with pytest.raises(SystemExit, match="pass --stack NAME"):
        quarantine.settings(None, None)
    # and with the environment, as the functions read it
    monkeypatch.setenv("PUNCTUAL_TABLE_NAME", "t")
    monkeypatch.setenv("PUNCTUAL_QUEUE_URL", QUEUE)
    assert quarantine.settings(None, None).table_name == "t"
