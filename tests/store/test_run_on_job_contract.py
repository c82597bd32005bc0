"""A one-time job's run stored on its job's item, with the job's completion (store/jobs.py
`complete_with_run`, ExecutionRepository.put_end), and read back there by every read of executions
that users or the pause protocol see, on moto and on the fake."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.errors import LostRace
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job, JobStatus, ran_on_job
from punctual.domain.policies import NotifyEvent, NotifyRule
from punctual.domain.schedules import CronSchedule
from punctual.store import Store
from punctual.store.codec.jobs import job_item
from punctual.store.codec.runs import (
    RUN,
    RUN_ERROR_MAX_CHARS,
    embedded_execution,
    item_bytes,
    run_fits,
    run_map,
)
from punctual.store.jobs import LISTED_RUN_SPAN, JobRepository
from tests.store.builders import NOW, execution, job


def ended(of: Job, status: ExecutionStatus = ExecutionStatus.SUCCEEDED, **changes: Any) -> Execution:
    """Its scheduled run, ended under its pack's lease (nothing of it stored)."""
    at = of.next_run_at or NOW
    base = execution(
        of,
        status=status,
        attempts=1,
        started_at=at + timedelta(milliseconds=20),
        finished_at=at + timedelta(milliseconds=70),
        lateness_ms=20,
        error="no" if status is ExecutionStatus.FAILED else None,
        result={"ok": True} if status is ExecutionStatus.SUCCEEDED else None,
        job_item_bytes=JobRepository.completed_bytes(of),
    )
    return replace(base, **changes)


def test_a_run_that_fits_completes_its_job_with_it_in_one_write(store: Store) -> None:
    # Given a one-time job, and its run ended under its pack's lease
    stored = job()
    store.jobs.put_new(stored)
    run = ended(stored, ExecutionStatus.FAILED)
    # When its end is stored
    written = store.executions.put_end(run)
    # Then its job is COMPLETED with it, its outcome recorded, and no item of its own is stored
    assert written.job_failures == 1
    completed = store.jobs.get(stored.id)
    assert completed is not None and completed.status is JobStatus.COMPLETED
    assert completed.outcome is not None and completed.outcome.execution_id == run.id
    on_job = replace(run, job_item_bytes=None)
    assert completed.last_execution == on_job and ran_on_job(completed, run.id)
    assert store.executions.get_many([(run.job_id, run.scheduled_at, run.id)]) == ({}, {})
    # and every read of the job's executions finds it there
    assert store.executions.get(run.job_id, run.scheduled_at, run.id) == on_job
    assert store.executions.scheduled_run(stored.id, stored.schedule_version) == on_job
    assert store.executions.page(stored.id, 10, None).items == [on_job]
    assert store.executions.page(stored.id, 10, None, status=ExecutionStatus.FAILED).items == [on_job]
    assert store.executions.page(stored.id, 10, None, status=ExecutionStatus.SUCCEEDED).items == []
    shown = store.jobs.get_with_last_execution(stored.id)
    assert shown is not None and shown.last_execution is not None
    assert (shown.last_execution.id, shown.last_execution.result) == (run.id, None)
    [listed] = store.jobs.with_outcome_executions([completed])
    assert listed.last_execution is not None and listed.last_execution.id == run.id


@contextmanager
def sent_again_once_applied(store: Store, naming: str = "") -> Iterator[list[int]]:
    """The client sends the first UpdateItem (whose request names `naming`) again after it applied, as
    botocore does when the answer to an attempt that applied is lost to a timeout or a 500: its retry
    meets its own write."""
    events = store.clients[0].meta.events
    retried: list[int] = []

    def again(response: Any = None, attempts: int = 1, request_dict: Any = None, **_: Any) -> int | None:
        if retried or attempts > 1 or response is None or response[0].status_code != 200:
            return None
        body = (request_dict or {}).get("body", b"")
        if naming not in (body.decode() if isinstance(body, bytes) else str(body)):
            return None
        retried.append(attempts)
        return 0  # (retry at once)

    events.register_first("needs-retry.dynamodb.UpdateItem", again)
    try:
        yield retried
    finally:
        events.unregister("needs-retry.dynamodb.UpdateItem", again)


def test_a_completing_write_retried_after_it_applied_stores_the_run_once(store: Store) -> None:
    # Given a one-time job, and its run ended under its pack's lease
    stored = job()
    store.jobs.put_new(stored)
    run = ended(stored, ExecutionStatus.FAILED)
    # When its completing write applies and the client sends it again (which then fails its condition)
    with sent_again_once_applied(store) as retried:
        written = store.executions.put_end(run)
    assert retried
    # Then its end is as stored by that write: on its job, counted once, and no item of its own
    assert written.job_failures == 1
    completed = store.jobs.get(stored.id)
    assert completed is not None and completed.status is JobStatus.COMPLETED
    assert completed.outcome is not None and completed.outcome.consecutive_failures == 1
    assert completed.last_execution == replace(run, job_item_bytes=None)
    assert store.executions.get_many([(run.job_id, run.scheduled_at, run.id)]) == ({}, {})


