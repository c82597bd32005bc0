"""Change records: pk CHANGED#<instant ms>, sk <job id> (keys.change_key), kept a day past their
instant. Written only for a change to a job whose run at that instant may be in a work message, so
an instant's partition holds few items, and a pack's one Query reads them all."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from boto3.dynamodb.conditions import Key

from punctual.store import keys
from punctual.store.table import Table, call, put

# Long after any pack of the instant can start (CHANGE_RECORDS_LATE).
KEPT = timedelta(days=1)


class ChangeRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def note(self, job_id: str, instants: Collection[datetime]) -> None:
        items = [
            {**keys.change_key(at, job_id), "expires_at": int((at + KEPT).timestamp())} for at in instants
        ]
        if len(items) == 1:
            call(lambda: self._table.resource.put_item(Item=items[0]))
        elif items:
            self._table.batch_write([put(item) for item in items])

    def changed(self, instant: datetime) -> frozenset[str]:
        found = self._table.query_all(
            # (whole items: they hold no more than their keys and expiry)
            KeyConditionExpression=Key("pk").eq(keys.change_pk(instant)),
            ConsistentRead=True,
        )
        return frozenset(str(item["sk"]) for item in found)
