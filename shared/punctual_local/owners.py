"""Owners whose jobs no token reaches: the local stack's tokens come from PUNCTUAL_LOCAL_TOKENS at each
start, and jobs belong to the owner whose token created them, so a token dropped between starts leaves
its owner's jobs firing out of everyone's sight. The stack names those owners when it starts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from punctual.domain.models import JobStatus
from punctual.store import keys


def owners_without_token(dynamodb_client: Any, table: str, owners_with_token: Iterable[str]) -> Counter[str]:
    """Each owner with ACTIVE jobs and no token, with how many (one pass over the table)."""
    known = set(owners_with_token)
    found: Counter[str] = Counter()
    pages = dynamodb_client.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="begins_with(pk, :job) AND sk = :sk AND #st = :active",
        ExpressionAttributeNames={"#st": "status", "#owner": "owner"},
        ExpressionAttributeValues={
            ":job": {"S": keys.job_pk("")},
            ":sk": {"S": keys.JOB_SK},
            ":active": {"S": JobStatus.ACTIVE.value},
        },
        ProjectionExpression="#owner",
    )
    for page in pages:
        for item in page.get("Items", []):
            owner = item.get("owner", {}).get("S")
            if owner is not None and owner not in known:
                found[owner] += 1
    return found


def warning(orphans: Counter[str], tokens: Mapping[str, str]) -> str | None:
    """What the stack says of them (`tokens`: the stack's, token to owner), or None when every owner
    with active jobs has a token."""
    if not orphans:
        return None
    listed = ", ".join(f"{owner} ({count} active)" for owner, count in sorted(orphans.items()))
    pairs = [f"{token}={owner}" for token, owner in tokens.items()]
    pairs += [f"TOKEN={owner}" for owner in sorted(orphans)]
    return (
        f"  note     jobs run for owners with no token: {listed}; no token can see them. Keep each "
        f"owner's token across starts: PUNCTUAL_LOCAL_TOKENS={','.join(pairs)}"
    )
