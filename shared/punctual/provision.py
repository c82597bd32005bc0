"""Create Punctual's table and queues from resources.py: for moto in tests and for the local stack.

(On AWS the CDK stack creates them from the same definitions.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from punctual import resources


@dataclass(frozen=True)
class Provisioned:
    table_name: str
    queue_url: str
    dlq_url: str


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
    return Provisioned(table_name=table_name, queue_url=queue_url, dlq_url=dlq_url)
