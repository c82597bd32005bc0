"""moto's DynamoDB made atomic as DynamoDB is (punctual.local.moto_atomic), on the real table definition."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from punctual.local import provision
from punctual.local.moto_atomic import make_writes_atomic


@pytest.fixture
def table() -> Iterator[tuple[Any, str]]:
    make_writes_atomic()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield client, provision.create_all(client, sqs).table_name


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
