"""The scanner's own items, in partition SCANNER: its leases on shards (sk LEASE#<shard>: a holder
and an instant in ms) and its positions (sk CHECKPOINT#<shard>: a minute in ms and a place in that
minute's bucket, `punctual.domain.buckets.Position`).

A lease is taken with a conditional PutItem (no lease there, or one run out) and given back with a
conditional DeleteItem (still this holder's). Positions are written unconditionally: a tick holds a
lease on its shards, and a position set back only makes a tick read (and send) some markers again,
which the worker recognises; one set too far would skip markers, which nothing here does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial

from punctual.domain.buckets import START_OF_BUCKET, Position
from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.platform.concurrency import parallel_map
from punctual.platform.observability import logger
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms
from punctual.store import keys
from punctual.store.table import Table, call


class ScannerState:
    def __init__(self, table: Table) -> None:
        self._table = table

    def acquire_leases(self, shards: Sequence[int], holder: str, now: datetime, until: datetime) -> bool:
        """Take the shards for one scanner tick, unless another tick holds any of them (its lease not
        yet run out): all or nothing. One conditional PutItem a shard, side by side — not a
        transaction, which costs twice the writes (and which moto answers by copying the table)."""

        def take(shard: int) -> bool:
            try:
                call(
                    partial(
                        self._table.resource.put_item,
                        Item={**keys.lease_key(shard), "holder": holder, "until_ms": to_epoch_ms(until)},
                        ConditionExpression="attribute_not_exists(pk) OR until_ms < :now",
                        ExpressionAttributeValues={":now": to_epoch_ms(now)},
                    )
                )
            except LostRace:
                return False
            return True

        wanted = sorted(shards)
        taken = [shard for shard, ok in zip(wanted, parallel_map(take, wanted), strict=True) if ok]
        if len(taken) == len(wanted):
            return True
        self.release_leases(taken, holder)
        return False

    def release_leases(self, shards: Sequence[int], holder: str) -> None:
        """Give the shards back (those this holder still holds); a lease left behind runs out anyway."""

        def give_back(shard: int) -> None:
            try:
                call(
                    partial(
                        self._table.resource.delete_item,
                        Key=keys.lease_key(shard),
                        ConditionExpression="holder = :me",
                        ExpressionAttributeValues={":me": holder},
                    )
                )
            except (LostRace, RetryableStoreError):
                logger.warning("scanner lease not released; it runs out on its own", extra={"shard": shard})

        parallel_map(give_back, list(shards))

    def positions(self, shards: Iterable[int]) -> dict[int, Position | None]:
        """Per shard, where the scanner reads on (None: never scanned). A checkpoint holding only a
        minute (from before an upgrade) reads as that minute's start."""
        wanted = list(shards)
        found: dict[int, Position | None] = dict.fromkeys(wanted)
        for item in self._table.batch_get([keys.position_key(shard) for shard in wanted]):
            minute = from_epoch_ms(int(item["minute_ms"]))
            shard = keys.shard_of_position(str(item["sk"]))
            found[shard] = Position(minute, str(item.get("after", START_OF_BUCKET)))
        return found

    def save_positions(self, positions: dict[int, Position]) -> None:
        """Record where the scanner reads on, per shard (one PutItem each, side by side)."""

        def save(entry: tuple[int, Position]) -> None:
            shard, position = entry
            item = {
                **keys.position_key(shard),
                "minute_ms": to_epoch_ms(position.minute),
                "after": position.after,
            }
            call(partial(self._table.resource.put_item, Item=item))

        parallel_map(save, list(positions.items()))
