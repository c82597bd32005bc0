"""AWS API calls, by operation, that one execution costs from creation to SUCCEEDED — counted, not estimated.

Each figure is the difference between the same stretch of time with and without the job, so the
scanner's fixed per-tick cost (bucket queries, checkpoint) is left out; that one is counted on its own.
The figures feed the cost model; a change that adds calls to the hot path fails here on purpose.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from bench.common import WEBHOOK
from bench.cost.meter import CALLER
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual_testing.units import index_write_units, item_size, write_units
from tests.receiver import receiver
from tests.world import World, mocked_world

# Polling (ReceiveMessage) is Lambda's event source mapping's, billed per poll, not per execution.
POLLING = {"sqs.ReceiveMessage"}


def counted(world: World, seconds: float) -> Counter[str]:
    with world.counting_calls() as calls:
        world.run_for(seconds)
    return Counter({k: v for k, v in calls.items() if k not in POLLING})


def test_calls_for_one_one_time_job(world: World) -> None:
    # Given the cost of five idle minutes (once the scanner's positions are in their rhythm)
    world.run_for(90)  # to 09:01:00
    idle = counted(world, 300)
    # When one job is created for 4 minutes ahead and five minutes pass
    with world.counting_calls() as create:
        job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    busy = counted(world, 300)
    per_job = busy - idle
    print("one-time job:", json.dumps({"create": dict(create), "scan_and_run": dict(per_job)}))
    assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"
    # Then creating it is one marker and one job item
    assert create == Counter({"dynamodb.PutItem": 2})
    # and the scanner reads its job (BatchGetItem) and sends it: it stores no execution and deletes
    # no marker (its position moves past it; the marker expires); the worker takes the message as a
    # pack of one: reads the job, takes the pack's lease (a PutItem: no claim, no read of the
    # execution, which the lease says has not started), reads the instant's change records (a Query)
    # and stores the run's end on the job's item in the write that completes the job
    assert per_job == Counter(
        {
            "dynamodb.BatchGetItem": 2,
            "dynamodb.PutItem": 1,
            "dynamodb.Query": 1,
            "sqs.SendMessageBatch": 1,
            "dynamodb.UpdateItem": 1,
            "sqs.DeleteMessageBatch": 1,
        }
    )
    assert idle["dynamodb.Query"] > 0  # the fixed cost of ticking is there, and is not per job


class _WriteUnits:
    """DynamoDB write units of the store's writes, table and indexes, by DynamoDB's rules
    (punctual_testing/units.py): each written item's images before and after, read back apart."""

    def __init__(self, world: World) -> None:
        self.table = 0
        self.indexes: Counter[str] = Counter()
        self._reader = world.dynamodb_client
        self._lock = threading.Lock()
        self._keys = (resources.TABLE.partition_key, resources.TABLE.sort_key)

    @property
    def total(self) -> int:
        return self.table + sum(self.indexes.values())

    def _image(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def before(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        body = json.loads(params["body"])
        written: list[tuple[str, dict[str, Any]]] = []
        if model.name == "PutItem":
            written.append((body["TableName"], {k: body["Item"][k] for k in self._keys}))
        elif model.name in {"UpdateItem", "DeleteItem"}:
            written.append((body["TableName"], body["Key"]))
        elif model.name == "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for request in requests:
                    put = request.get("PutRequest", {}).get("Item")
                    key = {k: put[k] for k in self._keys} if put else request["DeleteRequest"]["Key"]
                    written.append((table, key))
        else:
            assert not model.name.startswith("Transact"), "count a transaction's units here first"
        context["write_units"] = [(table, key, self._image(table, key)) for table, key in written]

    def after(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        for table, key, old in context.pop("write_units", []):
            # (a refused write costs the stored item's size, at least a unit)
            new = old if http_response.status_code >= 300 else self._image(table, key)
            with self._lock:
                self.table += write_units(item_size(old), item_size(new))
                for index in resources.TABLE.indexes:
                    self.indexes[index.name] += index_write_units(
                        old, new, index.key_attributes, self._keys, keys_only=index.projection == "KEYS_ONLY"
                    )


@contextmanager
def counting_write_units(world: World) -> Iterator[_WriteUnits]:
    units = _WriteUnits(world)
    for client in world.store.clients:
        client.meta.events.register("before-call.dynamodb.*", units.before)
        client.meta.events.register("after-call.dynamodb.*", units.after)
    try:
        yield units
    finally:
        for client in world.store.clients:
            client.meta.events.unregister("before-call.dynamodb.*", units.before)
            client.meta.events.unregister("after-call.dynamodb.*", units.after)


def test_write_units_for_a_one_time_execution(world: World) -> None:
    # Given the write units of five idle minutes (the scanner's positions)
    world.run_for(90)  # to 09:01:00
    with counting_write_units(world) as idle:
        world.run_for(300)
    # When one unnamed job is created for 4 minutes ahead, and runs and succeeds
    with counting_write_units(world) as created:
        job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))})
    with counting_write_units(world) as ran:
        world.run_for(300)
    assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"
    print(
        "write units, one-time job:",
        json.dumps(
            {"create": created.total, "run": ran.total - idle.total, "indexes": dict(created.indexes)}
        ),
    )
    # Then creating it writes 3 units: its marker, the job and its by_owner entry (no by_name entry
    # without a name of its own, no by_flag entry while it is active)
    assert (created.table, +created.indexes) == (2, Counter({"by_owner": 1}))
    # and running it alone (a pack of one, under its lease) 2: the lease, and its end stored on its
    # job's item in the write completing the job, with no index write (a job that succeeded carries
    # no flag)
    assert (ran.table - idle.table, +(ran.indexes - idle.indexes)) == (2, Counter())
    assert created.total + ran.total - idle.total == 5


