"""What a restart must pick up again: the executions the stack was running, or had not finished.

This reads Punctual's own items (its key formats and statuses) in moto's memory, where they are,
right after a restore: a pass over every item, with nothing sent through moto's server.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from punctual.domain.executions import RAN_TO_END, UNDER_WAY, ExecutionStatus
from punctual.platform.timefmt import parse_rfc3339, to_epoch_ms
from punctual.store import keys
from punctual_local.moto.items import all_items

_UNFINISHED = frozenset({ExecutionStatus.QUEUED, *UNDER_WAY})
_PACK_SK = keys.pack_key("")["sk"]
_SCANNER_PK = keys.lease_key(0)["pk"]


def unfinished_and_expire_leases(tables: Iterable[Any], now_ms: int) -> list[list[str]]:
    """[job_id, id, scheduled_at] of each unfinished execution, and of each that ran to its end
    without its job recording it as its outcome (its worker stopped between the two writes; a data
    directory from before the queue's journal has lost the message that would have made that good).
    A RUNNING one's worker stopped with the stack: its lease ends now, so it runs again, and so does
    a pack's lease, so that its message, held again, is taken at once, and a scanner tick's shard
    leases, so that the first tick after the start runs (none journaled: a later start ends them
    again)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    found = []
    ended: list[tuple[Any, list[str]]] = []  # (its attributes, its triple): checked against its job
    outcome_at: dict[str, int] = {}  # by job partition key: the finish of the outcome its job records
    for table in tables:
        for item in all_items(table):
            attrs = item.attrs
            if str(item.hash_key.value) == _SCANNER_PK:
                # A scanner tick's shard lease: its tick stopped with the stack, and the first tick of
                # the next start must not leave the shards to it until the lease runs out.
                until = attrs.get("until_ms")
                if until is not None and int(until.value) > now_ms:
                    dict.__setitem__(attrs, "until_ms", DynamoType({"N": str(now_ms)}))
                continue
            if item.range_key is not None and str(item.range_key.value) == _PACK_SK:
                lease = attrs.get("lease_until")
                if lease is not None and int(lease.value) > now_ms:
                    dict.__setitem__(attrs, "lease_until", DynamoType({"N": str(now_ms)}))
                continue
            if item.range_key is not None and str(item.range_key.value) == keys.JOB_SK:
                recorded = attrs.get("outcome_at")
                outcome_at[str(item.hash_key.value)] = -1 if recorded is None else int(recorded.value)
                continue
            if item.range_key is None or not keys.is_execution_sk(str(item.range_key.value)):
                continue
            status = attrs.get("status")
            try:
                triple = [attrs["job_id"].value, attrs["id"].value, attrs["scheduled_at"].value]
            except KeyError:
                continue
            if status is not None and status.value in RAN_TO_END and "finished_at" in attrs:
                ended.append((attrs, triple))
                continue
            if status is None or status.value not in _UNFINISHED:
                continue
            if status.value == ExecutionStatus.RUNNING and "lease_until" in attrs:
                dict.__setitem__(attrs, "lease_until", DynamoType({"N": str(now_ms)}))
            found.append(triple)
    for attrs, triple in ended:
        recorded = outcome_at.get(keys.job_pk(triple[0]))
        if recorded is not None and recorded < to_epoch_ms(parse_rfc3339(attrs["finished_at"].value)):
            found.append(triple)
    return found
