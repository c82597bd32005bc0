"""The API Gateway events the local stack and the tests drive the API function with."""

from __future__ import annotations

import base64

from punctual_local.lambda_events import api_gateway_event, http_api_event


def test_an_http_api_event_carries_the_owner_where_the_iam_authorizer_puts_it():
    event = http_api_event("post", "/jobs", owner="arn:aws:iam::123456789012:user/alice")
    assert event["version"] == "2.0"
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "ANY /{proxy+}"
    assert event["requestContext"]["authorizer"]["iam"]["userArn"] == "arn:aws:iam::123456789012:user/alice"
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"
    assert event["requestContext"]["stage"] == "$default"
    assert "authorizer" not in http_api_event("GET", "/health", owner=None)["requestContext"]


def test_an_http_api_event_decodes_the_path_keeps_the_raw_query_and_lowercases_headers():
    # Given a request as a client sends it
    event = http_api_event(
        "GET",
        "/jobs/job%5F1/executions",
        owner="alice",
        query="limit=2&cursor=a%2Bb&tag=x&tag=y",
        headers={"Idempotency-Key": "k1", "Cookie": "a=1; b=2"},
    )
    # Then it arrives as an HTTP API delivers it
    assert event["rawPath"] == event["requestContext"]["http"]["path"] == "/jobs/job_1/executions"
    assert event["pathParameters"] == {"proxy": "jobs/job_1/executions"}
    assert event["rawQueryString"] == "limit=2&cursor=a%2Bb&tag=x&tag=y"
    assert event["queryStringParameters"] == {"limit": "2", "cursor": "a+b", "tag": "x,y"}
    assert event["headers"] == {"idempotency-key": "k1"}
    assert event["cookies"] == ["a=1", "b=2"]


def test_the_root_path_has_its_own_route_and_a_named_stage_prefixes_the_raw_path():
    root = http_api_event("GET", "/", owner="alice")
    assert root["routeKey"] == "ANY /"
    assert "pathParameters" not in root
    staged = http_api_event("GET", "/health", owner="alice", stage="v1")
    assert staged["rawPath"] == "/v1/health"
    assert staged["requestContext"]["stage"] == "v1"


def test_both_formats_pass_utf8_bodies_as_text_and_other_bytes_base64_encoded():
    for build in (http_api_event, api_gateway_event):
        text = build("POST", "/jobs", owner="alice", body=b'{"name": "caf\xc3\xa9"}')
        assert (text["body"], text["isBase64Encoded"]) == ('{"name": "café"}', False)
        binary = build("POST", "/jobs", owner="alice", body=b"\xff\xfe")
        assert binary["isBase64Encoded"] is True
        assert base64.b64decode(binary["body"]) == b"\xff\xfe"
