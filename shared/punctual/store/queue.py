"""SQS access: the only module that knows the work queue's message format."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from punctual.domain.errors import RetryableStoreError
from punctual.platform.concurrency import chunks, parallel_map
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms

MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 12 * 3600 - 1


@dataclass(frozen=True)
class WorkItem:
    """What a message on the work queue names: one execution of one job.

    The execution may not be stored yet (the scanner stores none on AWS: the worker records it when it
    starts), so the message carries what the worker needs to record it: the schedule version it was
    materialised under and whether it is an extra run. A message without them (sent before an upgrade,
    docs/upgrading.md) names an execution that was stored before it was sent.
    """

    job_id: str
    execution_id: str
    scheduled_at: datetime
    schedule_version: int | None = None
    manual: bool = False

    def to_body(self) -> str:
        body: dict[str, object] = {
            "job_id": self.job_id,
            "execution_id": self.execution_id,
            "scheduled_ms": to_epoch_ms(self.scheduled_at),
        }
        if self.schedule_version is not None:
            body["schedule_version"] = self.schedule_version
        if self.manual:
            body["manual"] = True
        return json.dumps(body)

    @classmethod
    def from_body(cls, body: str) -> WorkItem:
        data = json.loads(body)
        version = data.get("schedule_version")
        return cls(
            job_id=str(data["job_id"]),
            execution_id=str(data["execution_id"]),
            scheduled_at=from_epoch_ms(int(data["scheduled_ms"])),
            schedule_version=None if version is None else int(version),
            manual=bool(data.get("manual", False)),
        )


def delay_seconds(scheduled_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message so that it becomes visible at, or just before, its instant.

    Rounded down: the worker waits out the remaining fraction of a second, so nothing starts early and
    SQS's whole-second delays do not make it late.
    """
    seconds = math.floor((scheduled_at - now).total_seconds())
    return max(0, min(MAX_DELAY_SECONDS, seconds))


class WorkQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self.url = queue_url

    def send(self, items: list[tuple[WorkItem, int]], attempts: int = 4) -> list[WorkItem]:
        """Send (item, delay seconds) pairs in batches of ten, side by side; retry partial failures.

        Returns the items that could not be sent after all attempts (the caller keeps their markers,
        so the next scanner tick sends them again).
        """
        return [
            item
            for failed in parallel_map(lambda b: self._send_batch(b, attempts), chunks(items, 10))
            for item in failed
        ]

    def _send_batch(self, pairs: Sequence[tuple[WorkItem, int]], attempts: int) -> list[WorkItem]:
        batch = {str(i): pair for i, pair in enumerate(pairs)}
        for attempt in range(attempts):
            entries = [
                {"Id": entry_id, "MessageBody": item.to_body(), "DelaySeconds": delay}
                for entry_id, (item, delay) in batch.items()
            ]
            try:
                response = self._sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            except ClientError:
                response = {"Failed": [{"Id": entry_id} for entry_id in batch]}
            batch = {f["Id"]: batch[f["Id"]] for f in response.get("Failed", [])}
            if not batch or attempt == attempts - 1:
                break
            time.sleep(min(0.05 * 2**attempt, 0.5))
        return [item for item, _ in batch.values()]

    def change_visibility(self, receipt_handle: str, seconds: float) -> None:
        timeout = max(0, min(MAX_VISIBILITY_SECONDS, math.ceil(seconds)))
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
            )
        except ClientError as exc:
            raise RetryableStoreError(str(exc)) from exc
