"""The execution repository's contract (store/executions.py, execution_reads.py, deliveries.py):
every status change only from where the lifecycle allows it, on moto and on the fake."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.errors import LostRace
from punctual.domain.executions import Delivery, DeliveryStatus, ExecutionStatus
from punctual.domain.models import JobStatus
from punctual.domain.policies import NotifyEvent
from punctual.store import Store, keys
from tests.store.builders import NOW, execution, job, marker

LEASE = NOW + timedelta(minutes=2)


def test_a_claim_stores_an_absent_execution_and_holds_it_until_its_lease_runs_out(store: Store) -> None:
    # Given an execution not stored yet (the scanner stores none)
    queued = execution(job())
    # When a worker claims it
    running = store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=12)
    # Then it is stored RUNNING, one attempt counted, its fixed fields with it
    assert (running.status, running.attempts, running.lateness_ms) == (ExecutionStatus.RUNNING, 1, 12)
    assert store.executions.get(queued.job_id, queued.scheduled_at, queued.id) == running
    # and another claim fails while the lease runs, and takes it over once it has run out
    with pytest.raises(LostRace):
        store.executions.claim(queued, now=NOW + timedelta(minutes=1), lease_until=LEASE, lateness_ms=0)
    later = LEASE + timedelta(seconds=1)
    taken = store.executions.claim(
        running, now=later, lease_until=later + timedelta(minutes=2), lateness_ms=0
    )
    assert taken.attempts == 2 and taken.lateness_ms == 12  # (its first start stands)


def test_many_executions_read_together_report_the_absent_and_the_unreadable_apart(store: Store) -> None:
    # Given three executions stored, one with a status this version does not know (a newer one's)
    stored = [execution(job(f"job_{n}")) for n in (1, 2, 3)]
    store.executions.put_new_many(stored)
    newer = stored[2]
    store.table.resource.update_item(
        Key=keys.execution_key(newer.job_id, newer.scheduled_at, newer.id),
        UpdateExpression="SET #st = :s",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":s": "HIBERNATING"},
    )
    absent = execution(job("job_4"))
    refs = [(e.job_id, e.scheduled_at, e.id) for e in [*stored, absent]]
    # When they are read together, with one never stored
    found, unreadable = store.executions.get_many(refs)
    # Then each readable one is found by its key as one read alone finds it, the unreadable one is
    # reported with why, and the absent one is in neither
    assert found == {ref: store.executions.get(*ref) for ref in refs[:2]}
    assert list(unreadable) == [refs[2]] and "HIBERNATING" in unreadable[refs[2]]
    assert refs[3] not in found


def test_a_claim_of_a_copy_read_from_the_store_only_changes_the_item_while_it_is_there(store: Store) -> None:
    # Given an execution stored QUEUED (a manual run, or the local stack's), and one never stored
    queued = execution(job())
    store.executions.put_new_many([queued])
    absent = execution(job("job_2"))
    # When each is claimed as read from the store
    running = store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=5, stored=True)
    # Then the stored one is RUNNING as after any claim, its fixed fields kept
    assert (running.status, running.attempts, running.lateness_ms) == (ExecutionStatus.RUNNING, 1, 5)
    assert store.executions.get(queued.job_id, queued.scheduled_at, queued.id) == running
    assert (running.owner, running.schedule_version, running.created_at) == (
        queued.owner,
        queued.schedule_version,
        queued.created_at,
    )
    # and the claim of the absent one is refused, storing nothing
    with pytest.raises(LostRace):
        store.executions.claim(absent, now=NOW, lease_until=LEASE, lateness_ms=0, stored=True)
    assert store.executions.get(absent.job_id, absent.scheduled_at, absent.id) is None
    # as is a second claim while the first one's lease runs
    with pytest.raises(LostRace):
        store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=0, stored=True)


def test_an_attempt_ends_only_for_the_worker_that_holds_it(store: Store) -> None:
    # Given a claimed execution, and a copy of it from before its claim
    queued = execution(job())
    running = store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=0)
    # When a worker holding an older attempt finishes it / Then it lost the race
    with pytest.raises(LostRace):
        store.executions.finish_attempt(
            replace(running, attempts=0),
            status=ExecutionStatus.SUCCEEDED,
            finished_at=NOW,
            error=None,
            result=1,
        )
    # When the holder retries it later, then finishes the next attempt
    retrying = store.executions.retry_later(
        running, next_attempt_at=NOW + timedelta(seconds=30), error="boom"
    )
    assert (retrying.status, retrying.error) == (ExecutionStatus.RETRYING, "boom")
    again = store.executions.claim(retrying, now=NOW, lease_until=LEASE, lateness_ms=0)
    done = store.executions.finish_attempt(
        again, status=ExecutionStatus.SUCCEEDED, finished_at=NOW, error=None, result={"ok": True}
    )
    # Then it is SUCCEEDED with its result, and no longer claimable
    assert (done.status, done.attempts, done.result) == (ExecutionStatus.SUCCEEDED, 2, {"ok": True})
    with pytest.raises(LostRace):
        store.executions.claim(done, now=LEASE + timedelta(hours=1), lease_until=LEASE, lateness_ms=0)


def test_a_claim_given_back_leaves_the_execution_waiting_its_attempt_not_counted(store: Store) -> None:
    running = store.executions.claim(execution(job()), now=NOW, lease_until=LEASE, lateness_ms=0)
    store.executions.release_claim(running)
    back = store.executions.get(running.job_id, running.scheduled_at, running.id)
    assert back is not None and (back.status, back.attempts, back.lease_until) == (
        ExecutionStatus.QUEUED,
        0,
        None,
    )
    with pytest.raises(LostRace):
        store.executions.release_claim(running)


def test_a_skip_from_a_stale_copy_never_cancels_another_workers_run(store: Store) -> None:
    # Given an execution read QUEUED, then claimed by another worker
    queued = execution(job())
    running = store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=0)
    # When the stale copy is skipped / Then it lost the race, and the run goes on
    with pytest.raises(LostRace):
        store.executions.skip(queued, finished_at=NOW, reason="cancelled")
    # and the holder's copy skips it
    store.executions.skip(running, finished_at=NOW, reason="job cancelled")
    skipped = store.executions.get(queued.job_id, queued.scheduled_at, queued.id)
    assert skipped is not None and (skipped.status, skipped.error) == (
        ExecutionStatus.CANCELLED,
        "job cancelled",
    )


def test_an_unstored_execution_is_skipped_by_storing_it_skipped(store: Store) -> None:
    queued = execution(job())
    store.executions.skip(queued, finished_at=NOW, reason="too late", status=ExecutionStatus.SKIPPED)
    skipped = store.executions.get(queued.job_id, queued.scheduled_at, queued.id)
    assert skipped is not None and skipped.status is ExecutionStatus.SKIPPED


def test_giving_up_ends_anything_not_finished_and_a_redrive_queues_it_again(store: Store) -> None:
    # Given a run under way
    running = store.executions.claim(execution(job()), now=NOW, lease_until=LEASE, lateness_ms=0)
    # When the dead-letter handler gives up on it
    failed = store.executions.give_up(
        running, status=ExecutionStatus.FAILED, finished_at=NOW, error="gave up", dead_lettered=True
    )
    # Then it is FAILED and marked, and giving up again is refused
    assert (failed.status, failed.dead_lettered) == (ExecutionStatus.FAILED, True)
    with pytest.raises(LostRace):
        store.executions.give_up(failed, status=ExecutionStatus.FAILED, finished_at=NOW, error="again")
    # and a redrive queues it (twice: a redrive interrupted), but not a plain failure
    queued = store.executions.requeue_dead_lettered(failed, NOW)
    assert (queued.status, queued.dead_lettered, queued.attempts) == (ExecutionStatus.QUEUED, False, 1)
    store.executions.requeue_dead_lettered(queued, NOW)
    plain = store.executions.claim(queued, now=NOW, lease_until=LEASE, lateness_ms=0)
    plain = store.executions.finish_attempt(
        plain, status=ExecutionStatus.FAILED, finished_at=NOW, error="x", result=None
    )
    with pytest.raises(LostRace):
        store.executions.requeue_dead_lettered(plain, NOW)


def test_a_paused_jobs_run_is_cancelled_only_while_the_job_is_still_paused(store: Store) -> None:
    # Given a paused job whose run is under way
    paused = job(status=JobStatus.PAUSED, next_run_at=None)
    store.jobs.put_new(paused)
    running = store.executions.claim(execution(paused, at=NOW), now=NOW, lease_until=LEASE, lateness_ms=0)
    # When the job is resumed with that run first / Then the worker's cancel for the pause fails
    resumed = store.jobs.resume_with_run(paused, running, NOW)
    assert resumed.status is JobStatus.ACTIVE and resumed.next_run_at == running.scheduled_at
    with pytest.raises(LostRace):
        store.executions.skip_while_paused(running, finished_at=NOW, reason="paused")
    current = store.executions.get(running.job_id, running.scheduled_at, running.id)
    assert current is not None and current.status is ExecutionStatus.RUNNING
    # and a resume whose run has ended meanwhile is refused
    store.executions.finish_attempt(
        running, status=ExecutionStatus.SUCCEEDED, finished_at=NOW, error=None, result=None
    )
    with pytest.raises(LostRace):
        store.jobs.resume_with_run(replace(resumed, status=JobStatus.PAUSED), running, NOW)


def test_a_paused_jobs_run_is_cancelled_in_one_transaction_with_the_pause(store: Store) -> None:
    paused = job(status=JobStatus.PAUSED, next_run_at=None)
    store.jobs.put_new(paused)
    running = store.executions.claim(execution(paused, at=NOW), now=NOW, lease_until=LEASE, lateness_ms=0)
    store.executions.skip_while_paused(running, finished_at=NOW, reason="paused")
    current = store.executions.get(running.job_id, running.scheduled_at, running.id)
    assert current is not None and current.status is ExecutionStatus.CANCELLED


def test_a_jobs_executions_page_newest_first_by_range_and_status(store: Store) -> None:
    # Given five executions a minute apart, every other one FAILED
    owner = job()
    runs = [
        execution(
            owner,
            at=NOW + timedelta(minutes=i),
            status=ExecutionStatus.FAILED if i % 2 else ExecutionStatus.SUCCEEDED,
        )
        for i in range(5)
    ]
    store.executions.put_new_many(runs)
    # When they are listed / Then newest first, a page at a time
    first = store.executions.page(owner.id, 2, None)
    assert [e.scheduled_at.minute for e in first.items] == [4, 3]
    assert [e.scheduled_at.minute for e in store.executions.page(owner.id, 10, first.last_key).items] == [
        2,
        1,
        0,
    ]
    # and by a range of instants, and by status
    ranged = store.executions.page(
        owner.id, 10, None, since=NOW + timedelta(minutes=1), until=NOW + timedelta(minutes=3)
    )
    assert [e.scheduled_at.minute for e in ranged.items] == [2, 1]
    failed = store.executions.page(owner.id, 10, None, status=ExecutionStatus.FAILED)
    assert [e.scheduled_at.minute for e in failed.items] == [3, 1]
    # and those before one, and the statuses of several
    assert [e.scheduled_at.minute for e in store.executions.before(runs[3])] == [2, 1, 0]
    statuses = store.executions.statuses([marker(owner, NOW), marker(owner, NOW + timedelta(hours=1))])
    assert statuses == {runs[0].id: ExecutionStatus.SUCCEEDED}


def test_the_scheduled_run_of_a_version_is_found_past_extra_runs(store: Store) -> None:
    owner = job()
    scheduled = execution(owner, at=NOW)
    extra = execution(owner, at=NOW + timedelta(minutes=1), manual=True, id=owner.id + ".extra")
    store.executions.put_new_many([scheduled, extra])
    assert store.executions.scheduled_run(owner.id, owner.schedule_version) == scheduled
    assert store.executions.scheduled_run(owner.id, 99) is None


def test_a_delivery_is_recorded_on_its_execution_never_over_a_later_attempt(store: Store) -> None:
    # Given a stored execution
    run = execution(job(), status=ExecutionStatus.SUCCEEDED, finished_at=NOW)
    store.executions.put_new_many([run])

    def delivery(attempts: int, status: DeliveryStatus) -> Delivery:
        return Delivery(
            event=NotifyEvent.SUCCEEDED,
            rule=0,
            to="https://example.com/h",
            status=status,
            attempts=attempts,
            at=NOW,
        )

    # When its delivery is recorded at attempt 2, then attempt 1's record arrives late
    store.deliveries.record(run.job_id, run.scheduled_at, run.id, delivery(2, DeliveryStatus.DELIVERED))
    store.deliveries.record(run.job_id, run.scheduled_at, run.id, delivery(1, DeliveryStatus.RETRYING))
    # Then attempt 2's stands; an execution that is not stored takes none
    current = store.executions.get(run.job_id, run.scheduled_at, run.id)
    assert current is not None and [d.attempts for d in current.deliveries] == [2]
    store.deliveries.record(run.job_id, run.scheduled_at, "job_1.gone", delivery(1, DeliveryStatus.FAILED))
    assert store.executions.get(run.job_id, run.scheduled_at, "job_1.gone") is None


def test_a_run_claimed_ahead_of_its_instant_is_listed_as_queued_until_it(store: Store) -> None:
    # Given a run claimed 2 s ahead of its instant (no start recorded), one started, one queued
    owner = job()
    at = NOW + timedelta(minutes=1)
    ahead, started, queued = (
        execution(owner, at=at, id=owner.id + suffix) for suffix in (".ahead", ".started", ".queued")
    )
    store.executions.put_new_many([queued])
    store.executions.claim(
        ahead, now=at - timedelta(seconds=2), lease_until=at + timedelta(minutes=2), lateness_ms=None
    )
    store.executions.claim(
        started, now=at - timedelta(seconds=2), lease_until=at + timedelta(minutes=2), lateness_ms=0
    )

    def listed(now: Any, status: ExecutionStatus | None = None) -> dict[str, tuple[str, int]]:
        page = store.executions.page(owner.id, 10, None, status=status, now=now)
        return {e.id.removeprefix(owner.id): (e.status.value, e.attempts) for e in page.items}

    # When they are listed before the instant / Then the one claimed ahead is QUEUED, no attempt
    # counted, and filtered as such
    before = at - timedelta(seconds=1)
    assert listed(before) == {
        ".ahead": ("QUEUED", 0),
        ".started": ("RUNNING", 1),
        ".queued": ("QUEUED", 0),
    }
    assert set(listed(before, ExecutionStatus.QUEUED)) == {".ahead", ".queued"}
    assert set(listed(before, ExecutionStatus.RUNNING)) == {".started"}
    # and from its instant on it is RUNNING
    assert listed(at)[".ahead"] == ("RUNNING", 1)
    assert set(listed(at, ExecutionStatus.RUNNING)) == {".ahead", ".started"}
    assert set(listed(at, ExecutionStatus.QUEUED)) == {".queued"}
    # (as stored, without a time to see them at)
    assert listed(None)[".ahead"] == ("RUNNING", 1)


def test_a_leased_run_is_stored_at_its_end_only_if_no_claim_or_end_is_there(store: Store) -> None:
    # Given a first attempt run under its pack's lease: RUNNING in memory, nothing of it stored
    queued = execution(job())
    began = queued.scheduled_at + timedelta(milliseconds=40)
    ended = replace(
        queued,
        status=ExecutionStatus.SUCCEEDED,
        attempts=1,
        started_at=began,
        lateness_ms=40,
        finished_at=began + timedelta(seconds=1),
        result={"ok": True},
    )
    # When its end is written
    stored = store.executions.put_end(ended)
    # Then it is stored ended in that one write, with its start, lateness and attempt
    assert store.executions.get(queued.job_id, queued.scheduled_at, queued.id) == stored
    assert (stored.status, stored.attempts, stored.started_at, stored.lateness_ms, stored.result) == (
        ExecutionStatus.SUCCEEDED,
        1,
        began,
        40,
        {"ok": True},
    )
    # and a second end (a worker that took the pack over and ran it again) does not overwrite it
    with pytest.raises(LostRace):
        store.executions.put_end(replace(ended, status=ExecutionStatus.FAILED, error="again"))
    # nor one over a run another worker claimed on its own
    other = execution(job("job_other"))
    store.executions.claim(other, now=NOW, lease_until=LEASE, lateness_ms=0)
    with pytest.raises(LostRace):
        store.executions.put_end(replace(ended, id=other.id, job_id=other.job_id, owner=other.owner))
    # while a retry to come is stored RETRYING, its next attempt's time with it
    retrying = execution(job("job_retry"))
    waiting = store.executions.put_end(
        replace(
            retrying,
            status=ExecutionStatus.RETRYING,
            attempts=1,
            started_at=began,
            lateness_ms=40,
            next_attempt_at=began + timedelta(minutes=1),
            error="503",
        )
    )
    assert (waiting.status, waiting.next_attempt_at, waiting.finished_at) == (
        ExecutionStatus.RETRYING,
        began + timedelta(minutes=1),
        None,
    )
