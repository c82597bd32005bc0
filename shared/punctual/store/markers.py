"""Due markers, and those set aside in quarantine.

- in a minute's bucket: pk DUE#<yyyymmddHHMM>#<shard>, sk <scheduled ms>#<execution id>; read once
  by the scanner, from its position (`in_bucket`), never deleted by it: they expire
  (codec.markers.MARKER_TTL);
- due soon: pk DUE#SOON#<shard>; read whole every tick (`soon`), deleted once sent;
- quarantined: pk QUARANTINE, sk <job id>#<scheduled ms>#<execution id>, with the reason, kept until
  released (no expiry).
Markers of one instant filed together for a minute's bucket (a batch's) share one item, a group
(codec.markers.group_item): a batch of a hundred jobs at one instant writes one marker item, not a
hundred, and the scanner reads one. Its members keep the group's shard and place when read back.
Writes are unconditional and idempotent (a marker's key derives from its execution, a group's from its
first): one PutItem, or BatchWriteItems paced per marker partition. Reads are strongly consistent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from punctual.domain.buckets import Position
from punctual.domain.models import DueMarker
from punctual.store import keys
from punctual.store.codec.markers import (
    group_item,
    groupable,
    marker_item,
    markers_from,
    quarantine_item,
    quarantined_from,
)
from punctual.store.table import Table, call, delete, put

# Markers a group item holds at most: a batch's (POST /jobs/batch takes 100 jobs), about 3 KB.
GROUP_MAX = 100


def count_bucket(client: Any, table_name: str, minute: datetime, shard: int) -> int:
    """How many markers a minute's bucket of a shard holds (they stay until they expire, so a minute
    already dispatched still counts): queries on a low-level client that read back only a group's
    count (the same read units as a COUNT query: DynamoDB charges for the items it reads)."""
    kwargs: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": keys.bucket_pk(minute, shard)}},
        "ProjectionExpression": "#count",
        "ExpressionAttributeNames": {"#count": "count"},
    }
    total = 0
    while True:
        page = call(lambda: client.query(**kwargs))
        total += sum(int(item["count"]["N"]) if "count" in item else 1 for item in page["Items"])
        if "LastEvaluatedKey" not in page:
            return total
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class MarkerRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def put(self, marker: DueMarker) -> None:
        """File the intent to enqueue an execution."""
        item = marker_item(marker, self._table.shard_count)
        call(lambda: self._table.resource.put_item(Item=item))

    def put_many(self, markers: Iterable[DueMarker]) -> None:
        """File markers in batches; those of one instant filed together for a minute's bucket, in one
        group item (up to GROUP_MAX)."""
        shards = self._table.shard_count
        alone: list[DueMarker] = []
        together: dict[tuple[datetime, datetime | None], list[DueMarker]] = {}
        for marker in markers:
            if groupable(marker):
                together.setdefault((marker.scheduled_at, marker.filed_at), []).append(marker)
            else:
                alone.append(marker)
        items: list[dict[str, Any]] = []
        for members in together.values():
            if len(members) == 1:
                alone.extend(members)
                continue
            members.sort(key=lambda m: m.execution_id)
            items.extend(
                group_item(members[i : i + GROUP_MAX], shards) for i in range(0, len(members), GROUP_MAX)
            )
        items.extend(marker_item(m, shards) for m in alone)
        self._table.batch_write([put(item) for item in items])

    def delete_many(self, markers: Iterable[DueMarker]) -> None:
        self._table.batch_write([delete(keys.marker_key(m, self._table.shard_count)) for m in markers])

    def filed(self, markers: Iterable[DueMarker]) -> list[DueMarker]:
        """Those of these markers that are filed, as they are (their claims with them): a
        BatchGetItem per hundred. For markers filed on their own (a soon partition's, as the hand-off
        asks): a group's member other than its first is not found by its own key."""
        shards = self._table.shard_count
        wanted = list(markers)
        ids = {m.execution_id for m in wanted}
        found = self._table.batch_get([keys.marker_key(m, shards) for m in wanted])
        # (a bucket marker's key may find the group it heads: only the markers asked for are answered)
        return [m for item in found for m in markers_from(item) if m.execution_id in ids]

    def in_bucket(self, shard: int, start: Position, before: datetime) -> Iterator[DueMarker]:
        """Markers in the bucket of `start`'s minute, from `start` (inclusive) to those due before
        `before`, oldest first."""
        upper = keys.sk_bound(before)
        if start.after >= upper:
            return iter(())
        return self._query(
            "pk = :pk AND sk BETWEEN :after AND :before",
            {
                ":pk": {"S": keys.bucket_pk(start.minute, shard)},
                ":after": {"S": start.after},
                ":before": {"S": upper},
            },
        )

    def soon(self, shard: int, before: datetime, limit: int | None = None) -> Iterator[DueMarker]:
        """The shard's markers filed as due soon, those due before `before`, oldest first (at most
        `limit` of them)."""
        return self._query(
            "pk = :pk AND sk < :before",
            {":pk": {"S": keys.soon_pk(shard)}, ":before": {"S": keys.sk_bound(before)}},
            limit,
        )

    def _query(self, condition: str, values: dict[str, Any], limit: int | None = None) -> Iterator[DueMarker]:
        items = self._table.query_wire(
            limit, KeyConditionExpression=condition, ExpressionAttributeValues=values, ConsistentRead=True
        )
        return (marker for item in items for marker in markers_from(item))

    # ------------------------------------------------------------- quarantine
    def quarantine(self, markers: Iterable[DueMarker], reasons: dict[str, str], now: datetime) -> None:
        """Set markers whose job cannot be read aside, with the reason (by job id), so that they stop
        holding up their bucket (`punctual.scheduling.dispatch.release_quarantined` sends them once the job is
        fixed)."""
        shards = self._table.shard_count
        self._table.batch_write(
            [put(quarantine_item(m, reasons.get(m.job_id, "unknown"), now, shards)) for m in markers]
        )

    def quarantined(self, job_id: str | None = None) -> list[tuple[DueMarker, str]]:
        """Quarantined markers (all, or one job's), with why each was set aside."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": keys.QUARANTINE_PK},
            "ConsistentRead": True,
        }
        if job_id is not None:
            kwargs["KeyConditionExpression"] += " AND begins_with(sk, :prefix)"
            kwargs["ExpressionAttributeValues"][":prefix"] = keys.quarantine_prefix(job_id)
        return [quarantined_from(item) for item in self._table.query_all(**kwargs)]

    def release_quarantined(self, markers: Iterable[DueMarker]) -> None:
        """Drop these markers from quarantine (sent, or dropped as not to run)."""
        self._table.batch_write([delete(keys.quarantine_key(m)) for m in markers])
