"""How early before its instant a message waits in the worker, on the in-memory DynamoDB and SQS with a
fixed clock: only a pack taken under one lease waits as early as a crowded instant's lead sends it;
a lone message goes back to the queue, its invocation not billed for the wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from punctual import wiring
from punctual.domain.executions import ExecutionStatus, execution_id_for
from punctual.domain.models import TaskSpec
from punctual.domain.schedules import AtSchedule
from punctual.domain.work import Pack, WorkItem
from punctual.execution.config import MAX_EARLY_WAIT
from punctual.execution.packs import PACK_LEASE_MIN
from punctual.execution.receipts import Disposition
from punctual.jobs.creation import NewJob
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual_testing.fake_aws import FakeAws, Latency, clients

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
AT = NOW + timedelta(minutes=10)
EARLY = 10.0


class Recorded:
    """What the worker did with the time before the instant: visibility set, seconds slept."""

    def __init__(self) -> None:
        self.visibility: list[tuple[str, float]] = []
        self.slept: list[float] = []


@pytest.fixture
def built() -> tuple[wiring.Punctual, ManualClock, Recorded]:
    fake = FakeAws(Latency(dynamodb=0.0, sqs=0.0), partition_limits=False)
    table = resources.TABLE
    indexes: dict[str, tuple[str | tuple[str, ...], str | tuple[str, ...]]] = {
        index.name: (index.partition_keys, index.sort_keys) for index in table.indexes
    }
    fake.dynamodb.create_table(table.name, table.partition_key, table.sort_key, indexes=indexes)
    # (as deployed: a lead of up to 15 s for a crowded instant, no head start for other messages)
    settings = Settings(
        table_name=table.name,
        queue_url=fake.sqs.create_queue(resources.WORK_QUEUE.name),
        dlq_url=fake.sqs.create_queue(resources.DEAD_LETTER_QUEUE.name),
        shard_count=4,
        lead_max_seconds=15,
        early_visibility_seconds=0,
    )
    dynamodb, dynamodb_client, sqs = clients(settings)
    for client in (dynamodb.meta.client, dynamodb_client, sqs):
        fake.attach(client)
    clock = ManualClock(NOW)
    punctual = wiring.build(
        settings, clock=clock, dynamodb=dynamodb, dynamodb_client=dynamodb_client, sqs=sqs
    )
    recorded = Recorded()

    def change_visibility(receipt_handle: str, seconds: float) -> None:
        recorded.visibility.append((receipt_handle, seconds))

    punctual.packs._queue.change_visibility = change_visibility  # type: ignore[method-assign]
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        recorded.slept.append(seconds)
        real_sleep(seconds)

    clock.sleep = sleep  # type: ignore[method-assign]
    return punctual, clock, recorded


def items_due(punctual: wiring.Punctual, count: int) -> list[WorkItem]:
    """One-time jobs due at AT, as their work message names them."""
    made = []
    for _ in range(count):
        job, _ = punctual.service.create(
            "alice", NewJob(task=TaskSpec(type="noop"), schedule=AtSchedule(type="at", at=AT))
        )
        made.append(WorkItem(job.id, execution_id_for(job.id, AT, 1), AT, 1))
    return made


def test_a_lone_message_early_goes_back_while_a_leased_pack_as_early_is_held(
    built: tuple[wiring.Punctual, ManualClock, Recorded],
) -> None:
    punctual, clock, recorded = built
    assert MAX_EARLY_WAIT.total_seconds() < EARLY
    [lone] = items_due(punctual, 1)
    members = items_due(punctual, PACK_LEASE_MIN)
    # Given a lone message sent guarded (a retry's), received 10 s before its instant
    clock.set(AT - timedelta(seconds=EARLY))
    # When the worker takes it
    answer = punctual.packs.handle(Pack(AT, (lone,), guarded=True), "lone")
    # Then it goes back to the queue until its instant, nothing waited for and nothing stored
    assert answer is Disposition.LATER
    assert recorded.visibility == [("lone", EARLY)] and recorded.slept == []
    assert punctual.store.executions.get(lone.job_id, AT, lone.execution_id) is None
    # Given a pack of a crowded instant received as early, sent so by its lead
    recorded.visibility.clear()
    # When the worker takes it
    answer = punctual.packs.handle(Pack(AT, tuple(members)), "pack")
    # Then it is held in the worker until its instant, and every member starts there, none before
    assert answer is Disposition.DONE
    assert recorded.visibility == [] and sum(recorded.slept) == pytest.approx(EARLY)
    for item in members:
        execution = punctual.store.executions.get(item.job_id, AT, item.execution_id)
        assert execution is not None and execution.status is ExecutionStatus.SUCCEEDED
        assert execution.started_at is not None and execution.started_at >= AT


def test_a_retry_waits_only_the_lone_allowance_in_any_deployment(
    built: tuple[wiring.Punctual, ManualClock, Recorded],
) -> None:
    punctual, _, _ = built
    config = punctual.worker._config
    # A deployment's lead widens what a leased pack may wait, never what a lone message or a retry does
    assert config.lone_early_wait == MAX_EARLY_WAIT
    assert config.max_early_wait == MAX_EARLY_WAIT + timedelta(seconds=15)
