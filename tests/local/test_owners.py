"""The local stack names, at start, the owners whose active jobs no token reaches (moto, the real
table definition)."""

from __future__ import annotations

from collections import Counter

import boto3
from moto import mock_aws

from punctual.platform import resources
from punctual.store import keys
from punctual_local import owners
from punctual_local.moto.items import all_tables

TABLE = "punctual-owners"


def _job(job_id: str, owner: str, status: str) -> dict[str, dict[str, str]]:
    return {
        "pk": {"S": keys.job_pk(job_id)},
        "sk": {"S": keys.JOB_SK},
        "id": {"S": job_id},
        "owner": {"S": owner},
        "status": {"S": status},
    }


@mock_aws
def test_owners_with_active_jobs_and_no_token_are_named_with_how_many() -> None:
    # Given jobs of alice (who has a token), bob (two active, none now) and carol (cancelled only)
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(**resources.TABLE.create_table_kwargs(TABLE))
    for job_id, owner, status in (
        ("job_a", "alice", "ACTIVE"),
        ("job_b1", "bob", "ACTIVE"),
        ("job_b2", "bob", "ACTIVE"),
        ("job_b3", "bob", "PAUSED"),
        ("job_c", "carol", "CANCELLED"),
    ):
        client.put_item(TableName=TABLE, Item=_job(job_id, owner, status))

    # When the stack, started with alice's token alone, looks (in moto's memory, as a restore does)
    active = owners.active_owners([all_tables()[TABLE]])
    orphans = owners.owners_without_token(active, ["alice"])

    # Then bob is named, with his two active jobs, and the note says how to keep tokens
    assert active == {"alice": 1, "bob": 2}
    assert orphans == Counter({"bob": 2})
    note = owners.warning(orphans, {"tok-a": "alice"})
    assert note is not None and "bob (2 active)" in note
    assert "PUNCTUAL_LOCAL_TOKENS=tok-a=alice,TOKEN=bob" in note
    assert owners.warning(owners.owners_without_token(active, ["alice", "bob"]), {}) is None
