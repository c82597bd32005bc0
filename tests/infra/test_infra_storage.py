"""The table and the queues are built from punctual.resources and carry their safety settings."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from punctual import resources


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
    assert len(queues) == 4  # the work and notification queues, each with its dead-letter queue
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
