"""scripts/backfill_list_keys.py gives the jobs an earlier version stored their by_flag and by_name
keys, on a table as the upgrade leaves it (this version's indexes and the retired ones)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import Job, JobStatus
from punctual.platform import resources
from punctual.store import Store, keys
from scripts import backfill_list_keys as backfill
from tests.store.builders import NOW, OWNER, execution, job

TABLE = "punctual-upgrading"


@pytest.fixture
def store() -> Iterator[Store]:
    # The table between the upgrade's deployments: by_flag added, by_status and by_outcome kept
    upgrading = replace(resources.TABLE, indexes=(*resources.TABLE.indexes, *resources.RETIRED_LIST_INDEXES))
    session = boto3.session.Session(region_name="us-east-1")
    with mock_aws():
        client = session.client("dynamodb")
        client.create_table(**upgrading.create_table_kwargs(TABLE))
        yield Store(session.resource("dynamodb"), client, TABLE, shard_count=4, retention_days=30)


def stored_earlier(store: Store, new: Job, outcome: ExecutionStatus | None = None) -> Job:
    """`new` stored as an earlier version stored it: no flag, and its name even when it is its id."""
    store.jobs.put_new(new)
    if outcome is not None:
        store.jobs.record_outcome(execution(new, at=NOW, status=outcome, finished_at=NOW, attempts=1))
    store.table.resource.update_item(
        Key=keys.job_key(new.id),
        UpdateExpression="SET #nm = :nm REMOVE flag",
        ExpressionAttributeNames={"#nm": "name"},
        ExpressionAttributeValues={":nm": new.name},
    )
    return new


def item(store: Store, job_id: str) -> dict[str, Any]:
    return dict(store.table.resource.get_item(Key=keys.job_key(job_id), ConsistentRead=True)["Item"])


def listed(store: Store, **query: Any) -> list[str]:
    status = query.pop("status", None)
    return [j.id for j in store.jobs.page(OWNER, status, 50, None, **query).items]


def at(minute: int, job_id: str, **changes: Any) -> Job:
    return job(job_id, created=NOW + timedelta(minutes=minute), **changes)


def an_earlier_versions_jobs(store: Store) -> dict[str, Job]:
    """A job of each kind the backfill tells apart, stored without a flag, each with its id as name
    but the one named by its user."""
    return {
        "plain": stored_earlier(store, at(0, "job_plain"), ExecutionStatus.SUCCEEDED),
        "paused": stored_earlier(store, at(1, "job_paused", status=JobStatus.PAUSED, next_run_at=None)),
        "failing": stored_earlier(store, at(2, "job_failing"), ExecutionStatus.FAILED),
        "paused_failing": stored_earlier(
            store,
            at(3, "job_paused_failing", status=JobStatus.PAUSED, next_run_at=None),
            ExecutionStatus.FAILED,
        ),
        "cancelled": stored_earlier(
            store, at(4, "job_cancelled", status=JobStatus.CANCELLED, next_run_at=None)
        ),
        "named": stored_earlier(store, at(5, "job_named", name="nightly-report")),
    }


def test_a_dry_run_counts_the_jobs_to_change_and_writes_nothing(store: Store) -> None:
    # Given an earlier version's six jobs, five of which need a key set or dropped
    jobs = an_earlier_versions_jobs(store)
    before = {name: item(store, j.id) for name, j in jobs.items()}
    # When the backfill runs dry
    lines: list[dict[str, Any]] = []
    totals = backfill.backfill(store.table.resource, dry_run=True, report=lines.append)
    # Then it counts them, ends with no cursor, and every item is as it was
    assert (totals.jobs, totals.changed, totals.unchanged) == (6, 5, 1)
    assert lines[-1]["cursor"] is None and all(line["dry_run"] for line in lines)
    assert {name: item(store, j.id) for name, j in jobs.items()} == before


def test_the_backfill_lists_each_job_under_its_flag_and_its_name_once(store: Store) -> None:
    # Given an earlier version's jobs, which the lists by state miss, and besides them markers and
    # executions (other items of the table, which the backfill reads past)
    jobs = an_earlier_versions_jobs(store)
    store.executions.put_new_many([execution(jobs["plain"], status=ExecutionStatus.QUEUED)])
    plain_id = jobs["plain"].id
    assert listed(store, status=JobStatus.PAUSED) == []
    assert listed(store, name_prefix=plain_id) == [plain_id, plain_id]
    # When the backfill runs, two items a page
    lines: list[dict[str, Any]] = []
    totals = backfill.backfill(store.table.resource, page_size=2, report=lines.append)
    # Then each paused, cancelled or failing job is listed by its state, newest first
    assert listed(store, status=JobStatus.PAUSED) == ["job_paused_failing", "job_paused"]
    assert listed(store, status=JobStatus.CANCELLED) == ["job_cancelled"]
    assert listed(store, outcome=ExecutionStatus.FAILED) == ["job_paused_failing", "job_failing"]
    # and a job named by its id stores no name: listed once by its id, and still shown with it
    assert listed(store, name_prefix=plain_id) == [plain_id]
    shown = store.jobs.get(plain_id)
    assert "name" not in item(store, plain_id) and shown is not None and shown.name == plain_id
    # while a name given is kept, and a plain job gets no flag
    assert listed(store, name_prefix="nightly") == ["job_named"]
    assert "flag" not in item(store, plain_id) and "flag" not in item(store, "job_named")
    assert item(store, "job_paused_failing")["flag"] == "PAUSED#FAILED"
    # and it went page by page, each with the cursor to go on from
    assert (totals.jobs, totals.changed, totals.unchanged, totals.contended) == (6, 5, 1, 0)
    assert len(lines) > 2 and all(line["cursor"] for line in lines[:-1]) and lines[-1]["cursor"] is None
    # When it runs again, it finds nothing to change
    again = backfill.backfill(store.table.resource, report=lambda _: None)
    assert (again.jobs, again.changed, again.unchanged) == (6, 0, 6)


def test_a_run_goes_on_from_the_cursor_it_printed(store: Store) -> None:
    # Given a run that stopped after its first page (its cursor printed)
    an_earlier_versions_jobs(store)
    first: list[dict[str, Any]] = []
    backfill.backfill(store.table.resource, page_size=3, dry_run=True, report=first.append)
    cursor = first[0]["cursor"]
    # When another starts from that cursor
    rest = backfill.backfill(store.table.resource, cursor=cursor, page_size=3, report=lambda _: None)
    # Then it reads on from there: the first page's jobs are left to the run that read them
    assert rest.jobs == 6 - first[0]["jobs"] and rest.scanned == sum(line["scanned"] for line in first[1:])
    with pytest.raises(SystemExit, match="not a cursor"):
        backfill.backfill(store.table.resource, cursor="bm90IGEgY3Vyc29y", report=lambda _: None)


def test_a_job_changed_after_it_was_read_is_not_given_stale_keys(store: Store) -> None:
    # Given a paused job and a job named by its id, read by the backfill
    jobs = an_earlier_versions_jobs(store)
    read = {name: item(store, jobs[name].id) for name in ("paused", "plain")}
    # When, before it writes, the paused job is resumed and the other renamed (by this version)
    resumed = store.jobs.update(
        jobs["paused"], {"status": JobStatus.ACTIVE, "next_run_at": NOW}, allowed_statuses=[JobStatus.PAUSED]
    )
    renamed = store.jobs.update(jobs["plain"], {"name": "renamed"})
    results = [backfill.fix(store.table.resource, read[name]) for name in ("paused", "plain")]
    # Then neither write lands on what it read: the resumed job, read again, loses only its stored id
    # (no PAUSED flag), and the renamed one keeps its new name
    assert results == [True, False]
    assert "flag" not in item(store, resumed.id) and "name" not in item(store, resumed.id)
    assert item(store, renamed.id)["name"] == "renamed"
