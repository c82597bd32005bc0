"""SQS access: the only module that knows the work queue's message format."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from punctual.domain.errors import RetryableStoreError
from punctual.domain.executions import execution_id_for
from punctual.platform.concurrency import chunks, parallel_map
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms

MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 12 * 3600 - 1
# A pack's body stays under SQS's former 256 KiB message limit (a queue created before SQS raised it
# keeps it), and ten of them fit a Lambda invoke's 6 MB payload.
PACK_MAX_BYTES = 250_000
# SendMessageBatch takes at most 1 MiB of bodies a call.
BATCH_MAX_BYTES = 1_000_000
PACK_VERSION = 2


@dataclass(frozen=True)
class WorkItem:
    """One execution of one job, as a work message's pack carries it (a message sent before packs
    named one of these alone: `read_body` reads it as a pack of one).

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


@dataclass(frozen=True)
class Pack:
    """What a message on the work queue carries: executions due at one instant, run side by side by
    the worker that receives it (punctual.execution.packs).

    `shard` is None for a pack the API's hand-off made (its markers from any shard). `guarded`: some of
    its executions may have been sent before or stored already (extra runs, markers sent again), so
    they are read before they are run.
    """

    scheduled_at: datetime
    items: tuple[WorkItem, ...]
    shard: int | None = None
    guarded: bool = False

    @property
    def id(self) -> str:
        """Deterministic: the same executions make the same pack, whoever sends it and how often."""
        digest = hashlib.sha256("\n".join(sorted(i.execution_id for i in self.items)).encode())
        return digest.hexdigest()[:20]

    def to_body(self) -> str:
        return json.dumps(
            {
                "v": PACK_VERSION,
                "id": self.id,
                "at": to_epoch_ms(self.scheduled_at),
                "s": self.shard,
                "g": int(self.guarded),
                "e": [_entry(item) for item in self.items],
            },
            separators=(",", ":"),
        )


def _entry(item: WorkItem) -> list[object]:
    """A scheduled execution's entry needs no id: its job, instant and schedule version make it."""
    version = item.schedule_version
    if (
        not item.manual
        and version is not None
        and item.execution_id == execution_id_for(item.job_id, item.scheduled_at, version)
    ):
        return [item.job_id, version]
    return [item.job_id, version, "m" if item.manual else "", item.execution_id]


def read_body(body: str) -> Pack:
    """A work message's pack; a body of one execution (sent before packs) reads as a pack of one."""
    data = json.loads(body)
    if "v" not in data:
        item = WorkItem.from_body(body)
        return Pack(item.scheduled_at, (item,), guarded=True)
    at = from_epoch_ms(int(data["at"]))
    items = []
    for entry in data["e"]:
        job_id, version = str(entry[0]), None if entry[1] is None else int(entry[1])
        if len(entry) > 2:
            items.append(WorkItem(job_id, str(entry[3]), at, version, entry[2] == "m"))
        else:
            assert version is not None
            items.append(WorkItem(job_id, execution_id_for(job_id, at, version), at, version))
    shard = data.get("s")
    return Pack(at, tuple(items), None if shard is None else int(shard), bool(data.get("g", 0)))


def pack_items(
    items: Iterable[tuple[WorkItem, int | None]],
    *,
    guarded: Iterable[str] = (),
    max_entries: int,
    max_bytes: int = PACK_MAX_BYTES,
) -> list[Pack]:
    """Items (with their shard) as packs: one per instant, shard and guardedness, in the order given,
    cut at `max_entries` executions or `max_bytes` of body."""
    marked = set(guarded)
    keyed = [(item.scheduled_at, shard, item.execution_id in marked, item) for item, shard in items]
    packs: list[Pack] = []
    for (at, shard, is_guarded), group in groupby(
        sorted(keyed, key=lambda k: (k[0], -1 if k[1] is None else k[1], k[2])),
        key=lambda k: (k[0], k[1], k[2]),
    ):
        current: list[WorkItem] = []
        size = 0
        for *_, item in group:
            entry = len(json.dumps(_entry(item), separators=(",", ":"))) + 1
            if current and (len(current) >= max_entries or size + entry > max_bytes - 200):
                packs.append(Pack(at, tuple(current), shard, is_guarded))
                current, size = [], 0
            current.append(item)
            size += entry
        if current:
            packs.append(Pack(at, tuple(current), shard, is_guarded))
    return packs


def delay_seconds(scheduled_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message so that it becomes visible at, or just before, its instant.

    Rounded down: the worker waits out the remaining fraction of a second, so nothing starts early and
    SQS's whole-second delays do not make it late.
    """
    seconds = math.floor((scheduled_at - now).total_seconds())
    return max(0, min(MAX_DELAY_SECONDS, seconds))


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
        return [
            item
            for failed in parallel_map(lambda b: self._send_batch(b, attempts), chunks(items, 10))
            for item in failed
        ]

    def send_packs(self, packs: list[tuple[Pack, int]], attempts: int = 4) -> list[Pack]:
        """Send (pack, delay seconds) pairs in batches of at most ten and 1 MB, side by side; retry
        partial failures. Returns the packs that could not be sent after all attempts."""
        batches: list[list[tuple[Pack, int]]] = []
        size = BATCH_MAX_BYTES
        for pack, delay in packs:
            body = len(pack.to_body().encode())
            if not batches or len(batches[-1]) == 10 or size + body > BATCH_MAX_BYTES:
                batches.append([])
                size = 0
            batches[-1].append((pack, delay))
            size += body
        return [
            pack
            for failed in parallel_map(lambda b: self._send_batch(b, attempts), batches)
            for pack in failed
        ]

    def _send_batch(self, pairs: Sequence[tuple[_Body, int]], attempts: int) -> list[_Body]:
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
