"""A crowded instant's messages made visible ahead of it, by the lead chosen from how many executions
fall due then; a quiet instant's at it; the worker holding either until the instant, never early.

On the in-memory DynamoDB and SQS with a clock that moves only when told: no timing, no network.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual import wiring
from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import TaskSpec, marker_for
from punctual.domain.schedules import AtSchedule
from punctual.domain.work import read_body
from punctual.execution.receipts import Disposition
from punctual.jobs.creation import NewJob
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.scheduling import scanner as scanner_module
from punctual.scheduling import tick as tick_module
from punctual.scheduling.prescaling import LeadPolicy, instant_packs, lead_seconds
from punctual_testing.fake_aws import FakeAws, Latency, SentMessage, clients

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OWNER = "alice"
NOOP = TaskSpec(type="noop")


@dataclass
class Stack:
    fake: FakeAws
    punctual: wiring.Punctual
    clock: ManualClock
    queue_url: str

    def sent(self) -> list[SentMessage]:
        return self.fake.sqs.queues[self.queue_url]

    def create_at(self, at: datetime, count: int) -> None:
        for _ in range(count):
            self.punctual.service.create(OWNER, NewJob(task=NOOP, schedule=AtSchedule(type="at", at=at)))


def stack_with(**settings: Any) -> Stack:
    fake = FakeAws(Latency(dynamodb=0.0, sqs=0.0), partition_limits=False)
    table = resources.TABLE
    indexes: dict[str, tuple[str | tuple[str, ...], str | tuple[str, ...]]] = {
        index.name: (index.partition_keys, index.sort_keys) for index in table.indexes
    }
    fake.dynamodb.create_table(table.name, table.partition_key, table.sort_key, indexes=indexes)
    queue_url = fake.sqs.create_queue(resources.WORK_QUEUE.name)
    configured = Settings(
        table_name=table.name,
        queue_url=queue_url,
        dlq_url=fake.sqs.create_queue(resources.DEAD_LETTER_QUEUE.name),
        **settings,
    )
    dynamodb, dynamodb_client, sqs = clients(configured)
    for client in (dynamodb.meta.client, dynamodb_client, sqs):
        fake.attach(client)
    clock = ManualClock(NOW)
    punctual = wiring.build(
        configured, clock=clock, dynamodb=dynamodb, dynamodb_client=dynamodb_client, sqs=sqs
    )
    return Stack(fake, punctual, clock, queue_url)


# A provisioned mapping with 2 pollers ready (20 invokes, 20 receives a second), packs of 2 on 4
# shards: an instant of more than 4 packs (8 executions) is crowded.
SMALL = {"shard_count": 4, "pack_size": 2, "worker_ready_pollers": 2, "burst_worker_concurrency": 20}


# ------------------------------------------------------------------------------ the arithmetic

DEFAULT_PRESCALED = LeadPolicy.for_deployment(
    bound_seconds=15, pack_size=500, shards=64, ready_pollers=200, max_invokes=2100
)


def test_a_million_at_one_instant_is_visible_as_long_ahead_as_lambda_takes_to_start_its_packs() -> None:
    # Given a million due at one instant on 64 shards, packs of 500: 2,048 packs
    assert instant_packs(1_000_000, 64, 500) == 2048
    # Then Lambda's environments bind: 1,000 at once, 1,048 more at 100 a second (10.5 s), and a
    # pack's cold start and reads (1.3 s) on top: 12 s
    assert lead_seconds(1_000_000, DEFAULT_PRESCALED) == 12


def test_a_quiet_instant_gets_no_lead() -> None:
    # Up to a pack a shard (64 x 500) the instant is quiet: visible at it
    assert lead_seconds(1, DEFAULT_PRESCALED) == 0
    assert lead_seconds(32_000, DEFAULT_PRESCALED) == 0
    # one more and each shard has two packs: ahead by a pack's start, rounded up
    assert lead_seconds(32_001, DEFAULT_PRESCALED) == 2


def test_the_lead_never_passes_its_bound_and_is_off_at_zero() -> None:
    # Four million: the mapping's 2,100 invokes are what can be held; they alone take 11 s to start
    assert lead_seconds(4_000_000, DEFAULT_PRESCALED) == 13
    bounded = LeadPolicy.for_deployment(
        bound_seconds=5, pack_size=500, shards=64, ready_pollers=200, max_invokes=2100
    )
    assert lead_seconds(1_000_000, bounded) == 5
    off = LeadPolicy.for_deployment(
        bound_seconds=0, pack_size=500, shards=64, ready_pollers=200, max_invokes=2100
    )
    assert lead_seconds(1_000_000, off) == 0


def test_a_standard_mapping_is_led_by_its_300_invokes_a_minute() -> None:
    # Given standard mode, MaximumConcurrency 20: 5 at once, then 5 a second, to 20 held at once
    standard = LeadPolicy.for_deployment(
        bound_seconds=15, pack_size=500, shards=64, ready_pollers=0, max_invokes=20
    )
    # Then 15 more invokes take 3 s, and a pack's start 1.3 s: 5 s
    assert lead_seconds(1_000_000, standard) == 5


# ------------------------------------------------------------------------------ the dispatcher


def test_a_crowded_instant_is_sent_visible_ahead_and_a_quiet_one_at_its_instant() -> None:
    stack = stack_with(**SMALL)
    # Given 20 executions due at one instant ten minutes on (more packs than shards), and one 20 s after it
    crowded, quiet = NOW + timedelta(minutes=10), NOW + timedelta(minutes=10, seconds=20)
    stack.create_at(crowded, 20)
    stack.create_at(quiet, 1)
    # When the tick a minute before runs
    stack.clock.advance(540)
    report = stack.punctual.scanner().tick()
    # Then the crowded instant's packs are visible 2 s before it (12 packs reckoned: 20 receives a
    # second take them in 0.6 s, and a pack's start 1.3 s), the quiet one's at its instant
    assert report.enqueued == 21
    delays = {read_body(m.body).scheduled_at: m.delay_seconds for m in stack.sent()}
    assert delays == {crowded: 60 - 2, quiet: 80}
    assert len([m for m in stack.sent() if read_body(m.body).scheduled_at == crowded]) > 4


def test_every_message_is_visible_at_least_early_visibility_seconds_ahead() -> None:
    stack = stack_with(**SMALL, early_visibility_seconds=2)
    dispatcher = stack.punctual.dispatcher
    assert dispatcher.ahead(1) == timedelta(seconds=2)  # quiet: the floor
    # crowded: the 20 invokes it can hold taken by 20 receives a second, and a pack's start
    assert dispatcher.ahead(10_000) == timedelta(seconds=3)


def test_a_scanner_of_some_shards_counts_the_instant_on_all_of_them() -> None:
    stack = stack_with(**SMALL)
    at = NOW + timedelta(minutes=5)
    markers = [marker_for(f"job-{n}", at, 1) for n in range(5)]
    # Given a scanner of 2 of the 4 shards that read 5 markers due at `at`
    scanner = stack.punctual.scanner([0, 1])
    counts = Counter(m.scheduled_at for m in markers)
    # Then it reckons 10 due then on the deployment: crowded, over a pack of 2 a shard
    assert scanner.due_at(counts) == {at: 10}
    # and a scanner of all 4 reckons the 5 it read: quiet, so not passed on
    assert stack.punctual.scanner().due_at(counts) == {}
    # unless it could not read them all: then the instant is as crowded as any
    assert stack.punctual.scanner().due_at(counts, cut={at}) == {at: scanner_module.UNCOUNTED}


def test_a_crowded_instant_read_from_the_soon_partitions_a_page_at_a_time_gets_its_whole_lead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = stack_with(**SMALL)
    # Given 20 executions due at one instant created 150 s ahead: filed unclaimed under the soon
    # partitions for the next tick, which reads them 2 a shard at a time (a million at one instant
    # read 2,000 a shard at a time), each page quiet on its own (8 executions at most)
    monkeypatch.setattr(tick_module, "SOON_READ", 2)
    instant = NOW + timedelta(seconds=150)
    stack.create_at(instant, 20)
    assert stack.sent() == []
    # When the tick runs
    report = stack.punctual.scanner().tick()
    # Then every message of the instant is visible as far ahead as the whole instant needs, or more:
    # the tick could not count it before sending its first pages
    assert report.enqueued == 20
    dispatcher = stack.punctual.dispatcher
    lead = dispatcher.ahead(scanner_module.UNCOUNTED)
    assert lead >= dispatcher.ahead(20) > timedelta(0)
    assert {m.delay_seconds for m in stack.sent()} == {150 - lead.seconds}


def test_an_instant_read_from_a_soon_partition_and_a_bucket_is_counted_as_one() -> None:
    stack = stack_with(**SMALL)
    # Given 6 executions due at one instant filed in its minute's bucket long ahead, and a tick
    instant = NOW + timedelta(minutes=10)
    stack.create_at(instant, 6)
    stack.clock.set(instant - timedelta(seconds=140))
    stack.punctual.scanner().tick()
    # and 6 more created for it after that tick, under the soon partitions (quiet apart: 8 at most)
    stack.clock.advance(1)
    stack.create_at(instant, 6)
    assert stack.sent() == []
    # When the next tick reads both
    stack.clock.advance(59)
    report = stack.punctual.scanner().tick()
    # Then the bucket's messages, sent after the soon partition's, have the lead of all 12
    assert report.enqueued == 12
    lead = stack.punctual.dispatcher.ahead(12)
    assert lead > timedelta(0)
    delays = sorted(m.delay_seconds for m in stack.sent())
    assert delays[0] == 80 - lead.seconds


# ------------------------------------------------------------------------------ the worker


@pytest.mark.parametrize("pack_size", [1, 4])
def test_a_message_visible_ahead_is_held_until_its_instant_never_early(pack_size: int) -> None:
    # Given a crowded instant's messages sent ahead (packs of one: the lone path; of four: leased)
    stack = stack_with(
        shard_count=1, pack_size=pack_size, worker_ready_pollers=2, burst_worker_concurrency=20
    )
    instant = NOW + timedelta(minutes=10)
    stack.create_at(instant, 8)
    stack.clock.advance(540)
    stack.punctual.scanner().tick()
    messages = stack.sent()
    lead = 60 - messages[0].delay_seconds
    assert lead > 0
    # When each is handled as it becomes visible
    for message in messages:
        stack.clock.set(instant - timedelta(seconds=lead))
        assert stack.punctual.packs.handle(read_body(message.body), "receipt") is Disposition.DONE
    # Then every execution started at its instant or after it, none before
    for message in messages:
        for item in read_body(message.body).items:
            execution = stack.punctual.store.executions.get(item.job_id, item.scheduled_at, item.execution_id)
            assert execution is not None and execution.status is ExecutionStatus.SUCCEEDED
            assert execution.started_at is not None and execution.started_at >= instant


def test_the_worker_waits_for_a_message_as_early_as_the_lead_bound() -> None:
    stack = stack_with(**SMALL, lead_max_seconds=12)
    # The worker holds what is up to the bound (and its own 5 s) early, and sends back what is earlier
    assert stack.punctual.packs._config.max_early_wait == timedelta(seconds=17)
