"""One store over each backend: moto (in-process `mock_aws`) and the in-memory fake
(`punctual_testing.fake_dynamodb`), both holding the table as resources.TABLE defines it. Every test
taking `store` runs against both: the fake is held to what moto (and DynamoDB) answer."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from punctual.platform import aws, resources
from punctual.store import Store
from punctual_testing.fake_aws import FakeAws, Latency

TABLE_NAME = "punctual-contract"
SHARDS = 4
RETENTION_DAYS = 30


def _store(dynamodb: object, client: object) -> Store:
    return Store(dynamodb, client, TABLE_NAME, shard_count=SHARDS, retention_days=RETENTION_DAYS)


@pytest.fixture(params=["moto", "fake"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "moto":
        dynamodb, client = _moto_clients()
        with mock_aws():  # (moto's hook intercepts clients made before it starts too)
            client.create_table(**resources.TABLE.create_table_kwargs(TABLE_NAME))
            yield _store(dynamodb, client)
        return
    fake, dynamodb, client = _fake()
    definition = resources.TABLE
    # (a fresh table a test: the clients, slow to make, are kept)
    fake.dynamodb.create_table(
        TABLE_NAME,
        definition.partition_key,
        definition.sort_key,
        indexes={index.name: (index.partition_keys, index.sort_keys) for index in definition.indexes},
    )
    yield _store(dynamodb, client)


@functools.cache
def _moto_clients() -> tuple[Any, Any]:
    """A DynamoDB resource and client for moto: made once, they are slow to make."""
    session = boto3.session.Session(region_name="us-east-1")
    return session.resource("dynamodb"), session.client("dynamodb")


@functools.cache
def _fake() -> tuple[FakeAws, Any, Any]:
    """The in-memory AWS, and a DynamoDB resource and client routed to it."""
    fake = FakeAws(Latency(dynamodb=0.0, sqs=0.0), partition_limits=False)
    session = boto3.session.Session(
        aws_access_key_id="fake", aws_secret_access_key="fake", region_name="us-east-1"
    )
    dynamodb = session.resource("dynamodb", config=aws._CONFIG)
    client = session.client("dynamodb", config=aws._CONFIG)
    fake.attach(dynamodb.meta.client)
    fake.attach(client)
    return fake, dynamodb, client
