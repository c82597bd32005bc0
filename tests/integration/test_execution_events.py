"""Execution status changes from the table's stream to the stack's EventBridge bus, on moto."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.dynamodbstreams.models import dynamodbstreams_backends

from punctual.execution.packs import PACK_LEASE_MIN
from punctual.notify import execution_events
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.store.streams import execution_change
from tests.world import World, mocked_world


def _stream_records(world: World) -> list[dict[str, Any]]:
    """The table stream's records, as the function's event carries them. (Read from moto's streams
    backend: its DynamoDB Streams HTTP API answers 404 for DescribeStream and GetShardIterator.)"""
    table = world.punctual.settings.table_name
    arn = world.dynamodb_client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = dynamodbstreams_backends["123456789012"]["us-east-1"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(arn)["Shards"]:
        iterator = streams.get_shard_iterator(arn, shard["ShardId"], "TRIM_HORIZON", None)
        records += streams.get_records(iterator.arn, 1000)["Records"]
    return json.loads(json.dumps(records, default=str))


def _bus_with_queue(name: str) -> tuple[Any, Any, str]:
    events = boto3.client("events", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    events.create_event_bus(Name=name)
    queue = sqs.create_queue(QueueName=f"{name}-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {"source": [execution_events.SOURCE], "detail-type": [execution_events.DETAIL_TYPE]}
    events.put_rule(Name="all", EventBusName=name, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="all", EventBusName=name, Targets=[{"Id": "q", "Arn": arn}])
    return events, sqs, queue


def _received(sqs: Any, queue: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        found += [json.loads(m["Body"]) for m in messages]
        sqs.delete_message_batch(
            QueueUrl=queue,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
    return found


@pytest.mark.usefixtures("claim_path")
def test_each_status_change_of_an_execution_is_one_event_on_the_bus(world: World) -> None:
    # Given the table's stream on, as the stack deploys it, and a bus with a rule for Punctual's events
    world.dynamodb_client.update_table(
        TableName=world.punctual.settings.table_name,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    events, sqs, queue = _bus_with_queue("punctual-executions")
    # When a job runs once and fails once, with a retry in between
    job = world.create(
        {"type": "now"}, task={"type": "fail"}, retry={"max_attempts": 2, "backoff_seconds": 1}
    )
    world.run_for(10)
    # and the stream's records (jobs', markers', executions') reach the function
    answer = execution_events.publish(_stream_records(world), execution_change, events, "punctual-executions")
    # Then each change of the execution's status is one event, in order, and nothing else is
    assert answer == {"batchItemFailures": []}
    details = [event["detail"] for event in _received(sqs, queue)]
    changes = [(d["previous_status"], d["status"], d["attempts"]) for d in details]
    assert changes == [
        (None, "RUNNING", 1),
        ("RUNNING", "RETRYING", 1),
        ("RETRYING", "RUNNING", 2),
        ("RUNNING", "FAILED", 2),
    ]
    [execution] = world.executions(job["id"])
    last = details[-1]
    assert (last["job_id"], last["execution_id"], last["owner"]) == (job["id"], execution["id"], "alice")
    assert last["error"] == "failed on purpose" and last["finished_at"] == execution["finished_at"]
    # and with `final`, only the end
    only_final = [r for r in _stream_records(world)]
    execution_events.publish(
        only_final, execution_change, events, "punctual-executions", execution_events.FINAL
    )
    assert [e["detail"]["status"] for e in _received(sqs, queue)] == ["FAILED"]


class Refusing:
    """PutEvents that refuses, throttled, every event of a status."""

    def __init__(self, status: str) -> None:
        self.status = status
        self.calls: list[int] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(len(Entries))
        refused = [json.loads(entry["Detail"])["status"] == self.status for entry in Entries]
        results = [{"ErrorCode": "ThrottlingException"} if no else {"EventId": "1"} for no in refused]
        return {"FailedEntryCount": sum(refused), "Entries": results}


def _record(sequence: str, status: str, before: str | None) -> dict[str, Any]:
    def image(value: str) -> dict[str, Any]:
        return {"status": {"S": value}, "id": {"S": "job_1.a.1"}, "job_id": {"S": "job_1"}}

    change: dict[str, Any] = {
        "Keys": {"pk": {"S": "JOB#job_1"}, "sk": {"S": f"EXEC#{sequence}#job_1.a.1"}},
        "NewImage": image(status),
        "SequenceNumber": sequence,
    }
    if before:
        change["OldImage"] = image(before)
    return {"eventName": "MODIFY", "dynamodb": change}


def test_events_that_cannot_be_put_make_the_stream_retry_from_the_first_of_them(monkeypatch: Any) -> None:
    monkeypatch.setattr(execution_events.time, "sleep", lambda seconds: None)
    records = [
        _record("1", "RUNNING", None),
        _record("2", "SUCCEEDED", "RUNNING"),
        _record("3", "SUCCEEDED", "SUCCEEDED"),
    ]
    refusing = Refusing("SUCCEEDED")
    assert execution_events.publish(records, execution_change, refusing, "bus") == {
        "batchItemFailures": [{"itemIdentifier": "2"}]
    }
    assert refusing.calls == [2, 1, 1]  # the refused one tried again, twice; the unchanged one never sent


def test_a_run_claimed_ahead_of_its_instant_is_queued_in_its_events_until_it_runs() -> None:
    def change(new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        def image(values: dict[str, Any]) -> dict[str, Any]:
            typed = {k: {"N": str(v)} if isinstance(v, int) else {"S": v} for k, v in values.items()}
            return {"id": {"S": "job_1.a.1"}, "job_id": {"S": "job_1"}, **typed}

        record: dict[str, Any] = {
            "Keys": {"pk": {"S": "JOB#job_1"}, "sk": {"S": "EXEC#0000000000001#job_1.a.1"}},
            "NewImage": image(new),
        }
        if old is not None:
            record["OldImage"] = image(old)
        return {"eventName": "MODIFY", "dynamodb": record}

    claimed = {"status": "RUNNING", "attempts": 1}  # ahead of its instant: no start recorded
    started = {"started_at": "2026-12-01T09:00:00.004Z"}

    def shown(new: dict[str, Any], old: dict[str, Any] | None) -> tuple[Any, ...] | None:
        detail = execution_events.detail_of(change(new, old), execution_change)
        return None if detail is None else (detail["previous_status"], detail["status"], detail["attempts"])

    # Its claim is no start: QUEUED, no attempt counted (nothing at all if it was stored QUEUED)
    assert shown(claimed, None) == (None, "QUEUED", 0)
    assert shown(claimed, {"status": "QUEUED", "attempts": 0}) is None
    # its end, its start written with it, follows RUNNING
    assert shown({"status": "SUCCEEDED", "attempts": 1, **started}, claimed) == ("RUNNING", "SUCCEEDED", 1)
    # a claim given back, or a run skipped before its instant, never ran
    assert shown({"status": "QUEUED", "attempts": 0}, claimed) is None
    assert shown({"status": "CANCELLED", "attempts": 0}, claimed) == ("QUEUED", "CANCELLED", 0)
    # and a worker taking over a claim whose worker died starts it
    assert shown({"status": "RUNNING", "attempts": 2, **started}, claimed) == ("QUEUED", "RUNNING", 2)


def test_a_run_stored_on_its_job_is_one_event_from_the_job_items_record(clock: ManualClock) -> None:
    with mocked_world(clock, shard_count=1) as world:
        # Given the table's stream on, and one-time jobs due together (a pack, whose runs are stored
        # on their jobs' items with their completion), one failing
        world.dynamodb_client.update_table(
            TableName=world.punctual.settings.table_name,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        events, sqs, queue = _bus_with_queue("punctual-packed")
        at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
        tasks = [{"type": "noop"}] * (PACK_LEASE_MIN - 1) + [{"type": "fail"}]
        jobs = [world.create({"type": "at", "at": at}, task=t, retry={"max_attempts": 1}) for t in tasks]
        world.run_for(300)
        # and a later write to one of those jobs, which keeps its run
        assert world.api("PATCH", f"/jobs/{jobs[0]['id']}", {"tags": {"team": "a"}}).status == 200
        # When the stream's records reach the function, all changes and only the final ones
        execution_events.publish(_stream_records(world), execution_change, events, "punctual-packed")
        every = [event["detail"] for event in _received(sqs, queue)]
        execution_events.publish(
            _stream_records(world), execution_change, events, "punctual-packed", execution_events.FINAL
        )
        final = [event["detail"] for event in _received(sqs, queue)]
        # Then each run is one event, its end, as an execution's own item would give
        assert every == final
        by_job = {d["job_id"]: d for d in every}
        assert len(every) == len(by_job) == len(jobs)
        for job in jobs:
            [execution] = world.executions(job["id"])
            detail = by_job[job["id"]]
            assert (detail["execution_id"], detail["status"], detail["previous_status"]) == (
                execution["id"],
                execution["status"],
                None,
            )
            assert (detail["attempts"], detail["started_at"], detail["finished_at"]) == (
                1,
                execution["started_at"],
                execution["finished_at"],
            )
            assert detail["lateness_ms"] == execution["lateness_ms"] and detail["owner"] == "alice"
        assert by_job[jobs[-1]["id"]]["error"] == "failed on purpose"