def test_write_units_for_one_time_executions_run_in_a_pack(clock: ManualClock) -> None:
    with mocked_world(clock, shard_count=1) as world:
        # Given the write units of five idle minutes, on one shard (a pack is per instant and shard)
        world.run_for(90)  # to 09:01:00
        with counting_write_units(world) as idle:
            world.run_for(300)
        # When ten unnamed jobs are created for one instant 4 minutes ahead, and run and succeed
        at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
        with counting_write_units(world) as created:
            jobs = [world.create({"type": "at", "at": at}) for _ in range(10)]
        with counting_write_units(world) as ran:
            world.run_for(300)
        assert {world.executions(job["id"])[0]["status"] for job in jobs} == {"SUCCEEDED"}
        print(
            "write units, ten one-time jobs in a pack:",
            json.dumps({"create": created.total, "run": ran.total - idle.total}),
        )
        # Then creating each writes 3 units, as alone
        assert (created.table, +created.indexes) == (10 * 2, Counter({"by_owner": 10}))
        # and running them 1 each and 1 for the pack: the pack's lease, and one write a run that
        # stores its end on its job's item with the job's completion (no claim, no item of its own)
        assert (ran.table - idle.table, +(ran.indexes - idle.indexes)) == (1 + 10 * 1, Counter())


def test_write_units_for_a_batch_of_ten_at_one_instant(world: World) -> None:
    # Given the write units of five idle minutes, on every shard
    world.run_for(90)  # to 09:01:00
    with counting_write_units(world) as idle:
        world.run_for(300)
    # When ten unnamed webhook jobs for one instant 4 minutes ahead are created in one request by a
    # caller named as AWS names one (an assumed role: the owner is on every job item, and its length
    # decides whether a job with its run stays within a write unit), and run
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))}
    with receiver() as hook:
        task = {"type": "http", "params": {**WEBHOOK["params"], "url": f"{hook.url}/punctual/reminders"}}
        with counting_write_units(world) as created:
            answer = world.api(
                "POST", "/jobs/batch", {"jobs": [{"task": task, "schedule": at}] * 10}, owner=CALLER
            )
        assert answer.status == 201, answer.body
        with counting_write_units(world) as ran:
            world.run_for(300)
    jobs = answer.body["items"]
    assert {world.executions(job["id"], owner=CALLER)[0]["status"] for job in jobs} == {"SUCCEEDED"}
    print(
        "write units, a batch of ten at one instant:",
        json.dumps(
            {"create": created.total, "run": ran.total - idle.total, "indexes": dict(created.indexes)}
        ),
    )
    # Then creating them writes the ten jobs, one marker item for the ten (a group: under 1 KB), and
    # one list entry for the ten (the batch's, in by_owner), not ten of each
    assert (created.table, +created.indexes) == (10 + 1 + 1, Counter({"by_owner": 1}))
    # and the group's members share its shard, so they run as one pack: its lease, and one write of
    # their ten ends, in their batch's ends item for the instant (about 1.7 KB: two units), not a
    # write a run on its job's item
    assert (ran.table - idle.table, +(ran.indexes - idle.indexes)) == (1 + 2, Counter())


