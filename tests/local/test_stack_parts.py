"""Parts of the local stack against moto: delayed messages held by the stack, its durable tables."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from punctual.domain.executions import Execution, ExecutionStatus, execution_id_for
from punctual.domain.work import WorkItem, read_body
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import parse_rfc3339, to_epoch_ms, to_rfc3339
from punctual.store.queue import WorkQueue
from punctual_local.holding import HoldingSqs
from punctual_local.moto.compactor import compact
from punctual_local.moto.data_files import segments
from punctual_local.moto.durable import DurableTables
from punctual_local.moto.speedups import query_only_the_partition
from punctual_local.moto.write_hooks import install_hooks
from punctual_local.persistence import recover, release_claims, work_items
from tests.world import World, mocked_world


def receive(world: World) -> list[dict[str, object]]:
    return world.sqs.receive_message(
        QueueUrl=world.punctual.settings.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", [])


def test_a_held_message_reaches_moto_when_its_delay_ends_and_is_received_once(world: World) -> None:
    # Given a work item sent with a 30 s delay through the stack's holding client
    clock = world.clock
    assert isinstance(clock, ManualClock)
    holding = HoldingSqs(world.sqs, clock)
    item = WorkItem("job_1", "job_1.exec", clock.now() + timedelta(seconds=30))
    assert WorkQueue(holding, world.punctual.settings.queue_url).send([(item, 30)]) == []

    # When less than the delay has passed, Then moto has nothing to receive
    clock.advance(28)
    holding.release_due()
    assert receive(world) == []

    # When the delay ends
    clock.advance(2)
    holding.release_due()

    # Then the message is received, once, with its body and a first receive count
    [message] = receive(world)
    assert WorkItem.from_body(str(message["Body"])) == item
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"  # type: ignore[index]
    assert receive(world) == []


def _put_items(world: World, items: list[dict[str, Any]]) -> None:
    table = world.punctual.settings.table_name
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        assert not world.dynamodb_client.batch_write_item(RequestItems={table: requests})["UnprocessedItems"]


def _scan(world: World) -> list[dict[str, Any]]:
    table, kwargs = world.punctual.settings.table_name, {}
    found: list[dict[str, Any]] = []
    while True:
        page = world.dynamodb_client.scan(TableName=table, **kwargs)
        found += page["Items"]
        if "LastEvaluatedKey" not in page:
            return sorted(found, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        kwargs = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


def _restored(clock: ManualClock, data_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with mocked_world(clock) as fresh:
        tables = DurableTables(data_dir)
        try:
            found = tables.restore(0)
            return _scan(fresh), found
        finally:
            tables.close()


def test_every_kind_of_write_is_journaled_and_comes_back_with_and_without_compaction(
    clock: ManualClock, tmp_path: Path
) -> None:
    # Given moto journaling its writes, as the local stack's moto process does
    install_hooks()
    with mocked_world(clock) as world:
        client, table = world.dynamodb_client, world.punctual.settings.table_name
        tables = DurableTables(tmp_path)
        tables.restore(0)
        try:
            # When items are batch-written, put, updated, deleted and written in transactions
            _put_items(world, [{"pk": {"S": f"P#{i % 7}"}, "sk": {"S": f"{i:04d}"}} for i in range(100)])
            client.put_item(TableName=table, Item={"pk": {"S": "P#1"}, "sk": {"S": "X"}, "n": {"N": "1"}})
            client.update_item(
                TableName=table,
                Key={"pk": {"S": "P#1"}, "sk": {"S": "X"}},
                UpdateExpression="SET n = n + :one, m = :map",
                ExpressionAttributeValues={":one": {"N": "1"}, ":map": {"M": {"l": {"L": [{"S": "a"}]}}}},
            )
            client.delete_item(TableName=table, Key={"pk": {"S": "P#2"}, "sk": {"S": "0002"}})
            client.batch_write_item(
                RequestItems={table: [{"DeleteRequest": {"Key": {"pk": {"S": "P#3"}, "sk": {"S": "0003"}}}}]}
            )
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": table, "Item": {"pk": {"S": "T"}, "sk": {"S": "1"}}}},
                    {"Delete": {"TableName": table, "Key": {"pk": {"S": "P#4"}, "sk": {"S": "0004"}}}},
                ]
            )
            # (a transaction that fails changes nothing, in moto and in the journal)
            with pytest.raises(client.exceptions.TransactionCanceledException):
                client.transact_write_items(
                    TransactItems=[
                        {"Put": {"TableName": table, "Item": {"pk": {"S": "T"}, "sk": {"S": "2"}}}},
                        {
                            "Put": {
                                "TableName": table,
                                "Item": {"pk": {"S": "T"}, "sk": {"S": "1"}},
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                )
            expected = _scan(world)
        finally:
            tables.close()

    # Then a fresh moto reads back exactly that table from the journal
    back, found = _restored(clock, tmp_path)
    assert back == expected
    assert found["journal_records"] >= 105 and found["torn"] == []
    assert {"pk": {"S": "T"}, "sk": {"S": "2"}} not in back

    # And so it does once the journal is folded into a snapshot
    snapshot = compact(tmp_path, through=10)
    assert snapshot.items == len(expected)
    back, found = _restored(clock, tmp_path)
    assert back == expected
    assert found["journal_records"] == 0 and found["snapshot_items"] == len(expected)


def _execution(n: int, status: str, **more: Any) -> dict[str, Any]:
    """An execution's item as saved, of job_<n>."""
    fields = {"job_id": f"job_{n}", "id": f"job_{n}.e", "scheduled_at": "2030-01-01T00:00:00.000Z"}
    item = {"pk": {"S": f"JOB#job_{n}"}, "sk": {"S": f"EXEC#1#job_{n}.e"}, "status": {"S": status}}
    return {**item, **{k: {"S": v} for k, v in fields.items()}, **more}


