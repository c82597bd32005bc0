"""Named tasks in the Punctual table: their items, key formats and expressions live here only.

- a named task: pk TASK#<owner digest>   sk TASK#<name>
  One partition per owner holds all of its tasks, in name order: listing them is one Query, and
  another owner's task of the same name is another item.
- a job using a named task carries `task_ref` = <owner digest>#<name> while it is ACTIVE or PAUSED
  (store.py writes it, in the job's own writes); the sparse `by_task` index holds only those jobs,
  so "is this task in use" is one bounded COUNT query, whatever else the owner has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from punctual import resources
from punctual.models import RetryPolicy
from punctual.store import Page, _call, _cursor_key, owner_digest, task_ref_key
from punctual.timefmt import parse_rfc3339, to_rfc3339

_TASK_PK = "TASK#"
_TASK_SK = "TASK#"


@dataclass(frozen=True)
class NamedTask:
    owner: str
    name: str
    type: str
    params: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    params_schema: Any = None  # a JSON Schema (object or boolean), or None: any parameters
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    description: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    version: int = 1


class TaskStore:
    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self._table = dynamodb.Table(table_name)
        self.clients = (dynamodb.meta.client,)

    def put_new(self, task: NamedTask) -> None:
        """Store a new task; LostRace if the owner has one of that name."""
        _call(
            lambda: self._table.put_item(
                Item=self._item(task), ConditionExpression="attribute_not_exists(pk)"
            )
        )

    def get(self, owner: str, name: str, *, consistent: bool = True) -> NamedTask | None:
        """The owner's task (read consistently unless asked: a worker's refresh of its copy need not)."""
        response = _call(lambda: self._table.get_item(Key=self._key(owner, name), ConsistentRead=consistent))
        item = response.get("Item")
        return None if item is None else self._task_from(item)

    def list(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the owner's tasks, by name."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": _TASK_PK + owner_digest(owner), ":prefix": _TASK_SK},
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _cursor_key(
                start_key, equal={"pk": _TASK_PK + owner_digest(owner)}, prefixed={"sk": _TASK_SK}
            )
        response = _call(lambda: self._table.query(**kwargs))
        return Page([self._task_from(i) for i in response.get("Items", [])], response.get("LastEvaluatedKey"))

    def replace(self, task: NamedTask, expected_version: int) -> NamedTask:
        """Store a changed task (its version one more) if it is still at `expected_version`; LostRace
        if it changed or went meanwhile."""
        changed = replace(task, version=expected_version + 1)
        _call(
            lambda: self._table.put_item(
                Item=self._item(changed),
                ConditionExpression="attribute_exists(pk) AND #v = :v",
                ExpressionAttributeNames={"#v": "version"},
                ExpressionAttributeValues={":v": expected_version},
            )
        )
        return changed

    def delete(self, task: NamedTask) -> None:
        """Delete a task if it is still at the version read; LostRace otherwise."""
        _call(
            lambda: self._table.delete_item(
                Key=self._key(task.owner, task.name),
                ConditionExpression="attribute_exists(pk) AND #v = :v",
                ExpressionAttributeNames={"#v": "version"},
                ExpressionAttributeValues={":v": task.version},
            )
        )

    def count_jobs_using(self, owner: str, name: str, at_most: int) -> int:
        """How many ACTIVE or PAUSED jobs use the task, counting at most `at_most` (one COUNT Query
        on the sparse by_task index: bounded whatever the number of jobs)."""
        index = resources.BY_TASK_INDEX
        response = _call(
            lambda: self._table.query(
                IndexName=index.name,
                KeyConditionExpression="#k = :k",
                ExpressionAttributeNames={"#k": index.partition_key},
                ExpressionAttributeValues={":k": task_ref_key(owner, name)},
                Select="COUNT",
                Limit=at_most,
            )
        )
        return int(response.get("Count", 0))

    def job_ids_using(self, owner: str, name: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the ids of the ACTIVE or PAUSED jobs using the task, newest first."""
        index = resources.BY_TASK_INDEX
        key = task_ref_key(owner, name)
        kwargs: dict[str, Any] = {
            "IndexName": index.name,
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": index.partition_key},
            "ExpressionAttributeValues": {":k": key},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = _cursor_key(
                start_key,
                equal={index.partition_key: key, "sk": "JOB"},
                prefixed={"pk": "JOB#", index.sort_key: ""},
            )
        response = _call(lambda: self._table.query(**kwargs))
        ids = [str(item["pk"]).removeprefix("JOB#") for item in response.get("Items", [])]
        return Page(ids, response.get("LastEvaluatedKey"))

    # ------------------------------------------------------------- mapping
    @staticmethod
    def _key(owner: str, name: str) -> dict[str, str]:
        return {"pk": _TASK_PK + owner_digest(owner), "sk": _TASK_SK + name}

    def _item(self, task: NamedTask) -> dict[str, Any]:
        item: dict[str, Any] = {
            **self._key(task.owner, task.name),
            "owner": task.owner,
            "name": task.name,
            "type": task.type,
            # (as JSON text: DynamoDB's numbers would come back as Decimals, its maps unordered)
            "params": json.dumps(task.params),
            "version": task.version,
            "created_at": to_rfc3339(task.created_at),
            "updated_at": to_rfc3339(task.updated_at),
        }
        if task.params_schema is not None:
            item["params_schema"] = json.dumps(task.params_schema)
        if task.retry is not None:
            item["retry"] = task.retry.model_dump_json()
        if task.timeout_seconds is not None:
            item["timeout_seconds"] = task.timeout_seconds
        if task.description:
            item["description"] = task.description
        if task.tags:
            item["tags"] = dict(task.tags)
        return item

    @staticmethod
    def _task_from(item: dict[str, Any]) -> NamedTask:
        return NamedTask(
            owner=str(item["owner"]),
            name=str(item["name"]),
            type=str(item["type"]),
            params=json.loads(item["params"]),
            params_schema=json.loads(item["params_schema"]) if "params_schema" in item else None,
            retry=RetryPolicy.model_validate_json(item["retry"]) if "retry" in item else None,
            timeout_seconds=int(item["timeout_seconds"]) if "timeout_seconds" in item else None,
            description=str(item.get("description", "")),
            tags={str(k): str(v) for k, v in (item.get("tags") or {}).items()},
            version=int(item["version"]),
            created_at=parse_rfc3339(item["created_at"]),
            updated_at=parse_rfc3339(item["updated_at"]),
        )
