"""Parts of the local stack against moto: delayed messages held by the stack, paced autosaves."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from punctual.clock import ManualClock
from punctual.local.holding import HoldingSqs
from punctual.local.moto_process import query_only_the_partition
from punctual.local.persistence import AUTOSAVE_PAGE_ITEMS, TableSnapshots
from punctual.queue import WorkItem, WorkQueue
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
    clock.advance(29)
    holding.release_due()
    assert receive(world) == []

    # When the delay ends
    clock.advance(1)
    holding.release_due()

    # Then the message is received, once, with its body and a first receive count
    [message] = receive(world)
    assert WorkItem.from_body(str(message["Body"])) == item
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"  # type: ignore[index]
    assert receive(world) == []


def test_a_paced_autosave_keeps_every_item_across_pages(clock: ManualClock, tmp_path: Path) -> None:
    # Given a table with more items than three of an autosave's pages
    count = 3 * AUTOSAVE_PAGE_ITEMS + 17
    items = [{"pk": {"S": f"TEST#{i}"}, "sk": {"S": "X"}, "n": {"N": str(i)}} for i in range(count)]
    with mocked_world(clock) as world:
        table = world.punctual.settings.table_name
        snapshots = TableSnapshots(tmp_path, world.dynamodb_client, table)
        snapshots._batch_put(items)

        # When it is saved a page at a time
        saved = snapshots.save(paced=True)

    # Then restoring the snapshot into a fresh table brings back every item
    with mocked_world(clock) as fresh:
        restored = TableSnapshots(tmp_path, fresh.dynamodb_client, table).restore()
        back = fresh.dynamodb_client.scan(TableName=table)["Items"]
    assert saved == restored.items == count
    assert sorted(int(i["n"]["N"]) for i in back) == list(range(count))


def test_moto_queries_on_the_table_key_answer_as_before_from_their_partition(clock: ManualClock) -> None:
    # Given moto patched as the local stack's moto process patches it, and items in three partitions
    query_only_the_partition()
    with mocked_world(clock) as world:
        table = world.punctual.settings.table_name
        snapshots = TableSnapshots(Path("."), world.dynamodb_client, table)
        snapshots._batch_put(
            [
                {"pk": {"S": f"P#{p}"}, "sk": {"S": f"{(i * 37) % 100:03d}"}, "p": {"N": str(p)}}
                for p in range(3)
                for i in range(100)
            ]
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
