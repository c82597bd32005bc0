"""Owners whose jobs no token reaches: the local stack's tokens come from PUNCTUAL_LOCAL_TOKENS at each
start, and jobs belong to the owner whose token created them, so a token dropped between starts leaves
its owner's jobs firing out of everyone's sight. The stack names those owners when it starts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from punctual.domain.models import JobStatus
from punctual.store import keys
from punctual_local.moto.items import all_items


def active_owners(tables: Iterable[Any]) -> dict[str, int]:
    """Each owner with ACTIVE jobs, with how many, read in moto's memory right after a restore (as
    unfinished.py reads it): a Scan through moto's server sorted the whole table for each page, and
    kept moto from the API for seconds at a large data directory's start."""
    found: Counter[str] = Counter()
    for table in tables:
        for item in all_items(table):
            if item.range_key is None or str(item.range_key.value) != keys.JOB_SK:
                continue
            status, owner = item.attrs.get("status"), item.attrs.get("owner")
            if status is not None and owner is not None and status.value == JobStatus.ACTIVE.value:
                found[str(owner.value)] += 1
    return dict(found)


def owners_without_token(active: Mapping[str, int], owners_with_token: Iterable[str]) -> Counter[str]:
    """Each owner with ACTIVE jobs (`active`, from `active_owners`) and no token, with how many."""
    known = set(owners_with_token)
    return Counter({owner: n for owner, n in active.items() if owner not in known})


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
