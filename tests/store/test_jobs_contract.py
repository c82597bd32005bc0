"""The job repository's contract (store/jobs.py, store/job_views.py), on moto and on the fake."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from punctual.domain.errors import InvalidRequest, LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus
from punctual.platform import resources
from punctual.store import Store, keys
from punctual.store.lifecycle import IllegalTransition
from punctual.store.table import put
from punctual_local import provision
from tests.store.builders import NOW, OWNER, execution, job


def test_a_new_job_is_stored_once_and_read_back_as_written(store: Store) -> None:
    # Given a new job
    new = job()
    # When it is stored, then stored again under the same id
    store.jobs.put_new(new)
    with pytest.raises(LostRace):
        store.jobs.put_new(new)
    # Then it reads back as written
    assert store.jobs.get(new.id) == new
    assert store.jobs.get("job_missing") is None


def test_many_jobs_read_together_report_the_unreadable_apart(store: Store) -> None:
    # Given two jobs, one of whose items holds a time zone this runtime cannot read
    store.jobs.put_new_many([job("job_1"), job("job_2")])
    store.table.resource.update_item(
        Key={"pk": "JOB#job_2", "sk": "JOB"},
        UpdateExpression="SET schedule = :s",
        ExpressionAttributeValues={
            ":s": '{"type":"cron","expression":"* * * * *","timezone":"Mars/Olympus_Mons"}'
        },
    )
    # When they are read with one missing
    read = store.jobs.get_many(["job_1", "job_2", "job_3"])
    # Then the readable one is found and the other reported with why
    assert set(read.found) == {"job_1"}
    assert set(read.unreadable) == {"job_2"} and "Olympus" in read.unreadable["job_2"]
    assert read.readable() == read.found


def test_an_update_holds_only_while_the_job_is_as_read(store: Store) -> None:
    # Given a stored job
    stored = job()
    store.jobs.put_new(stored)
    # When it is renamed at its status and version, then again at a stale version
    renamed = store.jobs.update(
        stored,
        {"name": "renamed", "updated_at": NOW},
        allowed_statuses=[JobStatus.ACTIVE],
        schedule_version=stored.schedule_version,
    )
    assert renamed.name == "renamed"
    with pytest.raises(LostRace):
        store.jobs.update(stored, {"name": "late"}, allowed_statuses=[JobStatus.ACTIVE], schedule_version=99)
    with pytest.raises(LostRace):
        store.jobs.update(stored, {"name": "late"}, allowed_statuses=[JobStatus.PAUSED])
    # Then only the first change is there
    current = store.jobs.get(stored.id)
    assert current is not None and current.name == "renamed"


def test_a_next_run_is_never_moved_back(store: Store) -> None:
    stored = job()
    store.jobs.put_new(stored)
    later = NOW + timedelta(hours=1)
    store.jobs.update(stored, {"next_run_at": later}, next_run_before=later)
    with pytest.raises(LostRace):
        store.jobs.update(stored, {"next_run_at": NOW}, next_run_before=NOW)
    current = store.jobs.get(stored.id)
    assert current is not None and current.next_run_at == later


def test_a_status_change_the_lifecycle_does_not_list_is_refused_before_any_write(store: Store) -> None:
    # Given a cancelled job
    cancelled = job(status=JobStatus.CANCELLED)
    store.jobs.put_new(cancelled)
    # When something tries to make it active again / Then it is refused, and the job is unchanged
    with pytest.raises(IllegalTransition):
        store.jobs.update(cancelled, {"status": JobStatus.ACTIVE}, allowed_statuses=[JobStatus.CANCELLED])
    assert store.jobs.get(cancelled.id) == cancelled


def test_a_job_completes_only_while_active_on_the_runs_schedule(store: Store) -> None:
    # Given an active job and its run, succeeded
    active = job()
    store.jobs.put_new(active)
    run = execution(active, status=ExecutionStatus.SUCCEEDED, finished_at=NOW + timedelta(minutes=6))
    # When a run of another schedule version completes it / Then it lost the race
    with pytest.raises(LostRace):
        store.jobs.complete(active, replace(run, schedule_version=7))
    # When its own run completes it / Then it is COMPLETED, its outcome recorded, no failures
    assert store.jobs.complete(active, run) == 0
    completed = store.jobs.get(active.id)
    assert completed is not None and completed.status is JobStatus.COMPLETED
    assert completed.outcome is not None and completed.outcome.execution_id == run.id
    assert completed.next_run_at is None
    # and completing it again is refused
    with pytest.raises(LostRace):
        store.jobs.complete(active, run)


def test_an_outcome_is_never_recorded_over_a_later_one(store: Store) -> None:
    # Given a job whose run failed at 9:10
    stored = job()
    store.jobs.put_new(stored)
    failed = execution(stored, status=ExecutionStatus.FAILED, finished_at=NOW + timedelta(minutes=10))
    assert store.jobs.record_outcome(failed) == 1
    # When the same outcome comes again, and an earlier one after it
    assert store.jobs.record_outcome(failed) is None
    earlier = replace(failed, id=failed.id + "x", finished_at=NOW + timedelta(minutes=9))
    assert store.jobs.record_outcome(earlier) is None
    # Then the 9:10 failure stands, counted once; a later failure counts two
    later = replace(failed, id=failed.id + "y", finished_at=NOW + timedelta(minutes=11))
    assert store.jobs.record_outcome(later) == 2
    # and a job that is gone records none
    assert store.jobs.record_outcome(replace(later, job_id="job_gone", id="job_gone.1.1")) is None


def test_an_owners_jobs_list_newest_first_a_page_at_a_time(store: Store) -> None:
    # Given three of alice's jobs, created a minute apart, one paused, and one of bob's
    jobs = [job(f"job_{i}", created=NOW + timedelta(minutes=i)) for i in range(3)]
    jobs[1] = replace(jobs[1], status=JobStatus.PAUSED, next_run_at=None)
    store.jobs.put_new_many([*jobs, job("job_bob", owner="bob")])
    # When they are listed two at a time
    first = store.jobs.page(OWNER, None, 2, None)
    second = store.jobs.page(OWNER, None, 2, first.last_key)
    # Then newest first, alice's only, across pages
    assert [j.id for j in first.items] == ["job_2", "job_1"]
    assert [j.id for j in second.items] == ["job_0"]
    # and a list by status filters them
    assert [j.id for j in store.jobs.page(OWNER, JobStatus.ACTIVE, 10, None).items] == ["job_2", "job_0"]


def test_a_job_is_shown_with_its_last_finished_execution(store: Store) -> None:
    # Given a job with a finished run and a newer one under way
    stored = job()
    store.jobs.put_new(stored)
    done = execution(stored, at=NOW, status=ExecutionStatus.SUCCEEDED, finished_at=NOW, attempts=1)
    running = execution(stored, at=NOW + timedelta(minutes=1), status=ExecutionStatus.RUNNING, attempts=1)
    store.executions.put_new_many([done, running])
    # When it is read as users see it / Then its last execution is the finished one
    shown = store.jobs.get_with_last_execution(stored.id)
    assert shown is not None and shown.last_execution is not None
    assert shown.last_execution.id == done.id
    [listed] = store.jobs.with_last_executions([stored])
    assert listed.last_execution is not None and listed.last_execution.id == done.id
    # and by the outcome its job recorded
    store.jobs.record_outcome(done)
    recorded = store.jobs.get(stored.id)
    assert recorded is not None
    [by_outcome] = store.jobs.with_outcome_executions([recorded])
    assert by_outcome.last_execution is not None and by_outcome.last_execution.id == done.id


def test_a_paused_one_time_job_notes_its_run_ended_only_if_paused_from_that_run(store: Store) -> None:
    # Given a one-time job paused from version 1 (its run's)
    active = job()
    store.jobs.put_new(active)
    pause = {"status": JobStatus.PAUSED, "paused_version": 1, "schedule_version": 5, "next_run_at": None}
    stored = store.jobs.update(active, pause, allowed_statuses=[JobStatus.ACTIVE])
    # When runs of other versions, then its own, end / Then only its own is noted
    run = execution(job(), status=ExecutionStatus.SUCCEEDED, finished_at=NOW)  # version 1
    assert not store.jobs.note_ran_while_paused(stored, replace(run, schedule_version=2), NOW)
    assert store.jobs.note_ran_while_paused(stored, run, NOW)
    noted = store.jobs.get(stored.id)
    assert noted is not None and noted.ran_at == NOW


class _Reads:
    """What a stretch of store calls read: the index or table entries its Queries read (their
    ScannedCount) and returned, the items its GetItems and BatchGetItems returned, the calls in order."""

    def __init__(self) -> None:
        self.entries = 0
        self.returned = 0
        self.items = 0
        self.calls: list[str] = []

    def __call__(self, event_name: str, parsed: dict[str, Any], **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[1]
        self.calls.append(operation)
        if operation == "Query":
            self.entries += int(parsed.get("ScannedCount", 0))
            self.returned += int(parsed.get("Count", 0))
        elif operation == "BatchGetItem":
            self.items += sum(len(found) for found in parsed.get("Responses", {}).values())
        elif operation == "GetItem":
            self.items += "Item" in parsed


@contextmanager
def reading(store: Store) -> Iterator[_Reads]:
    reads = _Reads()
    for client in store.clients:
        client.meta.events.register("after-call.dynamodb.*", reads)
    try:
        yield reads
    finally:
        for client in store.clients:
            client.meta.events.unregister("after-call.dynamodb.*", reads)


def _finished(of: Job, status: ExecutionStatus) -> Execution:
    return execution(of, at=NOW, status=status, finished_at=NOW, attempts=1)


def test_each_filter_reads_only_the_jobs_it_lists(store: Store) -> None:
    # Given 40 of alice's jobs that match no filter, and among them, two of each filter's: paused,
    # failed, named zz-…, tagged team:billing (and bob's of each, which alice never sees)
    plain = [job(f"job_{i:02d}", created=NOW + timedelta(seconds=i), name=f"plain-{i}") for i in range(40)]
    paused = [
        job(f"job_p{i}", status=JobStatus.PAUSED, next_run_at=None, created=NOW + timedelta(minutes=i))
        for i in range(2)
    ]
    failed = [job(f"job_f{i}", created=NOW + timedelta(minutes=2 + i)) for i in range(2)]
    named = [job(f"job_n{i}", name=f"zz-{i}", created=NOW + timedelta(minutes=4 + i)) for i in range(2)]
    tagged = [
        job(f"job_t{i}", tags={"team": "billing"}, created=NOW + timedelta(minutes=6 + i)) for i in range(2)
    ]
    bobs = [replace(j, id=f"{j.id}_bob", owner="bob") for j in (paused[0], failed[0], named[0], tagged[0])]
    store.jobs.put_new_many([*plain, *paused, *failed, *named, *tagged, *bobs])
    for j in (*failed, bobs[1]):
        store.jobs.record_outcome(_finished(j, ExecutionStatus.FAILED))
    store.jobs.record_outcome(_finished(plain[0], ExecutionStatus.SUCCEEDED))
    expected = {
        "status": (dict(status=JobStatus.PAUSED), ["job_p1", "job_p0"]),
        "outcome": (dict(outcome=ExecutionStatus.FAILED), ["job_f1", "job_f0"]),
        "name_prefix": (dict(name_prefix="zz-"), ["job_n0", "job_n1"]),  # by name
        "tag": (dict(tag=("team", "billing")), ["job_t1", "job_t0"]),
        "tag key": (dict(tag=("team", None)), ["job_t1", "job_t0"]),
    }
    for name, (filters, ids) in expected.items():
        status = filters.pop("status", None)
        # When alice lists her jobs with that filter
        with reading(store) as reads:
            page = store.jobs.page(OWNER, status, 10, None, **filters)
        # Then she gets its two jobs, in one page, having read their two entries and their two jobs
        assert [j.id for j in page.items] == ids, name
        assert page.last_key is None, name
        assert (reads.entries, reads.items) == (2, 2), name


def test_a_filtered_list_pages_with_a_cursor_on_its_own_path(store: Store) -> None:
    # Given five of alice's paused jobs among active ones
    jobs = [job(f"job_{i}", created=NOW + timedelta(minutes=i)) for i in range(10)]
    jobs = [replace(j, status=JobStatus.PAUSED, next_run_at=None) if i % 2 else j for i, j in enumerate(jobs)]
    store.jobs.put_new_many(jobs)
    # When she pages through them two at a time
    seen: list[list[str]] = []
    cursor = None
    while True:
        page = store.jobs.page(OWNER, JobStatus.PAUSED, 2, cursor)
        seen.append([j.id for j in page.items])
        cursor = page.last_key
        if cursor is None:
            break
    # Then each comes once, newest first, in full pages
    assert seen == [["job_9", "job_7"], ["job_5", "job_3"], ["job_1"]]
    # and a cursor of that path is refused by another (bad input, not a server error)
    first = store.jobs.page(OWNER, JobStatus.PAUSED, 2, None).last_key
    with pytest.raises(InvalidRequest):
        store.jobs.page(OWNER, JobStatus.ACTIVE, 2, first)
    with pytest.raises(InvalidRequest):
        store.jobs.page(OWNER, None, 2, first, outcome=ExecutionStatus.FAILED)


def test_a_job_moves_between_lists_as_its_status_outcome_name_and_tags_change(store: Store) -> None:
    # Given an active job named a-1, tagged team:billing
    stored = job(name="a-1", tags={"team": "billing"})
    store.jobs.put_new(stored)

    def listed(**filters: Any) -> list[str]:
        status = filters.pop("status", None)
        return [j.id for j in store.jobs.page(OWNER, status, 10, None, **filters).items]

    assert listed(status=JobStatus.ACTIVE) == [stored.id] and listed(status=JobStatus.PAUSED) == []
    # When it is paused, renamed and retagged
    changed = store.jobs.update(
        stored,
        {"status": JobStatus.PAUSED, "name": "b-1", "tags": {"team": "ops"}},
        allowed_statuses=[JobStatus.ACTIVE],
    )
    # Then it is listed under its new status, name and tag only
    assert listed(status=JobStatus.PAUSED) == [stored.id] and listed(status=JobStatus.ACTIVE) == []
    assert listed(name_prefix="b-") == [stored.id] and listed(name_prefix="a-") == []
    assert listed(tag=("team", "ops")) == [stored.id] and listed(tag=("team", "billing")) == []
    assert listed(tag=("team", None)) == [stored.id]
    # and when its run fails, then succeeds, it moves from the failed to the succeeded
    store.jobs.record_outcome(_finished(changed, ExecutionStatus.FAILED))
    assert listed(outcome=ExecutionStatus.FAILED) == [stored.id]
    later = replace(_finished(changed, ExecutionStatus.SUCCEEDED), finished_at=NOW + timedelta(minutes=1))
    store.jobs.record_outcome(later)
    assert listed(outcome=ExecutionStatus.FAILED) == []
    assert listed(outcome=ExecutionStatus.SUCCEEDED) == [stored.id]


def test_a_stale_tag_entry_is_skipped_and_deleted_by_the_list_that_reads_it(store: Store) -> None:
    # Given a job tagged team:billing whose entry outlived a retag (a crash before its deletion), and
    # an entry of a job that is gone (long expired) and of one that is being created (just now)
    stored = job(tags={"team": "billing"})
    store.jobs.put_new(stored)
    store.table.batch_write(
        [
            put(keys.tag_key(OWNER, "team", "ops", stored.created_at, stored.id)),
            put(keys.tag_key(OWNER, "team", "ops", NOW - timedelta(days=40), "job_gone")),
            put(keys.tag_key(OWNER, "team", "ops", NOW, "job_coming")),
        ]
    )
    # When alice lists team:ops
    page = store.jobs.page(OWNER, None, 10, None, tag=("team", "ops"), now=NOW + timedelta(minutes=1))
    # Then no job is listed, and the entries of the retagged and the gone job are deleted, not the
    # one of the job being created
    assert page.items == [] and page.last_key is None
    left = store.table.query_all(
        KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": keys.tag_pk(OWNER, "team")}
    )
    assert sorted(keys.job_id_of_tag_sk(str(item["sk"])) for item in left) == ["job_1", "job_coming"]
    # and an entry an idempotent retry's draft wrote for the same id (created later; its put lost)
    # does not list the job twice, and is deleted
    store.table.batch_write(
        [put(keys.tag_key(OWNER, "team", "billing", stored.created_at + timedelta(seconds=3), stored.id))]
    )
    once = store.jobs.page(OWNER, None, 10, None, tag=("team", "billing"), now=NOW + timedelta(minutes=1))
    assert [j.id for j in once.items] == [stored.id]
    billing = store.table.query_all(
        KeyConditionExpression="pk = :pk AND begins_with(sk, :v)",
        ExpressionAttributeValues={
            ":pk": keys.tag_pk(OWNER, "team"),
            ":v": keys.tag_value_prefix("billing"),
        },
    )
    assert [str(item["sk"]) for item in billing] == [
        keys.tag_key(OWNER, "team", "billing", NOW, stored.id)["sk"]
    ]


def test_another_owners_job_is_read_as_missing_with_the_same_calls(store: Store) -> None:
    # Given bob's job with a finished run
    bobs = job(owner="bob")
    store.jobs.put_new(bobs)
    store.executions.put_new_many([_finished(bobs, ExecutionStatus.SUCCEEDED)])
    # When alice reads it, and an id that does not exist
    with reading(store) as theirs:
        assert store.jobs.get_with_last_execution(bobs.id, OWNER) is None
        assert store.jobs.get(bobs.id, OWNER) is None
    with reading(store) as missing:
        assert store.jobs.get_with_last_execution("job_none", OWNER) is None
        assert store.jobs.get("job_none", OWNER) is None
    # Then both make the same calls, which return no item for either (DynamoDB reads bob's and
    # drops them: the calls' filter)
    assert theirs.calls == missing.calls == ["Query", "Query"]
    assert theirs.returned == missing.returned == 0
    # while bob reads it with the same calls
    assert store.jobs.get(bobs.id, "bob") == store.jobs.get(bobs.id) == bobs
    # while bob reads it
    shown = store.jobs.get_with_last_execution(bobs.id, "bob")
    assert shown is not None and shown.last_execution is not None


def test_a_table_still_gaining_its_list_indexes_lists_by_filtering_the_owners_jobs() -> None:
    # Given a table deployed without the list indexes yet (an upgrade adds one a deployment), on moto
    definition = replace(
        resources.TABLE,
        indexes=tuple(i for i in resources.TABLE.indexes if i not in resources.LIST_INDEXES),
    )
    session = boto3.session.Session(region_name="us-east-1")
    with mock_aws():
        client = session.client("dynamodb")
        client.create_table(**definition.create_table_kwargs("gaining"))
        gaining = Store(session.resource("dynamodb"), client, "gaining", shard_count=4, retention_days=30)
        jobs = [job(f"job_{i}", created=NOW + timedelta(minutes=i), name=f"n-{i}") for i in range(4)]
        jobs[1] = replace(jobs[1], status=JobStatus.PAUSED, next_run_at=None)
        gaining.jobs.put_new_many(jobs)
        gaining.jobs.record_outcome(_finished(jobs[2], ExecutionStatus.FAILED))
        # When its jobs are listed by status, outcome and name
        by_status = gaining.jobs.page(OWNER, JobStatus.PAUSED, 10, None)
        by_outcome = gaining.jobs.page(OWNER, None, 10, None, outcome=ExecutionStatus.FAILED)
        by_name = gaining.jobs.page(OWNER, None, 10, None, name_prefix="n-3")
    # Then each lists its jobs, read from the owner's and filtered, as before the indexes
    assert [j.id for j in by_status.items] == ["job_1"]
    assert [j.id for j in by_outcome.items] == ["job_2"]
    assert [j.id for j in by_name.items] == ["job_3"]


def test_a_local_table_kept_from_an_earlier_version_gains_the_list_indexes() -> None:
    # Given a local stack's table kept from before by_flag (with an earlier version's list indexes),
    # holding a paused job stored without a flag
    earlier = replace(
        resources.TABLE,
        indexes=(
            *(i for i in resources.TABLE.indexes if i is not resources.BY_FLAG_INDEX),
            *resources.RETIRED_LIST_INDEXES,
        ),
    )
    session = boto3.session.Session(region_name="us-east-1")
    with mock_aws():
        client = session.client("dynamodb")
        client.create_table(**earlier.create_table_kwargs("punctual"))
        kept = Store(session.resource("dynamodb"), client, "punctual", shard_count=4, retention_days=30)
        paused_job = job(status=JobStatus.PAUSED, next_run_at=None)
        kept.jobs.put_new(paused_job)
        kept.table.resource.update_item(Key=keys.job_key(paused_job.id), UpdateExpression="REMOVE flag")
        # When the local stack starts on it
        provision.create_all(client, session.client("sqs"))
        # Then the table has this version's indexes (the earlier ones dropped), and the job is listed
        # from by_flag
        described = client.describe_table(TableName="punctual")["Table"]
        with reading(kept) as reads:
            paused = kept.jobs.page(OWNER, JobStatus.PAUSED, 10, None)
    assert sorted(i["IndexName"] for i in described["GlobalSecondaryIndexes"]) == sorted(
        i.name for i in resources.TABLE.indexes
    )
    assert [j.id for j in paused.items] == [paused_job.id] and reads.entries == 1
