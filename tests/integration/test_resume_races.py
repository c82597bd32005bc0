"""Races between a resume and the worker running the job's run (found in review): whichever lands
first, the job runs once and ends COMPLETED, or its run goes on."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from punctual.domain.executions import ExecutionStatus
from punctual.domain.work import WorkItem
from punctual.execution import pausing
from punctual.platform.timefmt import to_epoch_ms
from tests.integration.paused_runs import (
    at,
    during_the_run,
    expire_executions,
    first_attempt_fails,
    pause,
    resume,
)
from tests.world import World

# Lone executions going the claim path (a guarded one, a retry, a run by hand take it too).
pytestmark = pytest.mark.usefixtures("claim_path")


def the_run(world: World, job_id: str) -> Any:
    [execution] = world.store.executions.page(job_id, 10, None).items
    return execution


def worker_ends_the_run(world: World, job_id: str) -> None:
    """What the worker does when the task returns: record the outcome, then complete the job."""
    execution = the_run(world, job_id)
    finished = world.store.executions.finish_attempt(
        execution, status=ExecutionStatus.SUCCEEDED, finished_at=world.clock.now(), error=None, result=None
    )
    job = world.store.jobs.get(job_id)
    pausing.complete_job(world.store, job, finished)


def test_a_run_that_ends_just_before_resume_reads_it_is_not_repeated(world: World) -> None:
    # Given a job paused while its task runs, its run ending as the resume request reads the job
    job = world.create({"type": "now"})
    real = world.store.executions.scheduled_run

    def ends_first(job_id: str, version: int) -> Any:
        worker_ends_the_run(world, job_id)
        return real(job_id, version)

    def pause_then_resume() -> None:
        pause(world, job["id"])
        with mock.patch.object(world.store.executions, "scheduled_run", side_effect=ends_first):
            assert resume(world, job["id"])["status"] == "COMPLETED"

    with during_the_run(world, pause_then_resume) as ran:
        world.run_for(120)
    # Then it ran once
    assert ran == [job["id"]]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_run_that_ends_while_resume_decides_completes_the_job(world: World) -> None:
    # Given a resume that saw the run under way, the run ending before the resume writes
    job = world.create({"type": "now"})
    real = world.store.executions.scheduled_run

    def ends_after(job_id: str, version: int) -> Any:
        seen = real(job_id, version)
        worker_ends_the_run(world, job_id)
        return seen

    def pause_then_resume() -> None:
        pause(world, job["id"])
        with mock.patch.object(world.store.executions, "scheduled_run", side_effect=ends_after):
            resume(world, job["id"])

    with during_the_run(world, pause_then_resume) as ran:
        world.run_for(120)
    # Then the job is not left ACTIVE with nothing to come: it completed, having run once
    assert ran == [job["id"]]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_retry_skipped_while_resume_decides_leaves_the_job_to_run(world: World) -> None:
    # Given a job whose first attempt failed (a retry due in a minute), paused; a worker cancels the
    # retry for the pause just as a resume, having seen the run under way, is about to write
    job = world.create({"type": "now"}, retry={"max_attempts": 3, "backoff_seconds": 60})
    with first_attempt_fails(world) as attempts:
        world.run_for(5)
        assert the_run(world, job["id"]).status is ExecutionStatus.RETRYING
        pause(world, job["id"])
        real = world.store.executions.scheduled_run

        def skipped_after(job_id: str, version: int) -> Any:
            seen = real(job_id, version)
            world.clock.advance(60)
            world.drain()  # the retry's message: skipped, the job being paused
            assert the_run(world, job_id).status is ExecutionStatus.CANCELLED
            return seen

        with mock.patch.object(world.store.executions, "scheduled_run", side_effect=skipped_after):
            resumed = resume(world, job["id"])
        world.run_for(120)
    # Then the resume saw the run cut short: the job ("now") runs anew and completes
    assert resumed["status"] == "ACTIVE"
    assert attempts == [1, 1]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_resume_landing_as_the_worker_skips_the_retry_lets_the_run_go_on(world: World) -> None:
    # Given a paused job whose run waits for its retry, the job resumed just as a worker, having read
    # the job paused, is about to cancel the retry
    job = world.create({"type": "now"}, retry={"max_attempts": 3, "backoff_seconds": 60})
    real_skip = world.store.executions.skip_while_paused

    def resumed_first(*args: Any, **kwargs: Any) -> None:
        resume(world, job["id"])
        real_skip(*args, **kwargs)

    with first_attempt_fails(world) as attempts:
        world.run_for(5)
        pause(world, job["id"])
        with mock.patch.object(world.store.executions, "skip_while_paused", side_effect=resumed_first):
            world.run_for(120)
    # Then the run goes on: its retry runs, and completes the job
    assert attempts == [1, 2]
    [execution] = world.executions(job["id"])
    assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 2)
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_duplicate_message_does_not_cancel_a_run_under_way_of_a_paused_job(world: World) -> None:
    # Given a job paused while its task runs, and a duplicate of its message arriving meanwhile
    job = world.create({"type": "now"})
    outcomes = []

    def pause_then_duplicate() -> None:
        pause(world, job["id"])
        running = the_run(world, job["id"])
        item = WorkItem(
            job_id=running.job_id,
            execution_id=running.id,
            scheduled_at=running.scheduled_at,
            schedule_version=running.schedule_version,
        )
        with mock.patch.object(world.punctual.queue, "change_visibility"):
            outcomes.append(world.punctual.worker.handle(item, "duplicate"))
        assert the_run(world, job["id"]).status is ExecutionStatus.RUNNING

    with during_the_run(world, pause_then_duplicate):
        world.run_for(10)
    # Then the duplicate waits for the run's lease; the run's end is noted, and resuming completes
    assert [o.value for o in outcomes] == ["later"]
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    expire_executions(job["id"])
    assert resume(world, job["id"])["status"] == "COMPLETED"


def message_of(execution: Any) -> WorkItem:
    return WorkItem(
        job_id=execution.job_id,
        execution_id=execution.id,
        scheduled_at=execution.scheduled_at,
        schedule_version=execution.schedule_version,
    )


def test_a_duplicate_that_read_the_execution_before_the_claim_does_not_cancel_the_run(world: World) -> None:
    # Given a duplicate message whose worker read the execution (not stored yet) before the first
    # worker claimed it, and read the job only once the job was paused mid-run
    job = world.create({"type": "now"})
    seen: list[Any] = []

    def pause_then_stale_duplicate() -> None:
        pause(world, job["id"])
        running = the_run(world, job["id"])
        with (
            mock.patch.object(world.store.executions, "get_many", return_value=({}, {})),
            mock.patch.object(world.punctual.queue, "change_visibility"),
        ):
            seen.append(world.punctual.worker.handle(message_of(running), "duplicate").value)
        seen.append(the_run(world, job["id"]).status)

    with during_the_run(world, pause_then_stale_duplicate) as ran:
        world.run_for(10)
    # Then its stale copy cancels nothing: the run ends as it ran, and resuming does not repeat it
    assert seen == ["later", ExecutionStatus.RUNNING]
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    with during_the_run(world, lambda: None) as ran_again:
        assert resume(world, job["id"])["status"] == "COMPLETED"
        world.run_for(60)
    assert ran == [job["id"]] and ran_again == []


def test_a_run_whose_paused_job_is_cancelled_as_it_is_skipped_ends_at_once(world: World) -> None:
    # Given a worker that claimed a run and then read its job paused, the job cancelled just as the
    # worker cancels the run for the pause (its transaction fails: the job is no longer paused)
    job = world.create({"type": "now"}, timeout_seconds=300)
    real_claim = world.store.executions.claim
    real_skip = world.store.executions.skip_while_paused

    def paused_then_claimed(*args: Any, **kwargs: Any) -> Any:
        pause(world, job["id"])
        return real_claim(*args, **kwargs)

    def cancelled_first(*args: Any, **kwargs: Any) -> None:
        assert world.api("DELETE", f"/jobs/{job['id']}").status == 200
        real_skip(*args, **kwargs)

    with (
        mock.patch.object(world.store.executions, "claim", side_effect=paused_then_claimed),
        mock.patch.object(world.store.executions, "skip_while_paused", side_effect=cancelled_first),
        during_the_run(world, lambda: None) as ran,
    ):
        world.run_for(5)
    # Then the worker, holding the run, looks again and skips it for the cancel at once: it does not
    # sit RUNNING until its own lease runs out
    assert ran == []
    assert the_run(world, job["id"]).status is ExecutionStatus.CANCELLED
    assert world.job(job["id"])["status"] == "CANCELLED"


def test_a_write_that_meets_a_transaction_under_way_is_retried(world: World) -> None:
    # Given the worker's outcome write meeting a resume's transaction on the execution (DynamoDB
    # refuses it: TransactionConflictException)
    job = world.create({"type": "now"})
    table = world.store.table.resource
    real_update = table.update_item
    refused: list[str] = []

    def update_item(**kwargs: Any) -> Any:
        if kwargs.get("ExpressionAttributeValues", {}).get(":final") == "SUCCEEDED" and not refused:
            refused.append("once")
            error = {"Error": {"Code": "TransactionConflictException", "Message": "transaction under way"}}
            raise ClientError(error, "UpdateItem")
        return real_update(**kwargs)

    with (
        mock.patch.object(table, "update_item", side_effect=update_item),
        during_the_run(world, lambda: None) as ran,
    ):
        world.run_for(400, step=5)
    # Then the write is tried again: the task ran once, and its outcome stands
    assert refused and ran == [job["id"]]
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]


def test_a_resume_meeting_a_new_schedule_decides_again(world: World) -> None:
    # Given a paused job whose run is under way, given a new instant just as a resume, having seen the
    # run under way, is about to give the job back the run's version
    job = world.create({"type": "now"})
    later = at(world, 600)
    real = world.store.executions.scheduled_run
    resumed: list[dict[str, Any]] = []

    def rescheduled_after(job_id: str, version: int) -> Any:
        seen = real(job_id, version)
        if not resumed:
            assert world.api("PATCH", f"/jobs/{job_id}", {"schedule": later}).status == 200
        return seen

    def pause_then_resume() -> None:
        pause(world, job["id"])
        with mock.patch.object(world.store.executions, "scheduled_run", side_effect=rescheduled_after):
            resumed.append(resume(world, job["id"]))

    with during_the_run(world, pause_then_resume):
        world.run_for(10)
    # Then the new schedule stands: the resume, deciding again, keeps the new instant to come
    assert resumed[0]["status"] == "ACTIVE"
    assert resumed[0]["next_run_at"] == later["at"]
    assert world.job(job["id"])["status"] == "ACTIVE"


def transaction_conflict() -> ClientError:
    """DynamoDB cancelling one of two transactions on the same items at once."""
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
            "CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"}],
        },
        "TransactWriteItems",
    )


def test_a_worker_whose_skip_meets_the_resume_transaction_runs_the_resumed_run(world: World) -> None:
    # Given a worker that claimed a run and read its job paused, its skip meeting the resume's
    # transaction (which lands: the job is ACTIVE at the run's version)
    job = world.create({"type": "now"}, timeout_seconds=300)
    real_claim = world.store.executions.claim
    client = world.store.table.resource.meta.client
    real_transact = client.transact_write_items
    conflicts: list[str] = []

    def paused_then_claimed(*args: Any, **kwargs: Any) -> Any:
        if not conflicts:
            pause(world, job["id"])
        return real_claim(*args, **kwargs)

    def transact(**kwargs: Any) -> Any:
        if "Update" in kwargs["TransactItems"][0] and not conflicts:  # the worker's skip (a resume's
            conflicts.append("skip")  # starts with its check)
            assert resume(world, job["id"])["status"] == "ACTIVE"
            raise transaction_conflict()
        return real_transact(**kwargs)

    with (
        mock.patch.object(world.store.executions, "claim", side_effect=paused_then_claimed),
        mock.patch.object(client, "transact_write_items", side_effect=transact),
        during_the_run(world, lambda: None) as ran,
    ):
        world.run_for(30)
    # Then the worker looks again and runs it at once, in its one attempt
    assert conflicts and ran == [job["id"]]
    execution = the_run(world, job["id"])
    assert (execution.status.value, execution.attempts) == ("SUCCEEDED", 1)
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_an_undecided_worker_gives_its_claim_back(world: World) -> None:
    # Given a worker that claimed a run, read its job paused, and cannot cancel the run (every try
    # refused as a conflict)
    job = world.create({"type": "now"}, timeout_seconds=300)
    real_claim = world.store.executions.claim

    def paused_then_claimed(*args: Any, **kwargs: Any) -> Any:
        pause(world, job["id"])
        return real_claim(*args, **kwargs)

    with (
        mock.patch.object(world.store.executions, "claim", side_effect=paused_then_claimed),
        mock.patch.object(
            world.store.table.resource.meta.client, "transact_write_items", side_effect=transaction_conflict()
        ),
        during_the_run(world, lambda: None) as ran,
    ):
        world.run_for(2)
        # Then it gives the claim back: waiting again, the attempt not counted, no lease held
        execution = the_run(world, job["id"])
        assert (execution.status, execution.attempts, execution.lease_until) == (
            ExecutionStatus.QUEUED,
            0,
            None,
        )
        assert execution.started_at is None
    # and once its transactions go through, the message, looked at again, skips it for the pause
    world.run_for(30)
    assert ran == []
    assert the_run(world, job["id"]).status is ExecutionStatus.CANCELLED


def test_a_running_execution_without_a_lease_can_be_claimed(world: World) -> None:
    # Given an execution left RUNNING without a lease (none is written so; an item damaged by hand,
    # say), its job active, and its message delivered
    job = world.create(at(world, 600))
    world.run_for(700, step=10)
    execution = the_run(world, job["id"])
    table = world.store.table.resource
    key = {"pk": f"JOB#{job['id']}", "sk": f"EXEC#{to_epoch_ms(execution.scheduled_at):013d}#{execution.id}"}
    table.update_item(
        Key=key,
        UpdateExpression="SET #st = :running REMOVE lease_until, finished_at",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":running": "RUNNING"},
    )
    table.update_item(
        Key={"pk": f"JOB#{job['id']}", "sk": "JOB"},
        UpdateExpression="SET #st = :active REMOVE expires_at",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":active": "ACTIVE"},
    )
    world.punctual.queue.send([(message_of(execution), 0)])
    # When a worker takes the message / Then it claims the execution and runs it to its end
    with during_the_run(world, lambda: None) as ran:
        world.run_for(10)
    assert ran == [job["id"]]
    assert the_run(world, job["id"]).status is ExecutionStatus.SUCCEEDED
