"""The scanner, the dispatcher and the worker on the in-memory DynamoDB and SQS, with a fixed clock:
no moto, no network, each step driven by hand (as Dynein's PartitionWorkerTest drives its worker)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual import wiring
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import JobStatus, TaskSpec, marker_for
from punctual.domain.schedules import AtSchedule, RateSchedule
from punctual.domain.work import WorkItem, read_body
from punctual.execution.receipts import Disposition
from punctual.jobs.creation import NewJob
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual_testing.fake_aws import FakeAws, Latency, SentMessage, clients
from tests.store import builders

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OWNER = "alice"
NOOP = TaskSpec(type="noop")


@dataclass
class Stack:
    fake: FakeAws
    punctual: wiring.Punctual
    clock: ManualClock
    queue_url: str
    dynamodb: Any

    def sent(self) -> list[SentMessage]:
        return self.fake.sqs.queues[self.queue_url]

    def items(self) -> list[WorkItem]:
        return [item for m in self.sent() for item in read_body(m.body).items]

    def at_in(self, seconds: float) -> AtSchedule:
        return AtSchedule(type="at", at=self.clock.now() + timedelta(seconds=seconds))


@pytest.fixture
def stack() -> Stack:
    fake = FakeAws(Latency(dynamodb=0.0, sqs=0.0), partition_limits=False)
    table = resources.TABLE
    indexes = {index.name: (index.partition_keys, index.sort_keys) for index in table.indexes}
    fake.dynamodb.create_table(table.name, table.partition_key, table.sort_key, indexes=indexes)
    queue_url = fake.sqs.create_queue(resources.WORK_QUEUE.name)
    settings = Settings(
        table_name=table.name,
        queue_url=queue_url,
        dlq_url=fake.sqs.create_queue(resources.DEAD_LETTER_QUEUE.name),
        shard_count=4,
    )
    dynamodb, dynamodb_client, sqs = clients(settings)
    for client in (dynamodb.meta.client, dynamodb_client, sqs):
        fake.attach(client)
    clock = ManualClock(NOW)
    punctual = wiring.build(
        settings, clock=clock, dynamodb=dynamodb, dynamodb_client=dynamodb_client, sqs=sqs
    )
    return Stack(fake, punctual, clock, queue_url, dynamodb)


def test_a_tick_sends_what_is_due_within_its_lookahead_once(stack: Stack) -> None:
    # Given a job due in ten minutes (past the hand-off window: its minute's bucket)
    job, _ = stack.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=stack.at_in(600)))
    scanner = stack.punctual.scanner()
    # When a tick runs now / Then nothing is sent yet
    assert scanner.tick().enqueued == 0 and stack.sent() == []
    # When ticks run 9 minutes on, then a minute later
    stack.clock.advance(540)
    first = scanner.tick()
    stack.clock.advance(60)
    second = scanner.tick()
    # Then the first sent it, held until its instant, and the second sent nothing more
    assert (first.enqueued, second.enqueued) == (1, 0)
    [item] = stack.items()
    assert (item.job_id, item.scheduled_at) == (job.id, job.next_run_at)
    assert stack.sent()[0].delay_seconds == 60
    # and every shard's position is past it
    positions = stack.punctual.store.scanner.positions(range(4)).values()
    assert all(p is not None and p.instant() > item.scheduled_at for p in positions)


def test_a_tick_that_another_holds_the_shards_of_does_nothing(stack: Stack) -> None:
    store = stack.punctual.store
    assert store.scanner.acquire_leases([0, 1, 2, 3], "other", NOW, NOW + timedelta(seconds=58))
    report = stack.punctual.scanner().tick()
    assert report.busy and not report.complete


def test_dispatching_a_recurring_jobs_marker_files_the_next_and_moves_the_job_on(stack: Stack) -> None:
    # Given a job every minute
    job, _ = stack.punctual.service.create(
        OWNER, NewJob(task=NOOP, schedule=RateSchedule(type="rate", every_seconds=60))
    )
    assert job.next_run_at is not None
    due = marker_for(job.id, job.next_run_at, job.schedule_version)
    # When its marker is dispatched
    result = stack.punctual.dispatcher.dispatch([due])
    # Then its execution is sent, the next occurrence filed a minute later, and the job moved on
    assert result.enqueued == [due]
    [following] = result.filed
    assert following.scheduled_at == job.next_run_at + timedelta(minutes=1)
    moved = stack.punctual.store.jobs.get(job.id)
    assert moved is not None and moved.next_run_at == following.scheduled_at
    # and dispatching it again sends it again (the worker drops the duplicate) but files nothing new
    again = stack.punctual.dispatcher.dispatch([due])
    assert again.enqueued == [due] and stack.punctual.store.jobs.get(job.id) == moved


def test_a_marker_of_a_cancelled_job_is_dropped(stack: Stack) -> None:
    job, _ = stack.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=stack.at_in(600)))
    assert job.next_run_at is not None
    stack.punctual.service.cancel(OWNER, job.id)
    result = stack.punctual.dispatcher.dispatch([marker_for(job.id, job.next_run_at, job.schedule_version)])
    assert result.enqueued == [] and len(result.skipped) == 1 and stack.sent() == []


def test_the_worker_runs_a_due_execution_once_and_completes_its_job(stack: Stack) -> None:
    # Given a job due now, handed off by its request (its message sent at once)
    job, _ = stack.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=stack.at_in(0)))
    [item] = stack.items()
    worker = stack.punctual.worker
    # When the worker handles its message, and the same message again
    assert worker.handle(item, "receipt-1") is Disposition.DONE
    assert worker.handle(item, "receipt-2") is Disposition.DONE
    # Then it ran once, and the job is completed with it as its outcome
    execution = stack.punctual.store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
    assert execution is not None and (execution.status, execution.attempts) == (ExecutionStatus.SUCCEEDED, 1)
    completed = stack.punctual.store.jobs.get(job.id)
    assert completed is not None and completed.status is JobStatus.COMPLETED
    assert completed.outcome is not None and completed.outcome.execution_id == execution.id


def test_an_execution_read_as_stored_and_gone_before_its_claim_still_runs_once(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job due now whose execution is stored QUEUED before its message (as the local stack does)
    job, _ = stack.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=stack.at_in(0)))
    [item] = stack.items()
    store = stack.punctual.store
    queued = builders.execution(job, at=item.scheduled_at)
    assert queued.id == item.execution_id
    store.executions.put_new_many([queued])
    # whose item goes away between the worker's read and its claim
    claims: list[bool] = []
    claim = store.executions.claim

    def vanishing(execution: Execution, **kwargs: Any) -> Execution:
        claims.append(kwargs.get("stored", False))
        if len(claims) == 1:
            stack.dynamodb.Table(resources.TABLE.name).delete_item(Key=store.executions.key(execution))
        return claim(execution, **kwargs)

    monkeypatch.setattr(store.executions, "claim", vanishing)
    # When the worker handles its message
    assert stack.punctual.worker.handle(item, "receipt-1") is Disposition.DONE
    # Then its first claim was the short one of a stored copy, and, refused, the one that stores it
    assert claims == [True, False]
    execution = store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
    assert execution is not None and (execution.status, execution.attempts) == (ExecutionStatus.SUCCEEDED, 1)


def test_the_worker_skips_an_execution_of_a_paused_job(stack: Stack) -> None:
    job, _ = stack.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=stack.at_in(0)))
    [item] = stack.items()
    stack.punctual.service.pause(OWNER, job.id)
    assert stack.punctual.worker.handle(item, "receipt") is Disposition.DONE
    execution = stack.punctual.store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
    assert execution is not None and execution.status is ExecutionStatus.CANCELLED
