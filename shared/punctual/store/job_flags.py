"""A job's flag (by_flag: list_keys.flag_of) kept true to its status and outcome as stored: the clause
that sets it in a write, and the settling after a write that others may have raced.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from punctual.domain.errors import LostRace
from punctual.store import keys, list_keys
from punctual.store.codec.jobs import expires_within_entry
from punctual.store.table import Table, call

# Writes at most to settle a job's flag against writes racing it (each of which settles it too).
SETTLE_ATTEMPTS = 3


def set_flag(flag: str | None, sets: list[str], removes: list[str], values: dict[str, Any]) -> None:
    """Add to an update's SET or REMOVE clauses (and its values) what stores `flag` (None: none)."""
    if flag is None:
        removes.append("flag")
    else:
        sets.append("flag = :flag")
        values[":flag"] = flag


def list_on_own(owner: str, sets: list[str], values: dict[str, Any]) -> None:
    """Add to an update's SET clause what lists a job on its own in by_owner (and so lets by_flag and
    by_name hold it): its owner_pk. A job that has it already writes no index entry for it again; one
    listed only by its batch's entry (`Job.listed_in`) gains its own."""
    sets.append("owner_pk = :owner_pk")
    values[":owner_pk"] = keys.owner_pk(owner)


def outlived_entry(table: Table, item: dict[str, Any]) -> dict[str, Any]:
    """The job item (as a write returned it) listed by its batch's list entry only while it expires
    before that entry does (`codec.jobs.listed_by_entry`): one that now expires later (its run ended
    late, or the retention grew since) is given an entry of its own, in a second write."""
    if (
        "owner_pk" in item
        or "listed_until" not in item
        or "expires_at" not in item
        or expires_within_entry(item)
    ):
        return item
    sets: list[str] = []
    values: dict[str, Any] = {}
    list_on_own(str(item["owner"]), sets, values)
    response = call(
        partial(
            table.resource.update_item,
            Key=keys.job_key(str(item["id"])),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
    )
    return dict(response["Attributes"])


def settle(table: Table, item: dict[str, Any]) -> dict[str, Any]:
    """The job item (as a write returned it) with the flag its status and outcome call for: a
    write that moved one of them set the flag from what its caller read (a job's outcome, a run's
    job's status), which another write between may have changed. Only then a second write,
    conditioned on both as seen: a write after it settles the flag itself, from what it returns."""
    key = keys.job_key(str(item["id"]))
    for _ in range(SETTLE_ATTEMPTS):
        want = list_keys.stored_flag(item)
        if item.get("flag") == want:
            return item
        outcome = item.get("outcome")
        names = {"#st": "status", "#oc": "outcome"}
        values: dict[str, Any] = {":st": item["status"]}
        if outcome:
            values[":oc"] = outcome
        sets: list[str] = []
        if want is not None:
            values[":flag"] = want
            sets.append("flag = :flag")
            list_on_own(str(item["owner"]), sets, values)  # (by_flag holds only jobs with an owner_pk)
        try:
            response = call(
                partial(
                    table.resource.update_item,
                    Key=key,
                    UpdateExpression="SET " + ", ".join(sets) if sets else "REMOVE flag",
                    ConditionExpression="#st = :st AND "
                    + ("#oc = :oc" if outcome else "attribute_not_exists(#oc)"),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
            )
            return dict(response["Attributes"])
        except LostRace:
            found = call(partial(table.resource.get_item, Key=key, ConsistentRead=True)).get("Item")
            if found is None:
                return item
            item = dict(found)
    return item