def _saved_then_restored(
    clock: ManualClock, tmp_path: Path, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The items saved in a data directory, then read back: what came back, and what was found."""
    install_hooks()
    with mocked_world(clock) as world:
        tables = DurableTables(tmp_path)
        tables.restore(0)
        try:
            _put_items(world, items)
        finally:
            tables.close()
    return _restored(clock, tmp_path)


def test_a_restore_reports_unfinished_executions_and_ends_their_leases_and_packs_leases(
    clock: ManualClock, tmp_path: Path
) -> None:
    # Given executions saved QUEUED, RUNNING with a lease, and SUCCEEDED, and a pack's lease
    items = [
        _execution(1, "QUEUED"),
        _execution(2, "RUNNING", lease_until={"N": "99999999999999"}),
        _execution(3, "SUCCEEDED"),
        {
            "pk": {"S": "PACK#p1"},
            "sk": {"S": "PACK"},
            "holder": {"S": "h"},
            "lease_until": {"N": "99999999999999"},
        },
        {
            "pk": {"S": "SCANNER"},
            "sk": {"S": "LEASE#000"},
            "holder": {"S": "t"},
            "until_ms": {"N": "99999999999999"},
        },
    ]

    # When the data is read back
    back, found = _saved_then_restored(clock, tmp_path, items)

    # Then the unfinished ones are reported, and the running one's lease is over
    assert sorted(found["unfinished"]) == [
        ["job_1", "job_1.e", "2030-01-01T00:00:00.000Z"],
        ["job_2", "job_2.e", "2030-01-01T00:00:00.000Z"],
    ]
    [running] = [item for item in back if item.get("status", {}).get("S") == "RUNNING"]
    assert running["lease_until"] == {"N": "0"}  # the restore's "now"
    assert {w.job_id for w in work_items(found["unfinished"])} == {"job_1", "job_2"}
    # and so is the pack's: its message, held again from the queue's journal, is taken at once
    [pack] = [item for item in back if item["pk"]["S"] == "PACK#p1"]
    assert pack["lease_until"] == {"N": "0"}
    # and so is a scanner tick's lease on its shards: the first tick after the start takes them
    [lease] = [item for item in back if item["sk"]["S"] == "LEASE#000"]
    assert lease["until_ms"] == {"N": "0"}


def test_a_restore_requeues_an_execution_that_ended_without_its_job_recording_it(
    clock: ManualClock, tmp_path: Path
) -> None:
    # Given executions that ran to their end: one whose job recorded it, one whose worker stopped
    # before its job did, one whose job recorded a later run, and one whose job is gone
    finished = "2030-01-01T00:00:01.000Z"
    finished_ms = to_epoch_ms(parse_rfc3339(finished))

    def ended(n: int, status: str) -> dict[str, Any]:
        return _execution(n, status, finished_at={"S": finished})

    def job(n: int, **more: Any) -> dict[str, Any]:
        return {"pk": {"S": f"JOB#job_{n}"}, "sk": {"S": "JOB"}, "status": {"S": "ACTIVE"}, **more}

    items = [
        ended(1, "SUCCEEDED"),
        job(1, outcome_at={"N": str(finished_ms)}),
        ended(2, "FAILED"),
        job(2),
        ended(3, "SUCCEEDED"),
        job(3, outcome_at={"N": str(finished_ms + 60_000)}),
        ended(4, "SUCCEEDED"),
    ]

    # When the data is read back
    _, found = _saved_then_restored(clock, tmp_path, items)

    # Then only the one its job has not recorded is sent again (its worker then records it)
    assert found["unfinished"] == [["job_2", "job_2.e", "2030-01-01T00:00:00.000Z"]]


def test_moto_queries_on_the_table_key_answer_as_before_from_their_partition(clock: ManualClock) -> None:
    # Given moto patched as the local stack's moto process patches it, and items in three partitions
    query_only_the_partition()
    with mocked_world(clock) as world:
        table = world.punctual.settings.table_name
        _put_items(
            world,
            [
                {"pk": {"S": f"P#{p}"}, "sk": {"S": f"{(i * 37) % 100:03d}"}, "p": {"N": str(p)}}
                for p in range(3)
                for i in range(100)
            ],
        )

        # When one partition is queried by a key condition, a page of 7 at a time
        found: list[tuple[str, str]] = []
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk < :before",
            "ExpressionAttributeValues": {":pk": {"S": "P#1"}, ":before": {"S": "050"}},
            "Limit": 7,
        }
        while True:
            page = world.dynamodb_client.query(**kwargs)
            found += [(item["pk"]["S"], item["sk"]["S"]) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # Then it returns that partition's matching items, in key order, and nothing else
    assert found == [("P#1", f"{n:03d}") for n in range(50)]


def test_a_format_1_table_json_is_read_and_becomes_a_snapshot(clock: ManualClock, tmp_path: Path) -> None:
    # Given the whole-table file the local stack wrote before its journal
    with mocked_world(clock) as world:
        table = world.punctual.settings.table_name
    items = [{"pk": {"S": f"P#{i}"}, "sk": {"S": "X"}, "n": {"N": str(i)}} for i in range(30)]
    legacy = {"format": "punctual-local-table", "version": 1, "table": table, "items": items}
    (tmp_path / "table.json").write_text(json.dumps({**legacy, "saved_at": "2030-01-01T00:00:00Z"}))

    # When a stack starts on it, Then its items are there, and kept in a snapshot instead
    back, found = _restored(clock, tmp_path)
    assert sorted(int(i["n"]["N"]) for i in back) == list(range(30))
    assert found["snapshot_items"] == 30
    assert not (tmp_path / "table.json").exists()
    assert _restored(clock, tmp_path)[0] == back


def test_a_restore_ignores_a_torn_last_record_and_keeps_everything_before_it(
    clock: ManualClock, tmp_path: Path
) -> None:
    # Given a journal of 10 items whose last segment ends in half a record (a crash mid-write)
    install_hooks()
    with mocked_world(clock) as world:
        tables = DurableTables(tmp_path)
        tables.restore(0)
        try:
            _put_items(world, [{"pk": {"S": f"P#{i}"}, "sk": {"S": "X"}} for i in range(10)])
        finally:
            tables.close()
    [(_, last)] = segments(tmp_path)
    with open(last, "ab") as out:
        out.write(b"\x00\x00\x01\x00\x12\x34")

    # When the data is read back, Then the 10 items are there and the torn bytes are reported
    back, found = _restored(clock, tmp_path)
    assert len(back) == 10
    assert found["torn"] == [{"segment": last.name, "ignored_bytes": 6}]


def _claimed_ahead(world: World, clock: ManualClock) -> WorkItem:
    """A one-time job's execution, stored QUEUED and claimed by a worker ahead of its instant."""
    store = world.punctual.store
    job = world.create({"type": "at", "at": to_rfc3339(clock.now() + timedelta(seconds=60))})
    stored = store.jobs.get(job["id"])
    assert stored is not None
    due = parse_rfc3339(job["next_run_at"])
    execution = Execution(
        id=execution_id_for(job["id"], due, stored.schedule_version),
        job_id=job["id"],
        owner=stored.owner,
        scheduled_at=due,
        status=ExecutionStatus.QUEUED,
        schedule_version=stored.schedule_version,
        created_at=clock.now(),
    )
    store.executions.put_new_many([execution])
    store.executions.claim(
        execution, now=clock.now(), lease_until=due + timedelta(minutes=5), lateness_ms=None, stored=True
    )
    world.sqs.purge_queue(QueueUrl=world.punctual.settings.queue_url)
    return WorkItem(job["id"], execution.id, due)


def test_a_restart_gives_back_a_claim_made_ahead_of_its_instant(clock: ManualClock) -> None:
    with mocked_world(clock) as world:
        # Given an execution a worker claimed ahead of its instant, and then the stack stopped
        item = _claimed_ahead(world, clock)
        # When the next stack starts (its message is held again from the queue's journal)
        release_claims([item], world.punctual.store)
        # Then the claim was given back (waiting again, no attempt counted), and nothing more was sent
        [after] = world.executions(item.job_id)
        assert after["status"] == "QUEUED" and after["attempts"] == 0
        clock.advance(60)
        assert receive(world) == []


def test_a_data_directory_from_before_the_queues_journal_has_its_unfinished_executions_sent_again(
    clock: ManualClock,
) -> None:
    with mocked_world(clock) as world:
        # Given an execution stored QUEUED and claimed ahead, by a stack that kept no queue journal
        item = _claimed_ahead(world, clock)
        # When the next stack recovers the unfinished executions
        work = work_items([[item.job_id, item.execution_id, to_rfc3339(item.scheduled_at)]])
        assert recover(work, world.punctual.queue, clock.now(), world.punctual.store) == 1
        # Then the claim was given back and its message sent again
        [after] = world.executions(item.job_id)
        assert after["status"] == "QUEUED" and after["attempts"] == 0
        clock.advance(60)
        [message] = receive(world)
        assert read_body(str(message["Body"])).items[0].execution_id == item.execution_id
