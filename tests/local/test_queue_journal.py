"""The local work queue's journal (punctual_local.queue_journal): a message acknowledged and not deleted
comes back after a restart, with what was left of its delay; one deleted does not."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import moto.sqs.models
import pytest
from moto.core import DEFAULT_ACCOUNT_ID

from functions.worker.handler import lambda_handler as worker_handler
from punctual import wiring
from punctual.domain.work import Pack, WorkItem, read_body
from punctual.platform.clock import ManualClock
from punctual.store.queue import WorkQueue
from punctual_local import queue_journal
from punctual_local.esm import EventSourceMapping
from punctual_local.holding import HoldingSqs
from punctual_local.persistence import replay
from punctual_local.queue_journal import JOURNAL_NAME, JournaledSqs, QueueJournal, Sent
from tests.integration.test_packs import runs_counted, ten_at_one_instant
from tests.world import REGION, World, mocked_world


@dataclass
class Stack:
    """What of a local stack holds its work queue: the journal, the holding client, the wrapper."""

    journal: QueueJournal
    holding: HoldingSqs
    sqs: JournaledSqs


def start(world: World, data_dir: Path) -> Stack:
    """A stack's queue as it starts on `data_dir`: what the journal has pending held again, moto's
    queue (not saved) emptied first, and the world's functions wired to it."""
    settings = world.punctual.settings
    for url in (settings.queue_url, settings.dlq_url):
        queue = moto.sqs.models.sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues[url.rsplit("/", 1)[-1]]
        queue._messages.clear()
        queue._pending_messages.clear()
    journal = QueueJournal(data_dir)
    holding = HoldingSqs(world.sqs, world.clock)
    sqs = JournaledSqs(holding, journal, world.clock, [settings.queue_url])
    replay(journal.pending(), holding, [settings.queue_url, settings.dlq_url])
    world.punctual = wiring.build(
        settings, clock=world.clock, dynamodb=boto3.resource("dynamodb", region_name=REGION), sqs=sqs
    )
    wiring.set_default(world.punctual)
    world.work = EventSourceMapping(sqs, settings.queue_url, worker_handler)
    return Stack(journal, holding, sqs)


def run_for(world: World, stack: Stack, seconds: int) -> None:
    """As World.run_for, the held messages released as they come due."""
    for _ in range(seconds):
        minute = world.clock.now().replace(second=0, microsecond=0)
        if world.last_tick_minute != minute:
            world.tick()
        stack.holding.release_due()
        world.drain()
        world.clock.advance(1)


def received(world: World, sqs: Any) -> list[dict[str, Any]]:
    return list(
        sqs.receive_message(QueueUrl=world.punctual.settings.queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
    )


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, shard_count=1) as world:
        yield world


def test_a_message_not_deleted_comes_back_after_a_restart_with_the_rest_of_its_delay(
    world: World, tmp_path: Path
) -> None:
    # Given two messages sent through a stack's queue, one delayed 30 s, the other received and deleted
    stack = start(world, tmp_path)
    url = world.punctual.settings.queue_url
    now = world.clock.now()
    later = Pack(now + timedelta(seconds=30), (WorkItem("job_1", "job_1.e", now + timedelta(seconds=30)),), 0)
    at_once = Pack(now, (WorkItem("job_2", "job_2.e", now),), 0)
    assert WorkQueue(stack.sqs, url).send_packs([(later, 30), (at_once, 0)]) == []
    [message] = received(world, stack.sqs)
    assert read_body(message["Body"]) == at_once
    stack.sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": "0", "ReceiptHandle": message["ReceiptHandle"]}]
    )

    # When the stack is killed 10 s later (nothing held survives it but the journal) and starts again
    world.clock.advance(10)
    again = start(world, tmp_path)

    # Then only the delayed message comes back, at the end of its delay, once
    again.holding.release_due()
    assert received(world, again.sqs) == []
    world.clock.advance(20)
    again.holding.release_due()
    [back] = received(world, again.sqs)
    assert read_body(back["Body"]) == later
    assert received(world, again.sqs) == []
    # and the journal keeps it until it is deleted
    assert [read_body(m.entry["MessageBody"]) for m in QueueJournal(tmp_path).pending()] == [later]


