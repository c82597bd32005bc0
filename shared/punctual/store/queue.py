"""SQS access: sending work messages (their format: punctual.domain.work) and holding one back."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from punctual.domain.errors import RetryableStoreError
from punctual.domain.work import Pack, WorkItem
from punctual.platform.aws_limits import SQS_BATCH_MAX_BYTES, SQS_MAX_VISIBILITY_SECONDS
from punctual.platform.concurrency import chunks, parallel_map
from punctual.store.table import NO_ANSWER

_Body = TypeVar("_Body", WorkItem, Pack)


class WorkQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self.url = queue_url

    def send(self, items: list[tuple[WorkItem, int]], attempts: int = 4) -> list[WorkItem]:
        """Send (item, delay seconds) pairs in batches of ten, side by side; retry partial failures.

        Returns the items that could not be sent after all attempts (the caller keeps their markers,
        so the next scanner tick sends them again).
        """
        sendable = [(item, item.to_body(), delay) for item, delay in items]
        return [
            item
            for failed in parallel_map(lambda b: self._send_batch(b, attempts), chunks(sendable, 10))
            for item in failed
        ]

    def send_packs(self, packs: list[tuple[Pack, int]], attempts: int = 4) -> list[Pack]:
        """Send (pack, delay seconds) pairs in batches of at most ten and 1 MB, side by side; retry
        partial failures. Returns the packs that could not be sent after all attempts."""
        batches: list[list[tuple[Pack, str, int]]] = []
        size = SQS_BATCH_MAX_BYTES
        for pack, delay in packs:
            body = pack.to_body()
            length = len(body) if body.isascii() else len(body.encode())
            if not batches or len(batches[-1]) == 10 or size + length > SQS_BATCH_MAX_BYTES:
                batches.append([])
                size = 0
            batches[-1].append((pack, body, delay))
            size += length
        return [
            pack
            for failed in parallel_map(lambda b: self._send_batch(b, attempts), batches)
            for pack in failed
        ]

    def _send_batch(self, sends: Sequence[tuple[_Body, str, int]], attempts: int) -> list[_Body]:
        """(item, its body, delay seconds) triples, sent in one batch."""
        batch = {str(i): send for i, send in enumerate(sends)}
        for attempt in range(attempts):
            entries = [
                {"Id": entry_id, "MessageBody": body, "DelaySeconds": delay}
                for entry_id, (_, body, delay) in batch.items()
            ]
            try:
                response = self._sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            except (ClientError, *NO_ANSWER):  # (refused, or no answer after botocore's retries)
                response = {"Failed": [{"Id": entry_id} for entry_id in batch]}
            batch = {f["Id"]: batch[f["Id"]] for f in response.get("Failed", [])}
            if not batch or attempt == attempts - 1:
                break
            time.sleep(min(0.05 * 2**attempt, 0.5))
        return [item for item, _, _ in batch.values()]

    def change_visibility(self, receipt_handle: str, seconds: float) -> None:
        timeout = max(0, min(SQS_MAX_VISIBILITY_SECONDS, math.ceil(seconds)))
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
            )
        except (ClientError, *NO_ANSWER) as exc:
            raise RetryableStoreError(str(exc)) from exc
