"""Lambda events as AWS delivers them: API Gateway proxy requests (REST API, payload format 1.0;
HTTP API, payload format 2.0) and SQS batches.

The local stack and the tests drive the real handlers through these, as API Gateway and the SQS
event source mapping would.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from punctual.platform import randomness


@dataclass
class FakeLambdaContext:
    function_name: str = "punctual-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:punctual-local"
    aws_request_id: str = ""

    def __post_init__(self) -> None:
        self.aws_request_id = self.aws_request_id or str(randomness.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def api_gateway_event(
    method: str,
    path: str,
    *,
    owner: str | None,
    query: str = "",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> dict[str, Any]:
    """A REST API (v1) proxy event; the owner stands where IAM authorization puts the caller's ARN."""
    multi = _query_values(query)
    single = {key: values[-1] for key, values in multi.items()}  # the last of a repeated key
    header_map = dict(headers or {})
    text, is_base64 = _body(body)
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method.upper(),
        "headers": header_map,
        "multiValueHeaders": {k: [v] for k, v in header_map.items()},
        "queryStringParameters": single or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method.upper(),
            "path": path,
            "stage": "local",
            "requestId": str(randomness.uuid4()),
            "identity": {"userArn": owner, "caller": owner, "sourceIp": "127.0.0.1"},
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }


def http_api_event(
    method: str,
    path: str,
    *,
    owner: str | None,
    query: str = "",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    stage: str = "$default",
) -> dict[str, Any]:
    """An HTTP API (payload format 2.0) event, as an `ANY /{proxy+}` (or `ANY /`) route delivers it;
    the owner stands where the IAM authorizer puts the caller's ARN.

    `path` (below the stage) and `query` are taken as requested, percent-encoded; like an HTTP API,
    the event carries the path decoded, prefixed with the stage's name unless it is `$default`, and
    the query string raw. Header names come lowercased, repeated query keys comma-joined, and cookies
    apart from the headers.
    """
    now = datetime.now(UTC)
    header_map: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in (headers or {}).items():
        if name.lower() == "cookie":
            cookies += [c.strip() for c in value.split(";") if c.strip()]
        elif name.lower() in header_map:
            header_map[name.lower()] += f",{value}"
        else:
            header_map[name.lower()] = value
    params = {key: ",".join(values) for key, values in _query_values(query).items()}
    route = "/" if path in ("", "/") else "/{proxy+}"
    raw_path = unquote(path if stage == "$default" else f"/{stage}{path}")
    text, is_base64 = _body(body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"ANY {route}",
        "rawPath": raw_path,
        "rawQueryString": query,
        "headers": header_map,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {
                "method": method.upper(),
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": header_map.get("user-agent", ""),
            },
            "requestId": str(randomness.uuid4()),
            "routeKey": f"ANY {route}",
            "stage": stage,
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": is_base64,
    }
    if cookies:
        event["cookies"] = cookies
    if params:
        event["queryStringParameters"] = params
    if route != "/":
        event["pathParameters"] = {"proxy": unquote(path).lstrip("/")}
    if owner:
        event["requestContext"]["authorizer"] = {"iam": {"accountId": "000000000000", "userArn": owner}}
    if text is not None:
        event["body"] = text
    return event


def _query_values(query: str) -> dict[str, list[str]]:
    """A query string's values by key, in order (a key may repeat)."""
    values: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(key, []).append(value)
    return values


def _body(body: bytes | None) -> tuple[str | None, bool]:
    """A request body as API Gateway passes it on: text when it is UTF-8, base64 otherwise."""
    if not body:
        return None, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode(), True


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """An SQS batch event from ReceiveMessage results (which must include the Attributes)."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }
