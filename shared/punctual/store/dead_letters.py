"""Dead letters: pk DEADLETTER#<owner>, sk <execution id>, one item an execution (putting it again
changes nothing), kept as long as its execution's history (`retention_days`). Unconditional writes;
reads by owner, a page at a time in execution-id order, or one consistently.
"""

from __future__ import annotations

from typing import Any

from punctual.domain.executions import DeadLetter
from punctual.ports.pages import Page
from punctual.store import keys
from punctual.store.codec.dead_letters import dead_letter_from, dead_letter_item
from punctual.store.table import Table, call, cursor_key


class DeadLetterRepository:
    def __init__(self, table: Table) -> None:
        self._table = table

    def put(self, letter: DeadLetter) -> None:
        item = dead_letter_item(letter, self._table.expiry(letter.dead_lettered_at))
        call(lambda: self._table.resource.put_item(Item=item))

    def page(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the owner's dead letters, by execution id."""
        pk = keys.dead_letter_pk(owner)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": pk},
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = cursor_key(start_key, equal={"pk": pk}, prefixed={"sk": ""})
        response = call(lambda: self._table.resource.query(**kwargs))
        return Page(
            [dead_letter_from(owner, i) for i in response.get("Items", [])],
            response.get("LastEvaluatedKey"),
        )

    def get(self, owner: str, execution_id: str) -> DeadLetter | None:
        key = keys.dead_letter_key(owner, execution_id)
        item = call(lambda: self._table.resource.get_item(Key=key, ConsistentRead=True)).get("Item")
        return None if item is None else dead_letter_from(owner, item)

    def delete(self, owner: str, execution_id: str) -> None:
        key = keys.dead_letter_key(owner, execution_id)
        call(lambda: self._table.resource.delete_item(Key=key))