def test_another_end_of_a_run_its_job_carries_loses_and_stores_nothing(store: Store) -> None:
    # Given a one-time job whose run one worker ended on it
    stored = job()
    store.jobs.put_new(stored)
    first = ended(stored)
    store.executions.put_end(first)
    # When another worker, which took the pack again once its lease ran out, ends the same run
    second = ended(
        stored,
        ExecutionStatus.FAILED,
        started_at=(first.started_at or NOW) + timedelta(minutes=10),
        finished_at=(first.finished_at or NOW) + timedelta(minutes=10),
    )
    # Then it loses, as a lone run's end does to another's: the first end stands, alone
    with pytest.raises(LostRace):
        store.executions.put_end(second)
    completed = store.jobs.get(stored.id)
    assert completed is not None and completed.last_execution == replace(first, job_item_bytes=None)
    assert completed.outcome is not None and completed.outcome.status is ExecutionStatus.SUCCEEDED
    assert store.executions.get_many([(first.job_id, first.scheduled_at, first.id)]) == ({}, {})


def test_a_run_of_a_job_that_moved_on_is_stored_on_its_own_item(store: Store) -> None:
    # Given a one-time job rescheduled after its run was taken
    stored = job()
    store.jobs.put_new(stored)
    run = ended(stored)
    store.jobs.update(
        stored,
        {"schedule_version": 2, "updated_at": NOW},
        allowed_statuses=[JobStatus.ACTIVE],
        schedule_version=1,
    )
    # When its end is stored
    written = store.executions.put_end(run)
    # Then it has an item of its own, and the job is as it was (its completion is the caller's)
    assert written.job_failures is None
    assert store.executions.get(run.job_id, run.scheduled_at, run.id) == replace(
        written, job_item_bytes=None, deliveries=()
    )
    after = store.jobs.get(stored.id)
    assert after is not None and after.status is JobStatus.ACTIVE and after.last_execution is None


def test_a_run_that_does_not_fit_is_stored_on_its_own_item(store: Store) -> None:
    # Given a one-time job whose item, with its run, would be over a write unit
    stored = job()
    store.jobs.put_new(stored)
    big = ended(stored, result={"text": "x" * 900})
    long_error = ended(stored, ExecutionStatus.FAILED, error="e" * (RUN_ERROR_MAX_CHARS + 1))
    # Then neither goes on its job
    assert not run_fits(big) and not run_fits(long_error)
    assert run_fits(ended(stored))
    # and a recurring job's run, a run by hand, and a job with notification rules never do
    assert (
        JobRepository.completed_bytes(
            replace(stored, schedule=CronSchedule(type="cron", expression="* * * * *"))
        )
        is None
    )
    assert (
        JobRepository.completed_bytes(
            replace(stored, notify=(NotifyRule(on=[NotifyEvent.FAILED], to="https://example.com/h"),))
        )
        is None
    )
    assert not run_fits(ended(stored, manual=True))
    written = store.executions.put_end(big)
    assert written.job_failures is None
    assert store.executions.get_many([(big.job_id, big.scheduled_at, big.id)])[0]


def test_a_job_carries_one_run_a_revived_jobs_next_goes_on_its_own_item(store: Store) -> None:
    stored = job()
    store.jobs.put_new(stored)
    store.executions.put_end(ended(stored))
    completed = store.jobs.get(stored.id)
    assert completed is not None
    # Given the job revived with a new instant
    later = (stored.next_run_at or NOW) + timedelta(hours=1)
    revived = store.jobs.update(
        completed,
        {"status": JobStatus.ACTIVE, "next_run_at": later, "schedule_version": 2, "updated_at": NOW},
        allowed_statuses=[JobStatus.COMPLETED],
        schedule_version=1,
    )
    # Then its run is kept, and its next run is not to go on the job
    assert revived.last_execution is not None and revived.last_execution.schedule_version == 1
    assert JobRepository.completed_bytes(revived) is None
    second = ended(revived, job_item_bytes=200)
    with pytest.raises(LostRace):
        store.jobs.complete_with_run(second)


