"""The job repository's contract (store/jobs.py, store/job_views.py), on moto and on the fake."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from punctual.errors import LostRace
from punctual.models import ExecutionStatus, JobStatus
from punctual.store import Store
from punctual.store.lifecycle import IllegalTransition
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
