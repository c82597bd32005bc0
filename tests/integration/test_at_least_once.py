"""Crashes, duplicates, throttling and redelivery: every execution still ends with one final record."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.domain.executions import Execution, ExecutionStatus, execution_id_for
from punctual.domain.work import WorkItem
from punctual.execution.run_records import unstored_execution
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from tests.faults import Crash, once
from tests.receiver import Receiver, receiver
from tests.world import World

# Lone executions going the claim path (a guarded one, a retry, a run by hand take it too).
pytestmark = pytest.mark.usefixtures("claim_path")


def http_job(world: World, hook: Receiver, seconds_ahead: float) -> dict[str, Any]:
    return world.create(
        {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=seconds_ahead))},
        task={"type": "http", "params": {"url": hook.url}},
    )


def only_final_record(world: World, job_id: str) -> dict[str, Any]:
    [execution] = world.executions(job_id)
    assert execution["status"] == "SUCCEEDED"
    return execution


def test_scanner_crash_after_sending_before_recording_its_position(world: World) -> None:
    with receiver() as hook:
        # Given a job the scanner will enqueue, and a scanner that dies after sending, before recording
        # how far it read (its position)
        world.tick()
        job = http_job(world, hook, 240)
        world.clock.advance(200)
        once(world.store.scanner, "save_positions", Crash("after send"))
        with pytest.raises(Crash):
            world.tick()
        # When the next tick runs (and sends the message again)
        world.run_for(120)
        # Then the task ran once: the duplicate message found the execution finished
        execution = only_final_record(world, job["id"])
        assert execution["attempts"] == 1
        assert hook.by_execution() == {execution["id"]: 1}


def test_dispatch_crash_between_recording_and_sending(world: World) -> None:
    with receiver() as hook:
        world.tick()
        job = http_job(world, hook, 240)
        world.clock.advance(200)
        once(world.punctual.queue, "send_packs", Crash("before send"))
        with pytest.raises(Crash):
            world.tick()
        world.run_for(120)
        execution = only_final_record(world, job["id"])
        assert hook.by_execution() == {execution["id"]: 1}


def test_worker_crash_after_the_task_ran_before_the_result_was_written(world: World) -> None:
    with receiver() as hook:
        # Given a worker that dies after the webhook answered, before recording SUCCEEDED
        job = http_job(world, hook, 5)
        once(world.store.executions, "finish_attempt", Crash("after task"))
        # When the message comes back after its visibility timeout
        world.run_for(500, step=5)
        # Then the task ran again (at least once), with the same execution id, and one final record
        execution = only_final_record(world, job["id"])
        assert execution["attempts"] == 2
        assert hook.by_execution() == {execution["id"]: 2}


def test_a_worker_dying_before_completing_the_job_is_made_good_on_redelivery(world: World) -> None:
    # Given a worker that dies after finishing the execution, before completing the job
    job = world.create({"type": "now"})
    real = world.store.jobs.complete

    def dies_once(*args: Any, **kwargs: Any) -> Any:
        world.store.jobs.complete = real
        raise RuntimeError("worker died")

    world.store.jobs.complete = dies_once
    # When the message comes back after its visibility timeout
    world.run_for(420, step=10)
    # Then the duplicate completes the job without running the task again
    [execution] = world.executions(job["id"])
    assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_lost_delete_does_not_run_the_task_again(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    with receiver() as hook:
        # Given an acknowledgement (DeleteMessageBatch) that is lost
        job = http_job(world, hook, 5)
        once(world.sqs, "delete_message_batch", Crash("delete lost"), monkeypatch)
        # When the message is redelivered after its visibility timeout
        world.run_for(500, step=5)
        # Then the worker sees the execution finished and does not run it again
        execution = only_final_record(world, job["id"])
        assert execution["attempts"] == 1
        assert hook.by_execution() == {execution["id"]: 1}


@pytest.mark.parametrize(
    ("repository", "operation"),
    [("executions", "claim"), ("jobs", "get_many"), ("executions", "finish_attempt")],
)
def test_throttled_writes_are_retried(world: World, repository: str, operation: str) -> None:
    with receiver() as hook:
        job = http_job(world, hook, 5)
        target = getattr(world.store, repository)
        calls = once(target, operation, RetryableStoreError("ProvisionedThroughputExceeded"))
        world.run_for(60)
        execution = only_final_record(world, job["id"])
        assert calls["n"] >= 2
        # a throttle never costs an extra run: before the task, the message comes back in seconds;
        # after it, the worker retries the write
        assert hook.by_execution() == {execution["id"]: 1}


def test_an_unexpected_error_brings_the_message_back_in_seconds_not_at_its_visibility_timeout(
    world: World,
) -> None:
    with receiver() as hook:
        # Given a worker whose claim fails once in a way no rule covers (a dropped connection, say)
        job = http_job(world, hook, 5)
        calls = once(world.store.executions, "claim", ConnectionResetError("connection reset by peer"))
        # When it runs for well under the work queue's visibility timeout (390 s)
        world.run_for(30)
        # Then the message came back and the execution ran, once
        execution = only_final_record(world, job["id"])
        assert calls["n"] == 2
        assert hook.by_execution() == {execution["id"]: 1}


def test_a_throttled_job_completion_is_retried_and_completes_the_job(world: World) -> None:
    # Given a one-time job whose completion (the write of its outcome) is throttled once
    job = world.create({"type": "now"})
    once(world.store.jobs, "complete", RetryableStoreError("ThrottlingException"))
    # When it runs
    world.run_for(5)
    # Then the job is COMPLETED all the same, its run SUCCEEDED
    current = world.job(job["id"])
    assert current["status"] == "COMPLETED"
    assert current["last_execution"]["status"] == "SUCCEEDED"


def test_duplicate_messages_run_the_task_once(world: World) -> None:
    with receiver() as hook:
        # Given the same message sent three times (SQS's at-least-once delivery)
        job = http_job(world, hook, 5)
        queue = world.punctual.settings.queue_url
        world.clock.advance(5)
        [message] = world.sqs.receive_message(QueueUrl=queue)["Messages"]
        world.sqs.change_message_visibility(
            QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
        for _ in range(2):
            world.sqs.send_message(QueueUrl=queue, MessageBody=message["Body"])
        world.run_for(30)
        execution = only_final_record(world, job["id"])
        assert execution["attempts"] == 1
        assert hook.by_execution() == {execution["id"]: 1}


CrashPoint = Callable[[World], None]


def test_an_early_message_waits_for_its_instant(world: World) -> None:
    # Given a message that becomes visible 30 s before its execution's instant
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=40))})
    queue = world.punctual.settings.queue_url
    world.clock.advance(10)
    world.sqs.send_message(QueueUrl=queue, MessageBody=_body_of_first_message(world))
    # When workers poll right away
    world.drain()
    # Then nothing has started yet (an execution is stored when it starts)
    assert world.executions(job["id"]) == []
    world.run_for(60)
    execution = only_final_record(world, job["id"])
    assert execution["started_at"] >= execution["scheduled_at"]


def _body_of_first_message(world: World) -> str:
    queue = world.punctual.settings.queue_url
    world.clock.advance(30)  # let the delayed original become visible to peek at it
    [message] = world.sqs.receive_message(QueueUrl=queue)["Messages"]
    world.sqs.change_message_visibility(
        QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=60
    )
    world.clock.advance(-30)
    return str(message["Body"])


def test_a_message_that_exhausts_its_receives_is_dead_lettered_and_fails(world: World) -> None:
    # Given a worker that dies on this execution at every delivery
    job = world.create({"type": "now"})
    real_claim = world.store.executions.claim

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise Crash("worker died")

    world.store.executions.claim = dies
    # When it has been received as often as the redrive policy allows (each time after the worker's
    # backoff for an unexpected error: 5 s doubling, up to the visibility timeout; about 2 h 10 min)
    world.run_for(30 * 300, step=30)
    world.store.executions.claim = real_claim
    world.run_for(10)
    # Then SQS moved it to the dead-letter queue, whose handler failed the execution
    [execution] = world.executions(job["id"])
    assert execution["status"] == "FAILED"
    assert "dead-letter" in execution["error"]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_long_throttle_backs_off_instead_of_using_up_the_receives(world: World) -> None:
    # Given a store that throttles this worker for 20 minutes
    job = world.create({"type": "now"})
    real_claim = world.store.executions.claim

    def throttled(*args: Any, **kwargs: Any) -> Any:
        raise RetryableStoreError("ThrottlingException")

    world.store.executions.claim = throttled
    world.run_for(20 * 60, step=5)
    world.store.executions.claim = real_claim
    # When it ends
    world.run_for(20 * 60, step=5)
    # Then the execution still ran: it was never dead-lettered
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1


def test_two_workers_claiming_an_unstored_execution_at_once_store_it_once(world: World) -> None:
    # Given an execution the scanner enqueued (stored by nobody yet), read as absent by two workers
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    stored_job = world.store.jobs.get(job["id"])
    assert stored_job is not None and stored_job.next_run_at is not None
    item = WorkItem(
        job["id"],
        execution_id_for(job["id"], stored_job.next_run_at, stored_job.schedule_version),
        stored_job.next_run_at,
        stored_job.schedule_version,
    )
    now = world.clock.now()
    first, second = (unstored_execution(item, stored_job, now, world.store.retention) for _ in range(2))
    assert first is not None and second is not None
    lease = now + timedelta(minutes=5)
    # When both claim it
    running = world.store.executions.claim(first, now=now, lease_until=lease, lateness_ms=0)
    # Then the first stores it as RUNNING, attempt 1, and the second loses the race
    assert (running.status.value, running.attempts, running.owner) == ("RUNNING", 1, "alice")
    with pytest.raises(LostRace):
        world.store.executions.claim(second, now=now, lease_until=lease, lateness_ms=0)
    [execution] = world.executions(job["id"])
    assert (execution["status"], execution["attempts"]) == ("RUNNING", 1)


def test_a_message_from_before_the_unstored_executions_is_dropped_if_its_execution_is_gone(
    world: World,
) -> None:
    # Given a message without a schedule version (sent by an older version, which stored every
    # execution first) whose execution no longer exists
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    old = WorkItem(job["id"], f"{job['id']}.gone.1", world.clock.now())
    world.sqs.send_message(QueueUrl=world.punctual.settings.queue_url, MessageBody=old.to_body())
    # When a worker receives it
    assert world.work.drain() == 1
    # Then it is dropped: nothing is stored, and it does not come back
    assert world.executions(job["id"]) == []
    world.clock.advance(600)
    assert world.work.drain() == 0


def test_a_message_older_than_the_retention_does_not_bring_back_an_expired_execution(world: World) -> None:
    with receiver() as hook:
        # Given an execution that ran, whose record the table's expiry has since removed, and a late
        # duplicate of its message
        job = http_job(world, hook, 5)
        world.run_for(30)
        [execution] = world.executions(job["id"])
        stored = world.store.jobs.get(job["id"])
        assert stored is not None
        key = {"pk": {"S": f"JOB#{job['id']}"}, "sk": {"S": ""}}
        items = world.dynamodb_client.query(
            TableName=world.punctual.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            ExpressionAttributeValues={":pk": key["pk"], ":e": {"S": "EXEC#"}},
        )["Items"]
        for item in items:
            world.dynamodb_client.delete_item(
                TableName=world.punctual.settings.table_name, Key={"pk": item["pk"], "sk": item["sk"]}
            )
        late = WorkItem(
            job["id"],
            execution["id"],
            parse_rfc3339(execution["scheduled_at"]),
            stored.schedule_version,
        )
        world.clock.advance(world.store.retention.total_seconds())
        world.sqs.send_message(QueueUrl=world.punctual.settings.queue_url, MessageBody=late.to_body())
        # When a worker receives it
        world.drain()
        # Then it is dropped: the task did not run again
        assert len(hook.deliveries) == 1
        assert world.executions(job["id"]) == []


def test_an_old_message_of_an_execution_stored_as_queued_runs_it(world: World) -> None:
    # Given an execution stored as QUEUED and its message without a schedule version (the previous
    # version's scanner)
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    stored = world.store.jobs.get(job["id"])
    assert stored is not None and stored.next_run_at is not None
    execution = Execution(
        id=execution_id_for(job["id"], stored.next_run_at, stored.schedule_version),
        job_id=job["id"],
        owner="alice",
        scheduled_at=stored.next_run_at,
        status=ExecutionStatus.QUEUED,
        schedule_version=stored.schedule_version,
        created_at=world.clock.now(),
    )
    world.store.executions.put_new_many([execution])
    old = WorkItem(job["id"], execution.id, stored.next_run_at)
    world.clock.advance(241)
    world.sqs.send_message(QueueUrl=world.punctual.settings.queue_url, MessageBody=old.to_body())
    # When a worker receives it
    world.drain()
    # Then it runs, as the execution it names
    [ran] = world.executions(job["id"])
    assert (ran["id"], ran["status"], ran["attempts"]) == (execution.id, "SUCCEEDED", 1)
