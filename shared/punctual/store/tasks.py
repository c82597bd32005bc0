"""Named tasks: pk TASK#<owner digest>, sk TASK#<name>, and the jobs that use them.

One partition per owner holds all of its tasks, in name order: listing them is one Query, and
another owner's task of the same name is another item. A job using a named task carries `task_ref`
(keys.task_ref) while it is ACTIVE or PAUSED (jobs.py writes it, in the job's own writes); the sparse
`by_task` index holds only those jobs, so "is this task in use" is one bounded COUNT query, whatever
else the owner has.

Writes are conditional on the version read: a new task only if the owner has none of that name; a
change (its version one more) or a deletion only while it is still at the version read; LostRace
otherwise. Reads: one task (consistent unless asked), a page of an owner's tasks, the jobs using one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from punctual.domain.models import Job
from punctual.domain.named_tasks import NamedTask
from punctual.domain.policies import RetryPolicy
from punctual.platform import resources
from punctual.platform.timefmt import parse_stored, to_rfc3339
from punctual.ports.pages import Page
from punctual.store import keys
from punctual.store.table import Table, call, cursor_key


class TaskRepository:
    def __init__(self, table: Table) -> None:
        self._table = table.resource

    def put_new(self, task: NamedTask) -> None:
        """Store a new task; LostRace if the owner has one of that name."""
        call(lambda: self._table.put_item(Item=_item(task), ConditionExpression="attribute_not_exists(pk)"))

    def get(self, owner: str, name: str, *, consistent: bool = True) -> NamedTask | None:
        """The owner's task (read consistently unless asked: a worker's refresh of its copy need not)."""
        response = call(
            lambda: self._table.get_item(Key=keys.task_key(owner, name), ConsistentRead=consistent)
        )
        item = response.get("Item")
        return None if item is None else _task_from(item)

    def page(self, owner: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the owner's tasks, by name."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": keys.task_pk(owner), ":prefix": keys.TASK_PREFIX},
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = cursor_key(
                start_key, equal={"pk": keys.task_pk(owner)}, prefixed={"sk": keys.TASK_PREFIX}
            )
        response = call(lambda: self._table.query(**kwargs))
        return Page([_task_from(i) for i in response.get("Items", [])], response.get("LastEvaluatedKey"))

    @staticmethod
    def key_after(task: NamedTask) -> dict[str, str]:
        """The key to continue a page of its owner's tasks after `task`."""
        return keys.task_key(task.owner, task.name)

    def replace(self, task: NamedTask, expected_version: int) -> NamedTask:
        """Store a changed task (its version one more) if it is still at `expected_version`; LostRace
        if it changed or went meanwhile."""
        changed = replace(task, version=expected_version + 1)
        call(
            lambda: self._table.put_item(
                Item=_item(changed),
                ConditionExpression="attribute_exists(pk) AND #v = :v",
                ExpressionAttributeNames={"#v": "version"},
                ExpressionAttributeValues={":v": expected_version},
            )
        )
        return changed

    def delete(self, task: NamedTask) -> None:
        """Delete a task if it is still at the version read; LostRace otherwise."""
        call(
            lambda: self._table.delete_item(
                Key=keys.task_key(task.owner, task.name),
                ConditionExpression="attribute_exists(pk) AND #v = :v",
                ExpressionAttributeNames={"#v": "version"},
                ExpressionAttributeValues={":v": task.version},
            )
        )

    def count_jobs_using(self, owner: str, name: str, at_most: int) -> int:
        """How many ACTIVE or PAUSED jobs use the task, counting at most `at_most` (one COUNT Query
        on the sparse by_task index: bounded whatever the number of jobs)."""
        index = resources.BY_TASK_INDEX
        response = call(
            lambda: self._table.query(
                IndexName=index.name,
                KeyConditionExpression="#k = :k",
                ExpressionAttributeNames={"#k": index.partition_key},
                ExpressionAttributeValues={":k": keys.task_ref(owner, name)},
                Select="COUNT",
                Limit=at_most,
            )
        )
        return int(response.get("Count", 0))

    def job_ids_using(self, owner: str, name: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """A page of the ids of the ACTIVE or PAUSED jobs using the task, newest first."""
        index = resources.BY_TASK_INDEX
        key = keys.task_ref(owner, name)
        kwargs: dict[str, Any] = {
            "IndexName": index.name,
            "KeyConditionExpression": "#k = :k",
            "ExpressionAttributeNames": {"#k": index.partition_key},
            "ExpressionAttributeValues": {":k": key},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start_key:
            kwargs["ExclusiveStartKey"] = cursor_key(
                start_key,
                equal={index.partition_key: key, "sk": keys.JOB_SK},
                prefixed={"pk": keys.JOB_PK_PREFIX, index.sort_key: ""},
            )
        response = call(lambda: self._table.query(**kwargs))
        ids = [keys.job_id_of(str(item["pk"])) for item in response.get("Items", [])]
        return Page(ids, response.get("LastEvaluatedKey"))

    @staticmethod
    def key_after_job(owner: str, name: str, job: Job) -> dict[str, str]:
        """Where `job_ids_using` goes on after this job (a page that ended on it early)."""
        index = resources.BY_TASK_INDEX
        return {
            index.partition_key: keys.task_ref(owner, name),
            index.sort_key: keys.owner_sk(job.created_at, job.id),
            "pk": keys.job_pk(job.id),
            "sk": keys.JOB_SK,
        }


def _item(task: NamedTask) -> dict[str, Any]:
    item: dict[str, Any] = {
        **keys.task_key(task.owner, task.name),
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
        created_at=parse_stored(item["created_at"]),
        updated_at=parse_stored(item["updated_at"]),
    )
