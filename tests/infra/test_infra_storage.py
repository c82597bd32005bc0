"""The table and the queues are built from punctual.platform.resources and carry their safety settings."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match, Template

from infra.components.storage import Storage
from infra.settings import DeploySettings
from punctual.platform import resources
from tests.infra.conftest import ALARM_EMAIL, Synthesized, synthesize


def test_table_keys_and_indexes_are_the_ones_the_local_stack_creates(synthesized):
    # Given the CreateTable arguments moto and the local stack use
    expected = resources.TABLE.create_table_kwargs()
    # When the deployed table is synthesized
    (table,) = synthesized.of_type("AWS::DynamoDB::Table").values()
    props = table["Properties"]
    # Then keys, attribute types and indexes are the same
    assert props["KeySchema"] == expected["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        expected["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    deployed = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in props["GlobalSecondaryIndexes"]}
    local = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in expected["GlobalSecondaryIndexes"]}
    assert deployed == local


def test_table_is_on_demand_encrypted_recoverable_expiring_and_protected(template: Template):
    template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": Match.object_like(
                {
                    "BillingMode": "PAY_PER_REQUEST",
                    "SSESpecification": {"SSEEnabled": True},
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "TimeToLiveSpecification": {
                        "AttributeName": resources.TABLE.ttl_attribute,
                        "Enabled": True,
                    },
                    "DeletionProtectionEnabled": True,
                }
            ),
        },
    )


def test_test_stacks_can_turn_deletion_protection_off(unprotected):
    # Given `-c deletion_protection=false`, then the table, its logs and the secret go with the stack
    (table,) = unprotected.of_type("AWS::DynamoDB::Table").values()
    assert table["Properties"]["DeletionProtectionEnabled"] is False
    assert table["DeletionPolicy"] == "Delete"
    for log_group in unprotected.of_type("AWS::Logs::LogGroup").values():
        assert log_group["DeletionPolicy"] == "Delete"
    (secret,) = unprotected.of_type("AWS::SecretsManager::Secret").values()
    assert secret["DeletionPolicy"] == "Delete"


def test_work_queue_redrives_to_the_dead_letter_queue(synthesized, template: Template):
    dead_letter = synthesized.logical_id("AWS::SQS::Queue", "QueuesDeadLetterQueue")
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "VisibilityTimeout": resources.WORK_QUEUE.visibility_timeout_seconds,
            "MessageRetentionPeriod": resources.WORK_QUEUE.retention_seconds,
            "RedrivePolicy": {
                "deadLetterTargetArn": {"Fn::GetAtt": [dead_letter, "Arn"]},
                "maxReceiveCount": resources.WORK_QUEUE.max_receive_count,
            },
        },
    )
    # The dead-letter queue keeps messages longer than the work queue, so none expire on the way.
    dlq = synthesized.resources[dead_letter]["Properties"]
    assert dlq["MessageRetentionPeriod"] == resources.DEAD_LETTER_QUEUE.retention_seconds
    assert dlq["MessageRetentionPeriod"] > resources.WORK_QUEUE.retention_seconds


def test_work_queue_visibility_covers_the_worker_timeout(synthesized):
    work_queue = synthesized.logical_id("AWS::SQS::Queue", "QueuesWorkQueue")
    visibility = synthesized.resources[work_queue]["Properties"]["VisibilityTimeout"]
    assert visibility >= synthesized.function("worker")[1]["Timeout"]
    dead_letter = synthesized.logical_id("AWS::SQS::Queue", "QueuesDeadLetterQueue")
    dlq_visibility = synthesized.resources[dead_letter]["Properties"]["VisibilityTimeout"]
    assert dlq_visibility >= synthesized.function("dead_letter")[1]["Timeout"]


def test_queues_are_encrypted_and_refuse_plain_http(synthesized):
    queues = synthesized.of_type("AWS::SQS::Queue")
    # the work and notification queues, each with its dead-letter queue, and the execution events'
    # failure destination
    assert len(queues) == 5
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    protected: set[str] = set()
    for policy in synthesized.of_type("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                protected.update(q["Ref"] for q in policy["Properties"]["Queues"])
    assert protected == set(queues)


def test_the_list_indexes_are_sparse_and_key_by_the_jobs_own_attributes(synthesized):
    # Given the deployed table's indexes
    (table,) = synthesized.of_type("AWS::DynamoDB::Table").values()
    indexes = {i["IndexName"]: i for i in table["Properties"]["GlobalSecondaryIndexes"]}

    def keys(name: str) -> list[tuple[str, str]]:
        return [(k["AttributeName"], k["KeyType"]) for k in indexes[name]["KeySchema"]]

    # Then every job is listed by its owner, newest first; a job named by its user by its name; and a
    # paused, cancelled or failing one by its flag (those alone carry `name` and `flag`: a plain job
    # writes no entry to either), and each projects keys only
    assert sorted(indexes) == ["by_flag", "by_name", "by_owner", "by_task"]
    assert keys("by_owner") == [("owner_pk", "HASH"), ("owner_sk", "RANGE")]
    assert keys("by_flag") == [("owner_pk", "HASH"), ("flag", "HASH"), ("owner_sk", "RANGE")]
    assert keys("by_name") == [("owner_pk", "HASH"), ("name", "RANGE"), ("owner_sk", "RANGE")]
    assert {indexes[n]["Projection"]["ProjectionType"] for n in indexes} == {"KEYS_ONLY"}
    # and its attributes are strings, as every item that has them stores them
    types = {a["AttributeName"]: a["AttributeType"] for a in table["Properties"]["AttributeDefinitions"]}
    assert {types[name] for name in ("owner_pk", "owner_sk", "flag", "name")} == {"S"}


@pytest.mark.parametrize("count", [0, 1, 2])
def test_an_existing_table_gains_the_list_indexes_one_deployment_at_a_time(count: int):
    # Given a deployment asking for `count` of the list indexes (DynamoDB adds one index an update)
    stack = Stack(App(), "Gaining")
    Storage(stack, "Storage", deletion_protection=False, list_indexes=count)
    # When synthesized
    (table,) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").values()
    names = [i["IndexName"] for i in table["Properties"]["GlobalSecondaryIndexes"]]
    # Then the table has by_owner, by_task and the first `count` list indexes, in their order
    assert names == ["by_owner", "by_task", *(i.name for i in resources.LIST_INDEXES[:count])]


@pytest.mark.parametrize("count", [2, 1, 0])
def test_an_earlier_versions_list_indexes_are_dropped_one_deployment_at_a_time(count: int):
    # Given a table that had by_status and by_outcome, keeping `count` of them
    stack = Stack(App(), "Dropping")
    Storage(stack, "Storage", deletion_protection=False, retired_indexes=count)
    (table,) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").values()
    names = [i["IndexName"] for i in table["Properties"]["GlobalSecondaryIndexes"]]
    # Then it has this version's indexes and the first `count` of those (the last dropped first)
    assert names == [
        *(i.name for i in resources.TABLE.indexes),
        *(i.name for i in resources.RETIRED_LIST_INDEXES[:count]),
    ]
    with pytest.raises(ValueError, match="retired_indexes"):
        Storage(Stack(App(), "Bad"), "Storage", deletion_protection=False, retired_indexes=3)


@pytest.mark.long
def test_the_retired_indexes_setting_drops_one_index_a_deployment(synthesized, tmp_path):
    # Given a table deployed by the version with by_status and by_outcome, and the deployments
    # docs/upgrading.md gives to upgrade it: `-c retired_indexes=2`, `-c retired_indexes=1`, the default
    earlier = {"by_owner", "by_task", "by_status", "by_outcome", "by_name"}
    steps = [
        synthesize(tmp_path / "2", {"alarm_email": ALARM_EMAIL, "retired_indexes": "2"}),
        synthesize(tmp_path / "1", {"alarm_email": ALARM_EMAIL, "retired_indexes": "1"}),
        synthesized,
    ]

    def table(step: Synthesized) -> tuple[set[str], set[str]]:
        (found,) = step.of_type("AWS::DynamoDB::Table").values()
        properties = found["Properties"]
        return (
            {i["IndexName"] for i in properties["GlobalSecondaryIndexes"]},
            {a["AttributeName"] for a in properties["AttributeDefinitions"]},
        )

    # When each is synthesized through the app (context to settings to the table)
    tables = [table(step) for step in steps]
    # Then the first adds by_flag and keeps both, the second drops by_outcome, the last by_status
    names = [indexes for indexes, _ in tables]
    current = {index.name for index in resources.TABLE.indexes}
    assert names == [current | {"by_status", "by_outcome"}, current | {"by_status"}, current]
    # each deployment adding or dropping one index, as CloudFormation takes them
    changed = [before ^ after for before, after in zip([earlier, *names[:-1]], names, strict=True)]
    assert changed == [{"by_flag"}, {"by_outcome"}, {"by_status"}]
    # a retired index's key attribute defined only while an index keys by it
    assert [{"status", "outcome"} & attributes for _, attributes in tables] == [
        {"status", "outcome"},
        {"status"},
        set(),
    ]
    # and each passes cdk-nag's checks
    assert [step.validation_error for step in steps] == [None, None, None]


def test_list_indexes_outside_zero_to_two_fail_at_synth():
    with pytest.raises(ValueError, match="list_indexes"):
        DeploySettings(list_indexes=3)