def test_a_send_the_journal_cannot_take_is_refused_and_nothing_is_sent(world: World, tmp_path: Path) -> None:
    # Given a stack's queue whose disk is full
    def full(path: Path) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    holding = HoldingSqs(world.sqs, world.clock)
    sqs = JournaledSqs(
        holding, QueueJournal(tmp_path, opener=full), world.clock, [world.punctual.settings.queue_url]
    )
    now = world.clock.now()
    packs = [
        (Pack(now, (WorkItem("job_1", "job_1.e", now),), 0), 0),
        (Pack(now, (WorkItem("j2", "j2.e", now),), 0), 5),
    ]
    # When packs are sent, Then none is (the sender keeps its markers), and nothing reached the queue
    assert WorkQueue(sqs, world.punctual.settings.queue_url).send_packs(packs, attempts=1) == [
        p for p, _ in packs
    ]
    assert received(world, world.sqs) == [] and holding.held == 0


def sent(n: int, size: int = 100) -> Sent:
    return Sent(f"x.{n}", "q", 0, {"MessageBody": "b" * size})


def test_compaction_keeps_what_is_pending_and_the_other_process_appends_to_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_journal, "MIN_COMPACT_BYTES", 20_000)
    # Given the stack's journal and the API's, on one file
    stack, api = QueueJournal(tmp_path, sync=False), QueueJournal(tmp_path, sync=False)
    api.sent([sent(-1)])
    # When the stack sends and deletes until its file is compacted, several times
    for n in range(400):
        stack.sent([sent(n)])
        stack.done([f"x.{n}"])
    assert (tmp_path / JOURNAL_NAME).stat().st_size < 20_000
    # and the API appends after that (to the file it opened before the compactions)
    api.sent([sent(-2)])
    api.done(["x.-1"])
    # Then what is pending is the API's last message alone
    assert [m.id for m in QueueJournal(tmp_path).pending()] == ["x.-2"]


def test_a_record_torn_by_a_crash_spoils_only_itself(tmp_path: Path) -> None:
    journal = QueueJournal(tmp_path, sync=False)
    journal.sent([sent(1)])
    with open(tmp_path / JOURNAL_NAME, "ab") as out:
        out.write(b'\n{"id":"x.2","q":"q","at":0,"e":{"Mess')  # killed mid-write
    QueueJournal(tmp_path, sync=False).sent([sent(3)])
    assert [m.id for m in QueueJournal(tmp_path).pending()] == ["x.1", "x.3"]


def test_a_pack_sent_again_after_a_restart_runs_only_if_it_had_not_run(world: World, tmp_path: Path) -> None:
    # Given ten jobs due at one instant, sent by the scanner in one unguarded pack through the journal
    stack = start(world, tmp_path)
    jobs = ten_at_one_instant(world)
    counts = runs_counted(world)
    while stack.holding.held == 0:
        run_for(world, stack, 1)
    sent_only = tmp_path / "sent-only"
    sent_only.mkdir()
    shutil.copy(tmp_path / JOURNAL_NAME, sent_only / JOURNAL_NAME)
    [pending] = QueueJournal(sent_only).pending()
    assert not read_body(pending.entry["MessageBody"]).guarded
    # which ran, and was deleted
    run_for(world, stack, 240)
    assert all(world.executions(job["id"])[0]["status"] == "SUCCEEDED" for job in jobs)
    assert sorted(counts.values()) == [1] * 10
    assert QueueJournal(tmp_path).pending() == []

    # When a stack starts on a journal that has it sent and not deleted (killed before the delete)
    again = start(world, sent_only)
    counts = runs_counted(world)
    run_for(world, again, 30)
    # Then the pack comes back and runs nothing again: its lease says it was taken, its members ended
    assert counts == {}
    assert QueueJournal(sent_only).pending() == []
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)


def test_a_pack_held_when_the_stack_was_killed_runs_once_after_a_restart(
    world: World, tmp_path: Path
) -> None:
    # Given ten jobs due at one instant, their pack sent and held for its instant
    stack = start(world, tmp_path)
    jobs = ten_at_one_instant(world)
    while stack.holding.held == 0:
        run_for(world, stack, 1)
    # When the stack is killed, and starts again
    again = start(world, tmp_path)
    counts = runs_counted(world)
    run_for(world, again, 240)
    # Then each runs once, at its instant
    assert sorted(counts.values()) == [1] * 10
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["attempts"]) == ("SUCCEEDED", 1)
        assert execution["lateness_ms"] >= 0
