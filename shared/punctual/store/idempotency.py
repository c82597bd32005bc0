"""Idempotency keys: pk IDEM#<sha256 of owner and key>, sk IDEM, with the request's fingerprint, the
job ids it creates and its expiry (24 hours after it was claimed).

`claim` is one conditional PutItem: it takes the key if no live record holds it (an expired one,
which DynamoDB's TTL may keep for days, is taken over); if one does, the record is read back and
returned, and the caller compares fingerprints. `get` reads a live record (consistent).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.domain.errors import LostRace
from punctual.ports.jobs import IdempotencyRecord
from punctual.store import keys
from punctual.store.table import Table, call

LIFETIME = timedelta(hours=24)


class IdempotencyKeys:
    def __init__(self, table: Table) -> None:
        self._table = table

    def claim(
        self, owner: str, key: str, fingerprint: str, job_ids: Sequence[str], now: datetime
    ) -> IdempotencyRecord | None:
        """Record that `key` creates `job_ids`; if the key was seen (within its 24 hours), return its
        record instead. A key is remembered for 24 hours, no longer."""
        # One job (POST /jobs) as `job_id`, which every deployed version reads; a batch's as the list `job_ids`.
        ids: dict[str, Any] = {"job_id": job_ids[0]} if len(job_ids) == 1 else {"job_ids": list(job_ids)}
        item = {
            **keys.idempotency_key(owner, key),
            "fingerprint": fingerprint,
            **ids,
            "expires_at": int((now + LIFETIME).timestamp()),
        }
        try:
            call(
                lambda: self._table.resource.put_item(
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                    ExpressionAttributeValues={":now": int(now.timestamp())},
                )
            )
        except LostRace:
            seen = self.get(owner, key, now)
            if seen is None:  # expired between the two calls: claim it afresh
                return self.claim(owner, key, fingerprint, job_ids, now)
            return seen
        return None

    def get(self, owner: str, key: str, now: datetime) -> IdempotencyRecord | None:
        """The record a key was used with, or None if it was not (or has expired)."""
        found = call(
            lambda: self._table.resource.get_item(Key=keys.idempotency_key(owner, key), ConsistentRead=True)
        ).get("Item")
        if found is None or int(found.get("expires_at", 0)) <= int(now.timestamp()):
            return None
        seen = found["job_ids"] if "job_ids" in found else [found["job_id"]]
        claimed = datetime.fromtimestamp(int(found["expires_at"]), UTC) - LIFETIME
        return IdempotencyRecord(str(found["fingerprint"]), [str(job_id) for job_id in seen], claimed)
