"""Notification deliveries, kept on their execution's item: one attribute per rule and event
(`delivery#<rule>#<event>`), so that deliveries of one execution never write the same attribute.

Writes: `record`, one conditional UpdateItem: only onto a stored execution (one expired from the
history takes none) and never over the record of a later attempt. Reads: with the execution
(`codec.executions.execution_from`, through `deliveries_from`).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from punctual.domain.errors import LostRace
from punctual.domain.executions import Delivery, DeliveryStatus
from punctual.domain.policies import NotifyEvent
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms
from punctual.store import keys
from punctual.store.table import Table, call

# A delivery's record on its execution's item: one attribute per rule and event, so that deliveries
# of one execution never write the same attribute.
_DELIVERY_PREFIX = "delivery#"


def delivery_attribute(event: NotifyEvent, rule: int) -> str:
    return f"{_DELIVERY_PREFIX}{rule}#{event.value}"


def delivery_record(delivery: Delivery) -> dict[str, Any]:
    record: dict[str, Any] = {
        "to": delivery.to,
        "status": delivery.status.value,
        "attempts": delivery.attempts,
        "at": to_epoch_ms(delivery.at),
    }
    if delivery.error is not None:
        record["error"] = delivery.error
    if delivery.next_attempt_at is not None:
        record["next"] = to_epoch_ms(delivery.next_attempt_at)
    return record


def deliveries_from(item: dict[str, Any]) -> tuple[Delivery, ...]:
    found = []
    for name, value in item.items():
        if not name.startswith(_DELIVERY_PREFIX) or not isinstance(value, dict):
            continue
        try:
            _, rule, event = name.split("#", 2)
            found.append(
                Delivery(
                    event=NotifyEvent(event),
                    rule=int(rule),
                    to=str(value["to"]),
                    status=DeliveryStatus(value["status"]),
                    attempts=int(value["attempts"]),
                    at=from_epoch_ms(int(value["at"])),
                    error=value.get("error"),
                    next_attempt_at=None if value.get("next") is None else from_epoch_ms(int(value["next"])),
                )
            )
        except (KeyError, ValueError):
            continue  # a newer version's record
    return tuple(sorted(found, key=lambda d: (d.rule, d.event.value)))


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
                        "#d": delivery_attribute(delivery.event, delivery.rule),
                        "#n": "attempts",
                    },
                    ExpressionAttributeValues={
                        ":d": delivery_record(delivery),
                        ":n": delivery.attempts,
                    },
                )
            )
        except LostRace:
            pass  # expired from the history, or a later attempt's record stands