def test_a_page_of_executions_places_the_run_on_the_job_by_its_instant(store: Store) -> None:
    # Given a job whose run is on its item, with runs by hand stored before and after its instant
    stored = job()
    store.jobs.put_new(stored)
    run = ended(stored)
    store.executions.put_end(run)
    at = run.scheduled_at
    by_hand = [
        execution(
            stored, at=at + delta, id=f"{stored.id}.x{n}.r{n}", manual=True, status=ExecutionStatus.CANCELLED
        )
        for n, delta in enumerate((timedelta(minutes=-1), timedelta(minutes=1)))
    ]
    store.executions.put_new_many(by_hand)
    # When they are read a page of one at a time, and a range
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        page = store.executions.page(stored.id, 1, cursor)
        seen += [e.id for e in page.items]
        cursor = page.last_key
        if cursor is None:
            break
    # Then each comes once, newest first, the run on the job in its place
    assert seen == [by_hand[1].id, run.id, by_hand[0].id]
    assert [e.id for e in store.executions.page(stored.id, 10, None, since=at).items] == [
        by_hand[1].id,
        run.id,
    ]
    assert [e.id for e in store.executions.page(stored.id, 10, None, until=at).items] == [by_hand[0].id]


def test_the_run_on_a_job_reads_back_from_its_item() -> None:
    # Given a run as stored on a job's item
    stored = job()
    run = ended(stored, ExecutionStatus.FAILED)
    item = {**job_item(stored), RUN: run_map(run)}
    # Then it reads back as it ended, and the item's size is counted as DynamoDB does
    assert embedded_execution(item) == replace(run, job_item_bytes=None)
    assert item_bytes({"a": "xy", "n": 12345, "m": {"k": True}}) == (1 + 2) + (1 + 4) + (1 + 3 + 1 + 1 + 1)
    assert embedded_execution({**item, RUN: {"id": 1}}) is None  # (a newer version's)


def _raw(store: Store, job_id: str) -> dict[str, Any]:
    found = store.table.resource.get_item(Key={"pk": f"JOB#{job_id}", "sk": "JOB"}, ConsistentRead=True)
    return dict(found["Item"])


@pytest.mark.parametrize(
    ("status", "late", "owner_pk", "listed_in"),
    [
        (ExecutionStatus.SUCCEEDED, timedelta(0), False, "batch_1"),
        (ExecutionStatus.FAILED, timedelta(0), True, "batch_1"),
        (ExecutionStatus.SUCCEEDED, LISTED_RUN_SPAN + timedelta(hours=2), True, None),
    ],
)
def test_a_job_listed_by_its_batch_gains_an_entry_of_its_own_only_when_its_end_needs_one(
    store: Store, status: ExecutionStatus, late: timedelta, owner_pk: bool, listed_in: str | None
) -> None:
    # Given two jobs of a batch, listed by its one entry, due in five minutes and in an hour
    soon, later = job("job_a", listed_in="batch_1"), job("job_b", listed_in="batch_1")
    later = replace(later, next_run_at=NOW + timedelta(hours=1))
    store.jobs.put_new_many([soon, later])
    entry = store.table.resource.get_item(Key={"pk": "LIST#batch_1", "sk": "LIST"}, ConsistentRead=True)[
        "Item"
    ]
    # Then the entry names both, and expires after either could: an hour, the span a run may take,
    # and the history kept after it
    assert (entry["pk"], entry["owner_pk"], entry["jobs"]) == (
        "LIST#batch_1",
        "OWNER#" + soon.owner,
        "job_b,job_a",
    )
    assert int(entry["expires_at"]) == store.table.expiry(NOW + timedelta(hours=1) + LISTED_RUN_SPAN)
    assert "owner_pk" not in _raw(store, soon.id)
    assert store.jobs.get(soon.id) == soon
    # When the first one's run ends (late, or not)
    run = ended(soon, status)
    run = replace(
        run,
        started_at=run.scheduled_at + late,
        finished_at=(run.finished_at or NOW) + late,
    )
    store.executions.put_end(run)
    # Then only a failure (which by_flag lists) or an end too late for the entry gives it an owner_pk
    # (and so by_owner and by_flag entries of its own); the entry still lists a failed one, which
    # expires before it, and its own by_owner entry is passed over; one that ends too late is listed
    # on its own from now on
    assert ("owner_pk" in _raw(store, soon.id)) is owner_pk
    completed = store.jobs.get(soon.id)
    assert completed is not None and completed.listed_in == listed_in
    # and any change to the other lists it on its own
    stored_later = store.jobs.get(later.id)
    assert stored_later is not None
    store.jobs.update(
        stored_later, {"name": stored_later.id, "updated_at": NOW}, allowed_statuses=[JobStatus.ACTIVE]
    )
    assert "owner_pk" in _raw(store, later.id)
