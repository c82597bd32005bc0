"""The table's stream, as the execution events read it: which records write an execution, and how
(the attribute names are codec/'s: executions.py, runs.py).

An execution's write is to its own item, or, for a one-time job's run that ended under its pack's
lease, to its job's item, in the write that completed the job (`codec.runs.embedded_execution`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from punctual.domain.executions import Execution
from punctual.store import keys
from punctual.store.batch_ends import ended_executions
from punctual.store.codec.runs import FROM_ENDS, RUN, embedded_execution

_DESERIALIZER = TypeDeserializer()


def _plain(image: dict[str, Any]) -> dict[str, Any]:
    return {name: _DESERIALIZER.deserialize(value) for name, value in image.items()}


def record_filters(statuses: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The filter patterns (Lambda's event filtering) that let through every record
    `execution_change` reads, and no other: the execution events function is billed for what
    passes. `statuses`: only writes that leave an execution in one of them (None: any).

    An execution's own item, stored or changed; a job's item whose new image holds a run (the run
    stored on it); a batch's ends item, each write of it adding ends (final, so not filtered by
    status: the function checks each end)."""
    image = {"NewImage": {"status": {"S": sorted(statuses)}}} if statuses is not None else {}
    run_status: Any = sorted(statuses) if statuses is not None else [{"exists": True}]
    return [
        {
            "eventName": ["INSERT", "MODIFY"],
            "dynamodb": {"Keys": {"sk": {"S": [{"prefix": keys.EXECUTION_SK_PREFIX}]}}, **image},
        },
        {
            "eventName": ["MODIFY"],
            "dynamodb": {
                "Keys": {"sk": {"S": [keys.JOB_SK]}},
                "NewImage": {RUN: {"M": {"st": {"S": run_status}}}},
            },
        },
        {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"Keys": {"sk": {"S": [keys.ENDS_SK]}}}},
    ]


def execution_change(
    record: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]] | Execution | list[Execution] | None:
    """What a stream record writes of an execution: its item's new and old images, as plain values
    (the old one empty when the write stored it); or the run stored on its job's item by this write;
    or the runs a batch's ends item gained by it (store/batch_ends.py); or None: another kind of item,
    an execution expiring from the history, or a later write to a job that keeps its run."""
    change = record.get("dynamodb") or {}
    sk = ((change.get("Keys") or {}).get("sk") or {}).get("S", "")
    if "NewImage" not in change:
        return None
    if sk == keys.ENDS_SK:
        return ended_executions(_plain(change["NewImage"]), _plain(change.get("OldImage") or {}))
    if sk == keys.JOB_SK:
        if RUN not in change["NewImage"]:
            return None
        new = _plain(change["NewImage"])
        run = embedded_execution(new)
        old = embedded_execution(_plain(change.get("OldImage") or {}))
        if run is None or (old is not None and old.id == run.id) or new[RUN].get(FROM_ENDS):
            return None  # (one copied from its batch's ends item: announced there)
        return run
    if not keys.is_execution_sk(sk):
        return None
    return _plain(change["NewImage"]), _plain(change.get("OldImage") or {})
