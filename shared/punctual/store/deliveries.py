"""Notification deliveries, kept on their execution's item: one attribute per rule and event
(`delivery#<rule>#<event>`), so that deliveries of one execution never write the same attribute.

Writes: `record`, one conditional UpdateItem: only onto a stored execution (one expired from the
history takes none) and never over the record of a later attempt. Reads: with the execution
(`codec.execution_from`).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from punctual.errors import LostRace
from punctual.models import Delivery
from punctual.store import codec, keys
from punctual.store.table import Table, call


class DeliveryRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def record(self, job_id: str, scheduled_at: datetime, execution_id: str, delivery: Delivery) -> None:
        """Keep a notification's delivery on its execution's item, unless a record of a later attempt
        is there already (or the execution has expired): one attribute per rule and event."""
        try:
            call(
                partial(
                    self._table.resource.update_item,
                    Key=keys.execution_key(job_id, scheduled_at, execution_id),
                    UpdateExpression="SET #d = :d",
                    ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(#d) OR #d.#n <= :n)",
                    ExpressionAttributeNames={
                        "#d": codec.delivery_attribute(delivery.event, delivery.rule),
                        "#n": "attempts",
                    },
                    ExpressionAttributeValues={
                        ":d": codec.delivery_record(delivery),
                        ":n": delivery.attempts,
                    },
                )
            )
        except LostRace:
            pass  # expired from the history, or a later attempt's record stands
