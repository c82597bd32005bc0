"""A DynamoDB item response taken as its JSON gives the client what botocore's own parsing gives it.

Each response is answered in memory, before anything is sent (botocore's before-send event): no call
leaves the process.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, cast

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.store.responses import parse_item_responses_as_json


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _client(body: bytes, status: int = 200, *, as_json: bool) -> Any:
    client = boto3.session.Session(
        aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
    ).client("dynamodb", endpoint_url="http://127.0.0.1:9")
    headers = HTTPHeaders()
    headers["x-amzn-RequestId"] = "r1"
    headers["Content-Type"] = "application/x-amz-json-1.0"

    def answer(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, status, headers, _Raw(body))

    client.meta.events.register("before-send.dynamodb", cast(Any, answer))
    if as_json:
        parse_item_responses_as_json(client)
    return client


def _both(call: str, body: dict[str, Any] | bytes, **params: Any) -> tuple[Any, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answers = []
    for as_json in (False, True):
        answer = getattr(_client(raw, as_json=as_json), call)(**params)
        answer["ResponseMetadata"].pop("HTTPHeaders")
        answers.append(answer)
    return answers[0], answers[1]


scalars = st.one_of(
    st.text(max_size=12).map(lambda s: {"S": s}),
    st.integers(min_value=-(10**12), max_value=10**12).map(lambda n: {"N": str(n)}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(max_size=5), min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda v: {"L": v})
        | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3).map(lambda v: {"M": v})
    ),
    max_leaves=10,
)
items = st.dictionaries(st.text(min_size=1, max_size=6), values, min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(st.lists(items, max_size=4), st.booleans())
def test_a_batch_get_answer_is_the_same_either_way(found: list[dict[str, Any]], unprocessed: bool) -> None:
    body: dict[str, Any] = {
        "Responses": {"t": found},
        "UnprocessedKeys": {"t": {"Keys": [{"pk": {"S": "a"}}]}} if unprocessed else {},
        "ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 1.5}],
    }
    parsed, as_json = _both("batch_get_item", body, RequestItems={"t": {"Keys": [{"pk": {"S": "a"}}]}})
    assert as_json == parsed


@settings(max_examples=30, deadline=None)
@given(st.lists(items, max_size=4))
def test_a_query_answer_is_the_same_either_way(found: list[dict[str, Any]]) -> None:
    body = {
        "Items": found,
        "Count": len(found),
        "ScannedCount": len(found),
        "LastEvaluatedKey": {"pk": {"S": "z"}},
    }
    parsed, as_json = _both("query", body, TableName="t", KeyConditionExpression="pk = :p")
    assert as_json == parsed


def test_botocore_parses_an_empty_body_beside_the_taken_one() -> None:
    seen: list[bytes] = []
    client = _client(json.dumps({"Item": {"pk": {"S": "a"}}}).encode(), as_json=True)
    client.meta.events.register(
        "before-parse.dynamodb", lambda response_dict, **_: seen.append(response_dict["body"])
    )
    assert client.get_item(TableName="t", Key={"pk": {"S": "a"}})["Item"] == {"pk": {"S": "a"}}
    assert seen == [b"{}"]


def test_binary_values_are_left_to_botocore_which_decodes_them() -> None:
    blob = base64.b64encode(b"\x00\x01").decode()
    body = {"Item": {"pk": {"S": "a"}, "data": {"B": blob}, "set": {"BS": [blob]}}}
    parsed, as_json = _both("get_item", body, TableName="t", Key={"pk": {"S": "a"}})
    assert as_json == parsed
    assert as_json["Item"]["data"] == {"B": b"\x00\x01"}


def test_binary_values_are_left_to_botocore_however_the_json_is_spaced() -> None:
    body = b'{"Item" : {"pk" : {"S" : "a"}, "data" : {"B" : "AAE="}}}'
    parsed, as_json = _both("get_item", body, TableName="t", Key={"pk": {"S": "a"}})
    assert as_json == parsed and as_json["Item"]["data"] == {"B": b"\x00\x01"}


def test_an_error_is_still_botocore_s_client_error() -> None:
    body = json.dumps(
        {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "message": "no"}
    ).encode()
    with pytest.raises(ClientError) as refused:
        _client(body, 400, as_json=True).put_item(TableName="t", Item={"pk": {"S": "a"}})
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_an_operation_without_items_is_parsed_by_botocore() -> None:
    body = json.dumps({"Table": {"TableName": "t", "CreationDateTime": 1.7e9}}).encode()
    table = _client(body, as_json=True).describe_table(TableName="t")["Table"]
    assert table["CreationDateTime"].year >= 2023  # a datetime: botocore's parse, not the JSON's float
