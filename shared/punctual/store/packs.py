"""Packs' leases: pk PACK#<pack id>, sk PACK (keys.pack_key).

A pack of executions sent unguarded (none of them can have been sent before) is taken under one
lease, in one conditional PutItem, instead of a claim per execution: while it holds, no other worker
runs the pack (a duplicate message waits), and once it runs out another may take the pack over. No
write marks a pack done: a pack taken over finds its members' ends stored, at the cost of reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from punctual.domain.errors import LostRace
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms
from punctual.ports.packs import PackHeld, Taken
from punctual.store import keys
from punctual.store.table import Table, call

# A lease outlives any message of its pack: the work queue keeps one at most 14 days.
QUEUE_RETENTION = timedelta(days=14)


class PackRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def take(self, pack_id: str, holder: str, lease_until: datetime, now: datetime) -> Taken:
        """Take the pack's lease unless another holds it on (PackHeld): a conditional PutItem, and a
        second for a pack taken before."""
        item: dict[str, Any] = {
            **keys.pack_key(pack_id),
            "holder": holder,
            "lease_until": to_epoch_ms(lease_until),
            "expires_at": int((lease_until + QUEUE_RETENTION + timedelta(days=1)).timestamp()),
        }
        try:
            # A first take (what nearly every take is): one write.
            self._put(item, "attribute_not_exists(pk)", {})
            return Taken(first=True)
        except LostRace:
            pass
        try:
            old = self._put(item, "lease_until < :now", {":now": to_epoch_ms(now)})
        except LostRace as exc:
            raise PackHeld(_held_until(exc)) from exc
        return Taken(first=False, started_before=bool(old.get("started")))

    def release(self, pack_id: str, holder: str) -> None:
        """Give back a lease its holder will not use (nothing of the pack started): taken again at
        once rather than when it runs out. Raises LostRace if `holder` no longer holds it."""
        call(
            lambda: self._table.resource.update_item(
                Key=keys.pack_key(pack_id),
                UpdateExpression="SET lease_until = :out",
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":out": 0, ":me": holder},
            )
        )

    def mark_started(self, pack_id: str, holder: str) -> None:
        """Note that the pack's members started (one write, made only for a pack whose jobs have a
        catch-up window: PackRunner.handle): a holder that takes the pack over after its worker died knows
        then that a member it starts again had its first start in time. Nothing if `holder` no longer
        holds the lease."""
        try:
            call(
                lambda: self._table.resource.update_item(
                    Key=keys.pack_key(pack_id),
                    UpdateExpression="SET started = :yes",
                    ConditionExpression="holder = :me",
                    ExpressionAttributeValues={":yes": True, ":me": holder},
                )
            )
        except LostRace:
            pass

    def _put(self, item: dict[str, Any], condition: str, values: dict[str, Any]) -> dict[str, Any]:
        """Put the item; the item it replaced, if any (returned by the same write, at no cost)."""
        answer = call(
            lambda: self._table.resource.put_item(
                Item=item,
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": values} if values else {}),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        )
        return dict(answer.get("Attributes") or {})


def _held_until(exc: LostRace) -> datetime | None:
    cause = exc.__cause__
    old: Any = cause.response.get("Item") if isinstance(cause, ClientError) else None
    value = old.get("lease_until") if isinstance(old, dict) else None
    if value is None:
        return None
    return from_epoch_ms(int(value["N"] if isinstance(value, dict) else value))