def test_calls_for_ten_jobs_at_one_instant(clock: ManualClock) -> None:
    with mocked_world(clock, shard_count=1) as world:
        # Given the cost of five idle minutes, on one shard (a pack is per instant and shard)
        world.run_for(90)  # to 09:01:00
        idle = counted(world, 300)
        # When ten jobs are created for the same instant 4 minutes ahead and five minutes pass
        at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
        jobs = [world.create({"type": "at", "at": at}) for _ in range(10)]
        busy = counted(world, 300)
        per_ten = busy - idle
        print("ten one-time jobs at one instant:", json.dumps(dict(per_ten)))
        assert {world.executions(job["id"])[0]["status"] for job in jobs} == {"SUCCEEDED"}
        # Then the scanner reads their jobs in one BatchGetItem and sends them in one message; the
        # worker takes that message as one unit: reads the jobs in a BatchGetItem, takes the pack's
        # one lease (a PutItem: no claim per execution, and no read of the executions, which the
        # lease says are not started), reads the instant's change records at the instant in one
        # Query (not a read per job: none of them changed), completes each job with its execution's
        # end on it in one write, and deletes the one message
        assert per_ten == Counter(
            {
                "dynamodb.Query": 1,
                "dynamodb.BatchGetItem": 2,
                "sqs.SendMessageBatch": 1,
                "dynamodb.PutItem": 1,
                "dynamodb.UpdateItem": 10 * 1,
                "sqs.DeleteMessageBatch": 1,
            }
        )


def test_calls_for_one_cron_occurrence(world: World) -> None:
    # Given an idle minute's cost, then an every-minute job in its rhythm
    world.run_for(90)  # to 09:01:00
    idle = counted(world, 60)
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.run_for(120)
    # When one more minute passes
    before = len(world.executions(job["id"]))
    busy = counted(world, 60)
    assert len(world.executions(job["id"])) - before == 1
    per_occurrence = busy - idle
    print("cron occurrence:", json.dumps(dict(per_occurrence)))
    # Then the scanner reads the job (BatchGetItem), files the next marker (one BatchWriteItem: due
    # within the next ticks' reach, under its shard's soon partition), moves next_run_at, sends, and
    # deletes this marker from its soon partition (a second BatchWriteItem); the worker takes the
    # message as a pack of one: reads the job (a BatchGetItem), takes the lease (a PutItem), reads the
    # instant's change records (a Query), stores the run's end (an UpdateItem creating its item: no
    # claim before it), and records the outcome on the job (an UpdateItem: its status, when and
    # which: what lists show and filter by, without reading executions)
    assert per_occurrence == Counter(
        {
            "dynamodb.BatchGetItem": 2,
            "dynamodb.PutItem": 1,
            "dynamodb.Query": 1,
            "dynamodb.BatchWriteItem": 2,
            "dynamodb.UpdateItem": 3,
            "sqs.SendMessageBatch": 1,
            "sqs.DeleteMessageBatch": 1,
        }
    )


