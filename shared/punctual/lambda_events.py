"""Lambda events as AWS delivers them: API Gateway proxy requests and SQS batches.

The local stack and the tests drive the real handlers through these, as API Gateway and the SQS
event source mapping would.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl


@dataclass
class FakeLambdaContext:
    function_name: str = "punctual-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:punctual-local"
    aws_request_id: str = ""

    def __post_init__(self) -> None:
        self.aws_request_id = self.aws_request_id or str(uuid.uuid4())

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
    pairs = parse_qsl(query, keep_blank_values=True)
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for key, value in pairs:
        single[key] = value
        multi.setdefault(key, []).append(value)
    header_map = dict(headers or {})
    text: str | None = None
    is_base64 = False
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(body).decode(), True
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
            "requestId": str(uuid.uuid4()),
            "identity": {"userArn": owner, "caller": owner, "sourceIp": "127.0.0.1"},
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }


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
