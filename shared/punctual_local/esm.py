"""What Lambda's SQS event source mapping does, for the local stack and the tests.

Receive a batch, invoke the handler with it, delete the records that did not fail (partial batch
responses). A handler that raises leaves the whole batch to come back after its visibility timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from punctual.platform.observability import logger
from punctual_local.lambda_events import FakeLambdaContext, sqs_event

Handler = Callable[[dict[str, Any], Any], Any]


class EventSourceMapping:
    def __init__(self, sqs: Any, queue_url: str, handler: Handler, *, batch_size: int = 10) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._handler = handler
        self._batch_size = batch_size
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def poll_once(self, wait_seconds: int = 0) -> int:
        """One receive-invoke-delete round; returns how many messages it received."""
        messages = self.receive(wait_seconds)
        if messages:
            self.deliver(messages)
        return len(messages)

    def receive(self, wait_seconds: int = 0) -> list[dict[str, Any]]:
        """Up to a batch of messages (long polling up to wait_seconds)."""
        return list(
            self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=self._batch_size,
                WaitTimeSeconds=wait_seconds,
                AttributeNames=["All"],
            ).get("Messages", [])
        )

    def deliver(self, messages: list[dict[str, Any]], handler: Handler | None = None) -> None:
        """Invoke the handler (this mapping's, or the container given) with a batch received, and
        delete the messages it did not report as failed."""
        try:
            response = (handler or self._handler)(sqs_event(messages, self._queue_arn), FakeLambdaContext())
        except Exception:
            logger.exception("handler failed; the batch returns after its visibility timeout")
            return
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            try:
                self._sqs.delete_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
                )
            except Exception:
                logger.exception("delete failed; those messages will be delivered again")

    def drain(self, max_rounds: int = 100) -> int:
        """Poll until a receive comes back empty (or max_rounds); returns the messages received."""
        total = 0
        for _ in range(max_rounds):
            received = self.poll_once()
            if not received:
                break
            total += received
        return total