def test_a_named_task_adds_one_read_per_task_and_worker_not_one_per_execution(world: World) -> None:
    # Given the idle cost, and a named task with a schema
    world.run_for(90)  # to 09:01:00
    idle = counted(world, 300)
    schema = {"type": "object", "properties": {"seconds": {"type": "number", "maximum": 1}}}
    assert (
        world.api("POST", "/tasks", {"name": "ping", "type": "sleep", "params_schema": schema}).status == 201
    )
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=240))}
    # When two jobs using it are created for the same instant, and five minutes pass
    with world.counting_calls() as create:
        for seconds in (0, 0.001):
            answer = world.api(
                "POST", "/jobs", {"task": "ping", "params": {"seconds": seconds}, "schedule": at}
            )
            assert answer.status == 201, answer.body
    busy = counted(world, 300)
    per_two = busy - idle
    print(
        "named task, two one-time jobs:", json.dumps({"create": dict(create), "scan_and_run": dict(per_two)})
    )
    executions = [world.executions(job["id"])[0] for job in world.api("GET", "/jobs").body["items"]]
    assert [(e["status"], e["task_version"]) for e in executions] == [("SUCCEEDED", 1)] * 2
    # Then creating each reads its task once (the marker and the job as for an inline task)
    assert create == Counter({"dynamodb.PutItem": 4, "dynamodb.GetItem": 2})
    # and running both costs what two inline jobs cost (the scanner's reads and sends are per shard's
    # chunk, and the worker's reads batched with whatever reads at the same moment, as for them),
    # plus one read of the task by the worker, which keeps it (DEFINITION_TTL_SECONDS) for the other:
    # no read per execution, and the version it ran is written with its end
    assert set(per_two) == {
        "dynamodb.BatchGetItem",
        "dynamodb.PutItem",
        "dynamodb.Query",
        "sqs.SendMessageBatch",
        "dynamodb.GetItem",
        "dynamodb.UpdateItem",
        "sqs.DeleteMessageBatch",
    }
    assert per_two["dynamodb.GetItem"] == 1  # the task's, once
    assert per_two["dynamodb.UpdateItem"] == 2 * 1
    assert per_two["dynamodb.BatchGetItem"] <= 2 * 4 and per_two["sqs.SendMessageBatch"] <= 2


def _listing_calls(world: World, query: str) -> Counter[str]:
    with world.counting_calls() as calls:
        answer = world.api("GET", "/jobs", query=query)
    assert answer.status == 200, answer.body
    return Counter(calls)


def test_a_page_of_jobs_costs_the_same_calls_for_5_jobs_as_for_50(world: World) -> None:
    # Given 5 jobs that have run (a few of them failing), listed one page of them
    def make(count: int) -> None:
        for i in range(count):
            task = {"type": "fail"} if i % 4 == 0 else {"type": "noop"}
            world.create({"type": "now"}, task=task, retry={"max_attempts": 1})
        world.run_for(5)

    make(5)
    few = _listing_calls(world, "limit=50")
    few_failed = _listing_calls(world, "limit=50&outcome=failed")
    # When 45 more make a page of 50
    make(45)
    many = _listing_calls(world, "limit=50")
    many_failed = _listing_calls(world, "limit=50&outcome=failed")
    page = world.api("GET", "/jobs", query="limit=50").body["items"]
    assert len(page) == 50 and all(job["last_execution"] is not None for job in page)
    print("GET /jobs, 50 jobs:", json.dumps(dict(many)), "outcome=failed:", json.dumps(dict(many_failed)))
    # Then a page costs the same calls however many jobs it shows: the index and the jobs, whose runs
    # each ended on its job's item (a run on an item of its own would add one BatchGetItem for them
    # all): no read per job
    assert many == few == Counter({"dynamodb.Query": 1, "dynamodb.BatchGetItem": 1})
    # and a filtered page is bounded too: per page of the index it reads (at most 500 jobs a request),
    # a Query for each flag value that includes FAILED and a BatchGetItem
    assert many_failed == few_failed
    assert set(many_failed) == {"dynamodb.Query", "dynamodb.BatchGetItem"}
    assert many_failed["dynamodb.Query"] == 3 * many_failed["dynamodb.BatchGetItem"]
