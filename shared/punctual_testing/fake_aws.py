"""Real boto3 clients, answered in memory after a modelled network latency.

`FakeAws.attach(client)` hooks botocore's `before-send` event: everything up to the wire — parameter
validation, the resource layer's type conversion, JSON serialisation, SigV4 signing — and the parsing
of the answer run as they do in a Lambda function; only the HTTP round trip is replaced, by the
in-memory backend and a `time.sleep` of the modelled latency (sleeping releases the GIL, so calls in
threads overlap as real network calls do). Operations the backends do not implement raise, so
nothing is ever sent to AWS.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders

from punctual.platform import aws
from punctual.platform.config import Settings
from punctual_testing.expressions import Unsupported
from punctual_testing.fake_dynamodb import AwsError, FakeDynamoDB

SQS_MAX_BATCH_ENTRIES = 10
# SendMessageBatch's total payload: 1 MiB since August 2025 (256 KiB before; Punctual's are ~120 B).
SQS_MAX_BATCH_BYTES = 1024 * 1024
SQS_MAX_DELAY_SECONDS = 900


class _Body(io.BytesIO):
    """The raw HTTP body botocore reads a response from."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        contents = self.read()
        while contents:
            yield contents
            contents = self.read()


@dataclass
class SentMessage:
    body: str
    delay_seconds: int


@dataclass
class FakeSQS:
    queues: dict[str, list[SentMessage]] = field(default_factory=dict)

    def create_queue(self, name: str) -> str:
        url = f"https://sqs.us-east-1.amazonaws.com/123456789012/{name}"
        self.queues[url] = []
        return url

    def handle(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        if operation != "SendMessageBatch":
            raise Unsupported(f"SQS {operation} is not implemented by the benchmark's fake")
        queue = self.queues.get(request.get("QueueUrl", ""))
        if queue is None:
            raise AwsError("AWS.SimpleQueueService.NonExistentQueue", "no such queue")
        entries = request.get("Entries", [])
        if not entries or len(entries) > SQS_MAX_BATCH_ENTRIES:
            raise AwsError("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", f"{len(entries)} entries")
        if len({e["Id"] for e in entries}) != len(entries):
            raise AwsError("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "repeated Id")
        if sum(len(e["MessageBody"].encode()) for e in entries) > SQS_MAX_BATCH_BYTES:
            raise AwsError("AWS.SimpleQueueService.BatchRequestTooLong", "batch too long")
        successful = []
        for entry in entries:
            delay = int(entry.get("DelaySeconds", 0))
            if not 0 <= delay <= SQS_MAX_DELAY_SECONDS:
                raise AwsError("InvalidParameterValue", f"DelaySeconds {delay}")
            queue.append(SentMessage(entry["MessageBody"], delay))
            successful.append(
                {
                    "Id": entry["Id"],
                    "MessageId": str(uuid.uuid4()),
                    "MD5OfMessageBody": hashlib.md5(entry["MessageBody"].encode()).hexdigest(),
                }
            )
        return {"Successful": successful, "Failed": []}


@dataclass(frozen=True)
class Latency:
    """Modelled round trip of one call, in seconds, per service."""

    dynamodb: float = 0.010
    sqs: float = 0.020


def clients(settings: Settings) -> tuple[Any, Any, Any]:
    """A DynamoDB resource, a plain DynamoDB client and an SQS client built as the functions build
    theirs (`punctual.platform.aws`: same retry mode and connection pool), signing with dummy credentials.
    Attach them before use."""
    session = boto3.session.Session(
        aws_access_key_id="benchmark", aws_secret_access_key="benchmark", region_name=settings.region
    )
    config = aws._CONFIG
    return (
        session.resource("dynamodb", config=config),
        session.client("dynamodb", config=config),
        session.client("sqs", config=config),
    )


class FakeAws:
    def __init__(
        self, latency: Latency, *, partition_limits: bool = True, page_items: int | None = None
    ) -> None:
        self.latency = latency
        self.dynamodb = FakeDynamoDB(partition_limits=partition_limits, page_items=page_items)
        self.sqs = FakeSQS()
        self.calls: Counter[str] = Counter()
        # CPU spent being AWS (request parsing, evaluating, answering): not the Lambda's to pay.
        self.backend_cpu_seconds = 0.0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-send", self._send)

    def reset_counters(self) -> None:
        with self._lock:
            self.calls.clear()
            self.backend_cpu_seconds = 0.0
            self.max_in_flight = 0

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        started = time.thread_time()
        raw_target = request.headers.get("X-Amz-Target", b"")
        target = raw_target.decode() if isinstance(raw_target, bytes) else str(raw_target)
        service, _dot, operation = target.partition(".")
        body = request.body or b"{}"
        payload = json.loads(body if isinstance(body, (bytes, bytearray, str)) else body.read())
        if service.startswith("DynamoDB"):
            backend_name, backend_call, latency = "dynamodb", self.dynamodb.handle, self.latency.dynamodb
        elif service == "AmazonSQS":
            backend_name, backend_call, latency = "sqs", self.sqs.handle, self.latency.sqs
        else:
            raise Unsupported(f"no fake for {target!r}")
        status, answer = 200, {}
        try:
            answer = backend_call(operation, payload)
        except AwsError as exc:
            prefix = "com.amazonaws.dynamodb.v20120810#" if backend_name == "dynamodb" else ""
            status, answer = 400, {"__type": prefix + exc.code, "message": exc.message, **exc.extra}
        raw = json.dumps(answer).encode()
        with self._lock:
            self.calls[f"{backend_name}.{operation}"] += 1
            self.backend_cpu_seconds += time.thread_time() - started
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            time.sleep(latency)
        finally:
            with self._lock:
                self._in_flight -= 1
        headers = HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"})
        return AWSResponse(request.url, status, headers, _Body(raw))
