"""Create Punctual's table and queues from resources.py: for moto in tests and for the local stack.

(On AWS the CDK stack creates them from the same definitions.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from punctual.platform import resources
from punctual.store import keys, list_keys


@dataclass(frozen=True)
class Provisioned:
    table_name: str
    queue_url: str
    dlq_url: str
    notify_queue_url: str = ""


def _add_missing_indexes(dynamodb_client: Any, table_name: str) -> None:
    """Give a table kept from an earlier version the indexes it lacks, one an update (as DynamoDB
    takes them), and drop those this version no longer writes to (resources.RETIRED_LIST_INDEXES).
    Its items are indexed as they are: jobs stored before by_flag existed get their flags here."""
    wanted = resources.TABLE.create_table_kwargs(table_name)
    described = dynamodb_client.describe_table(TableName=table_name)["Table"]
    have = {index["IndexName"] for index in described.get("GlobalSecondaryIndexes", [])}
    for index in wanted["GlobalSecondaryIndexes"]:
        if index["IndexName"] not in have:
            dynamodb_client.update_table(
                TableName=table_name,
                AttributeDefinitions=wanted["AttributeDefinitions"],
                GlobalSecondaryIndexUpdates=[{"Create": index}],
            )
    if resources.BY_FLAG_INDEX.name not in have:
        _flag_jobs(dynamodb_client, table_name)
    for retired in resources.RETIRED_LIST_INDEXES:
        if retired.name in have:
            dynamodb_client.update_table(
                TableName=table_name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": retired.name}}]
            )


def _flag_jobs(dynamodb_client: Any, table_name: str) -> None:
    """Set the by_flag key on the job items that should carry one (paused, cancelled or failing)."""
    deserialize = TypeDeserializer().deserialize
    pages = dynamodb_client.get_paginator("scan").paginate(
        TableName=table_name,
        FilterExpression="sk = :job",
        ExpressionAttributeValues={":job": {"S": keys.JOB_SK}},
    )
    for page in pages:
        for raw in page.get("Items", []):
            item = {name: deserialize(value) for name, value in raw.items()}
            flag = list_keys.stored_flag(item)
            if flag is not None and item.get("flag") != flag:
                dynamodb_client.update_item(
                    TableName=table_name,
                    Key={"pk": raw["pk"], "sk": raw["sk"]},
                    UpdateExpression="SET flag = :flag",
                    ExpressionAttributeValues={":flag": {"S": flag}},
                )


def create_all(dynamodb_client: Any, sqs_client: Any, prefix: str = "") -> Provisioned:
    """Create (or find) the table and both queues; idempotent."""
    table = resources.TABLE
    table_name = prefix + table.name
    existing = dynamodb_client.list_tables().get("TableNames", [])
    if table_name not in existing:
        dynamodb_client.create_table(**table.create_table_kwargs(table_name))
        dynamodb_client.get_waiter("table_exists").wait(TableName=table_name)
        dynamodb_client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
        )
    else:
        _add_missing_indexes(dynamodb_client, table_name)
    dlq = resources.DEAD_LETTER_QUEUE
    dlq_url = sqs_client.create_queue(
        QueueName=prefix + dlq.name,
        Attributes={
            "VisibilityTimeout": str(dlq.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(dlq.retention_seconds),
        },
    )["QueueUrl"]
    dlq_arn = sqs_client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    work = resources.WORK_QUEUE
    queue_url = sqs_client.create_queue(
        QueueName=prefix + work.name,
        Attributes={
            "VisibilityTimeout": str(work.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(work.retention_seconds),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": work.max_receive_count}
            ),
        },
    )["QueueUrl"]
    notify_dlq_url = _queue(sqs_client, prefix, resources.NOTIFY_DEAD_LETTER_QUEUE)
    notify_dlq_arn = sqs_client.get_queue_attributes(QueueUrl=notify_dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    notify_queue_url = _queue(sqs_client, prefix, resources.NOTIFY_QUEUE, notify_dlq_arn)
    return Provisioned(
        table_name=table_name, queue_url=queue_url, dlq_url=dlq_url, notify_queue_url=notify_queue_url
    )


def _queue(sqs_client: Any, prefix: str, queue: resources.QueueDefinition, dead_letter_arn: str = "") -> str:
    attributes = {
        "VisibilityTimeout": str(queue.visibility_timeout_seconds),
        "MessageRetentionPeriod": str(queue.retention_seconds),
    }
    if dead_letter_arn:
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": queue.max_receive_count}
        )
    return str(sqs_client.create_queue(QueueName=prefix + queue.name, Attributes=attributes)["QueueUrl"])
