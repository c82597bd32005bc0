"""moto's DynamoDB and SQS made atomic as AWS's are (punctual_local.moto.atomic), on the real table and
queue definitions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models.table import Table
from moto.sqs.models import sqs_backends

from punctual_local import provision
from punctual_local.moto.atomic import make_queues_atomic, make_writes_atomic


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any, provision.Provisioned]]:
    """moto made atomic, with the real table and queues: (DynamoDB client, SQS client, their names)."""
    make_writes_atomic()
    make_queues_atomic()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield client, sqs, provision.create_all(client, sqs)


@pytest.fixture
def table(aws: tuple[Any, Any, provision.Provisioned]) -> tuple[Any, str]:
    return aws[0], aws[2].table_name


@pytest.fixture
def queue(aws: tuple[Any, Any, provision.Provisioned]) -> tuple[Any, str]:
    return aws[1], aws[2].queue_url


def test_a_batch_read_holds_the_write_lock_for_all_its_keys(
    table: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, name = table
    for n in range(3):
        client.put_item(TableName=name, Item={"pk": {"S": f"JOB#{n}"}, "sk": {"S": "JOB"}})
    events: list[str] = []
    writer: list[threading.Thread] = []
    real_get = Table.get_item
    reader = threading.current_thread()

    def get_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not reader:
            return real_get(self, *args, **kwargs)  # (the write's own look at the item it replaces)
        events.append("read")
        if not writer:
            # A write that arrives while the batch's first key is read
            def write() -> None:
                client.put_item(TableName=name, Item={"pk": {"S": "JOB#9"}, "sk": {"S": "JOB"}})
                events.append("write")

            writer.append(threading.Thread(target=write))
            writer[0].start()
            writer[0].join(0.2)  # it waits for the lock, however long it is given
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(Table, "get_item", get_item)
    # When a BatchGetItem reads three keys while a write waits
    keys = [{"pk": {"S": f"JOB#{n}"}, "sk": {"S": "JOB"}} for n in range(3)]
    found = client.batch_get_item(RequestItems={name: {"Keys": keys, "ConsistentRead": True}})
    writer[0].join(10)
    # Then the write went after all of the batch's reads, not between two of them
    assert len(found["Responses"][name]) == 3
    assert events == ["read", "read", "read", "write"]


def test_a_message_sent_while_another_is_deleted_is_kept(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="first")
    [received] = sqs.receive_message(QueueUrl=url)["Messages"]
    sender: list[threading.Thread] = []

    def send_second() -> None:
        sender.append(threading.Thread(target=lambda: sqs.send_message(QueueUrl=url, MessageBody="second")))
        sender[0].start()
        sender[0].join(0.2)  # it waits for the lock, however long it is given

    class Messages(list):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[Any]:
            yield from super().__iter__()
            # A send that arrives once the delete has copied the list, before it puts the copy back
            if not sender:
                send_second()

    moto_queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[url.rsplit("/", 1)[1]]
    moto_queue._messages = Messages(moto_queue._messages)
    # When the first message is deleted while the second is sent
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])
    sender[0].join(10)
    # Then the second is on the queue, and only it
    bodies = [
        m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    ]
    assert bodies == ["second"]


def test_a_long_poll_lets_sends_in_while_it_waits(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    answer: list[list[str]] = []

    def poll() -> None:
        messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
        answer.append([m["Body"] for m in messages])

    poller = threading.Thread(target=poll)
    poller.start()
    # When a message is sent while the long poll waits
    threading.Event().wait(0.3)
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    poller.join(10)
    # Then the poll received it (it did not hold the lock the send needs)
    assert answer == [["hello"]]


def test_a_query_never_reads_an_item_an_update_is_still_creating(
    table: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb import models

    client, name = table
    seen: list[list[dict[str, Any]]] = []
    reader: list[threading.Thread] = []
    # (the executor moto's UpdateItem makes, its own or the speedups' for a plain update)
    real_executor = models.UpdateExpressionExecutor

    def executor(*args: Any, **kwargs: Any) -> Any:
        applying = real_executor(*args, **kwargs)
        if reader:
            return applying

        # A Query that arrives after the new item's key is in the table, before its attributes are
        def query() -> None:
            found = client.query(
                TableName=name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": "JOB#1"}},
            )
            seen.append(found["Items"])

        reader.append(threading.Thread(target=query))
        reader[0].start()
        reader[0].join(0.2)  # it waits for the write, however long it is given
        return applying

    monkeypatch.setattr(models, "UpdateExpressionExecutor", executor)
    # When an UpdateItem creates an execution's item while a Query reads its partition
    client.update_item(
        TableName=name,
        Key={"pk": {"S": "JOB#1"}, "sk": {"S": "EXEC#1#a"}},
        UpdateExpression="SET #st = :st, id = :id",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":st": {"S": "RUNNING"}, ":id": {"S": "a"}},
    )
    reader[0].join(10)
    # Then the Query read the item whole, after the write
    [items] = seen
    assert [item.get("id") for item in items] == [{"S": "a"}]


def test_an_update_is_never_lost_to_a_write_made_while_it_copies_the_item(
    table: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    client, name = table
    key = {"pk": {"S": "JOB#1"}, "sk": {"S": "EXEC#1#a"}}
    client.put_item(TableName=name, Item={**key, "id": {"S": "a"}, "status": {"S": "FAILED"}})

    def record(rule: int) -> None:
        # (a notification's delivery, as store/deliveries.py records it: an attribute of its own)
        client.update_item(
            TableName=name,
            Key=key,
            UpdateExpression="SET #d = :d",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#d": f"delivery#{rule}#failed"},
            ExpressionAttributeValues={":d": {"M": {"status": {"S": "delivered"}}}},
        )

    events: list[str] = []
    writer: list[threading.Thread] = []
    updater = threading.current_thread()
    real_copy = DynamoType.__deepcopy__

    def deepcopy(self: Any, memo: Any) -> Any:
        # The first update's handler copying the item it updates, half-way through its attributes
        if threading.current_thread() is updater and not writer and self.value == "FAILED":
            events.append("copy")

            # Another delivery's record of the same execution, arriving then
            def write() -> None:
                record(1)
                events.append("write")

            writer.append(threading.Thread(target=write))
            writer[0].start()
            writer[0].join(0.2)  # it waits for the lock, however long it is given
        return real_copy(self, memo)

    monkeypatch.setattr(DynamoType, "__deepcopy__", deepcopy)
    # When two deliveries are recorded on one execution's item at once
    try:
        record(0)
        events.append("update")
    finally:
        if writer:
            writer[0].join(10)
    # Then the other write waited for the whole of the first, and the item holds both records
    item = client.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
    assert events == ["copy", "update", "write"]
    assert {"delivery#0#failed", "delivery#1#failed"} <= item.keys()
