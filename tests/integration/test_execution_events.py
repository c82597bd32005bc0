"""Execution status changes from the table's stream to the stack's EventBridge bus, on moto."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodbstreams.models import dynamodbstreams_backends

from punctual.execution.packs import PACK_LEASE_MIN
from punctual.notify import execution_events
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.store.streams import execution_change, record_filters
from tests.stream_filters import passes
from tests.world import World, mocked_world


def _stream_records(world: World, statuses: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The table stream's records that reach the function, as its event carries them: those its
    mapping's filters let through (`statuses`: as deployed with `final`). (Read from moto's streams
    backend: its DynamoDB Streams HTTP API answers 404 for DescribeStream and GetShardIterator.)"""
    table = world.punctual.settings.table_name
    arn = world.dynamodb_client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = dynamodbstreams_backends["123456789012"]["us-east-1"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(arn)["Shards"]:
        iterator = streams.get_shard_iterator(arn, shard["ShardId"], "TRIM_HORIZON", None)
        records += streams.get_records(iterator.arn, 1000)["Records"]
    patterns = record_filters(statuses)
    return [r for r in json.loads(json.dumps(records, default=str)) if passes(r, patterns)]


def streamed(world: World) -> None:
    """The table's stream on, as deployed (new and old images)."""
    world.dynamodb_client.update_table(
        TableName=world.punctual.settings.table_name,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


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


def _executions(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executions' changes the received events carry, event after event."""
    return [detail for event in received for detail in event["detail"]["executions"]]


@pytest.mark.usefixtures("claim_path")
def test_each_status_change_of_an_execution_is_in_the_event_of_its_status(world: World) -> None:
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
    # Then each change of the execution's status is in one event, that of its owner and status, each
    # event's changes in order, and nothing else is
    assert answer == {"batchItemFailures": []}
    received = _received(sqs, queue)
    by_status = {event["detail"]["status"]: event["detail"] for event in received}
    assert len(by_status) == len(received) == 3
    changes = {
        status: [(d["previous_status"], d["status"], d["attempts"]) for d in detail["executions"]]
        for status, detail in by_status.items()
    }
    assert changes == {
        "RUNNING": [(None, "RUNNING", 1), ("RETRYING", "RUNNING", 2)],
        "RETRYING": [("RUNNING", "RETRYING", 1)],
        "FAILED": [("RUNNING", "FAILED", 2)],
    }
    assert {(d["version"], d["owner"]) for d in by_status.values()} == {(2, "alice")}
    [execution] = world.executions(job["id"])
    [last] = by_status["FAILED"]["executions"]
    assert (last["job_id"], last["execution_id"], last["owner"]) == (job["id"], execution["id"], "alice")
    assert last["error"] == "failed on purpose" and last["finished_at"] == execution["finished_at"]
    # and with `final`, only the end
    only_final = _stream_records(world, execution_events.FINAL_STATUS_VALUES)
    execution_events.publish(
        only_final, execution_change, events, "punctual-executions", execution_events.FINAL
    )
    assert [d["status"] for d in _executions(_received(sqs, queue))] == ["FAILED"]


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


def _ended(sequence: int, owner: str, status: str, error: str | None = None) -> dict[str, Any]:
    """A stream record storing an execution of `owner`'s that ended `status`, at `sequence`."""
    execution = f"job_{sequence}.a.1"
    image: dict[str, Any] = {
        "id": {"S": execution},
        "job_id": {"S": f"job_{sequence}"},
        "owner": {"S": owner},
        "status": {"S": status},
        "attempts": {"N": "1"},
    }
    if error is not None:
        image["error"] = {"S": error}
    keys = {"pk": {"S": f"JOB#job_{sequence}"}, "sk": {"S": f"EXEC#{sequence:013d}#{execution}"}}
    return {
        "eventName": "INSERT",
        "dynamodb": {"Keys": keys, "NewImage": image, "SequenceNumber": str(sequence)},
    }


class Recording:
    """PutEvents that takes everything, and keeps each call's entries; or refuses, throttled, the
    entries whose owner and status are in `refused`."""

    def __init__(self, refused: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.refused = refused
        self.calls: list[list[dict[str, Any]]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(Entries)
        details = [json.loads(entry["Detail"]) for entry in Entries]
        no = [(d["owner"], d["status"]) in self.refused for d in details]
        results = [{"ErrorCode": "ThrottlingException"} if n else {"EventId": "1"} for n in no]
        return {"FailedEntryCount": sum(no), "Entries": results}


def test_a_batchs_changes_are_one_entry_for_each_owner_and_status_and_rules_route_on_them() -> None:
    with mock_aws():
        # Given a bus with a rule for one owner's failures, and one for everything
        events, sqs, everything = _bus_with_queue("grouped")
        failures = sqs.create_queue(QueueName="alice-failures")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=failures, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        pattern = {
            "source": [execution_events.SOURCE],
            "detail-type": [execution_events.DETAIL_TYPE],
            "detail": {"owner": ["alice"], "status": ["FAILED"]},
        }
        events.put_rule(Name="alice-failures", EventBusName="grouped", EventPattern=json.dumps(pattern))
        events.put_targets(Rule="alice-failures", EventBusName="grouped", Targets=[{"Id": "q", "Arn": arn}])
        # and a batch of two owners' executions ending SUCCEEDED or FAILED, interleaved
        ends = [
            (1, "alice", "SUCCEEDED"),
            (2, "bob", "FAILED"),
            (3, "alice", "FAILED"),
            (4, "bob", "SUCCEEDED"),
            (5, "alice", "SUCCEEDED"),
            (6, "alice", "FAILED"),
            (7, "bob", "FAILED"),
        ]
        records = [_ended(*end) for end in ends]
        recording = Recording()
        # When the batch is published
        answer = execution_events.publish(records, execution_change, recording, "grouped")
        assert answer == {"batchItemFailures": []}
        # Then one call put four entries, one for each owner and status, in order of their first change,
        # each holding exactly its owner's changes to its status, in stream order
        [call] = recording.calls
        assert [(e["Source"], e["DetailType"], e["EventBusName"]) for e in call] == [
            ("punctual", "Punctual Execution Status Changes", "grouped")
        ] * 4
        details = [json.loads(entry["Detail"]) for entry in call]
        assert [(d["version"], d["owner"], d["status"]) for d in details] == [
            (2, "alice", "SUCCEEDED"),
            (2, "bob", "FAILED"),
            (2, "alice", "FAILED"),
            (2, "bob", "SUCCEEDED"),
        ]
        for detail in details:
            expected = [
                f"job_{n}"
                for n, owner, status in ends
                if (owner, status) == (detail["owner"], detail["status"])
            ]
            assert [e["job_id"] for e in detail["executions"]] == expected
            assert {(e["owner"], e["status"]) for e in detail["executions"]} == {
                (detail["owner"], detail["status"])
            }
        # and on the bus, the rule on detail.owner and detail.status routes alice's failures, and only them
        execution_events.publish(records, execution_change, events, "grouped")
        routed = _received(sqs, failures)
        assert [d["job_id"] for d in _executions(routed)] == ["job_3", "job_6"]
        assert sorted(d["job_id"] for d in _executions(_received(sqs, everything))) == sorted(
            f"job_{n}" for n, _, _ in ends
        )


def test_a_large_group_is_cut_into_entries_each_one_billed_event() -> None:
    # Given a batch of 300 changes of one owner to one status, each with a long error
    records = [_ended(n, "alice", "FAILED", error="HTTP 500: " + "x" * 900) for n in range(1, 301)]
    recording = Recording()
    # When it is published
    assert execution_events.publish(records, execution_change, recording, "bus") == {"batchItemFailures": []}
    # Then the group is cut into several entries, each at most 64 KB as EventBridge measures it
    # (nearly full but the last), ten at most and under 256 KB a call
    put = [entry for call in recording.calls for entry in call]
    sizes = [
        execution_events.entry_size(e["Source"], e["DetailType"], e["Detail"], e["EventBusName"]) for e in put
    ]
    assert len(put) > 4
    assert all(size <= execution_events.EVENT_BYTES for size in sizes)
    assert all(size > execution_events.EVENT_BYTES - 1100 for size in sizes[:-1])
    for call in recording.calls:
        assert len(call) <= execution_events.CALL_ENTRIES
        assert sum(len(e["Detail"]) + len(e["Source"]) + len(e["DetailType"]) for e in call) < 256_000
    # and every change is in one of them, once, in stream order
    details = [json.loads(entry["Detail"]) for entry in put]
    assert {(d["owner"], d["status"]) for d in details} == {("alice", "FAILED")}
    assert [e["job_id"] for d in details for e in d["executions"]] == [f"job_{n}" for n in range(1, 301)]


def test_entries_not_put_make_the_stream_retry_from_their_earliest_record(monkeypatch: Any) -> None:
    monkeypatch.setattr(execution_events.time, "sleep", lambda seconds: None)
    # Given a batch whose first change (alice's success) is put, and whose bob's successes are refused
    ends = [
        (101, "alice", "SUCCEEDED"),
        (102, "alice", "FAILED"),
        (103, "bob", "SUCCEEDED"),
        (104, "alice", "SUCCEEDED"),
        (105, "bob", "SUCCEEDED"),
    ]
    refusing = Recording(refused=frozenset({("bob", "SUCCEEDED"), ("alice", "FAILED")}))
    # When it is published
    answer = execution_events.publish([_ended(*end) for end in ends], execution_change, refusing, "bus")
    # Then the stream retries from the earliest record of an entry not put: alice's failure, 102
    # (the records after it that were put come again: consumers de-duplicate on execution_id)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "102"}]}
    # and the refused entries were tried again, twice, the one put never again
    assert [len(call) for call in refusing.calls] == [3, 2, 2]


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
        streamed(world)
        events, sqs, queue = _bus_with_queue("punctual-packed")
        at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
        tasks = [{"type": "noop"}] * (PACK_LEASE_MIN - 1) + [{"type": "fail"}]
        jobs = [world.create({"type": "at", "at": at}, task=t, retry={"max_attempts": 1}) for t in tasks]
        world.run_for(300)
        # and a later write to one of those jobs, which keeps its run
        assert world.api("PATCH", f"/jobs/{jobs[0]['id']}", {"tags": {"team": "a"}}).status == 200
        # When the stream's records reach the function, all changes and only the final ones
        execution_events.publish(_stream_records(world), execution_change, events, "punctual-packed")
        received = _received(sqs, queue)
        every = _executions(received)
        execution_events.publish(
            _stream_records(world, execution_events.FINAL_STATUS_VALUES),
            execution_change,
            events,
            "punctual-packed",
            execution_events.FINAL,
        )
        final = _executions(_received(sqs, queue))
        # Then each run is one change, its end, as an execution's own item would give, in the one event
        # of its status
        assert every == final
        statuses = [e["detail"]["status"] for e in received]
        assert sorted(statuses) == sorted({d["status"] for d in every})
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


def test_a_call_left_refused_stops_the_batch_there(monkeypatch: Any) -> None:
    monkeypatch.setattr(execution_events.time, "sleep", lambda seconds: None)
    # Given twelve owners' changes, twelve entries: two calls, of ten and two
    ends = [(200 + n, f"owner-{n}", "SUCCEEDED") for n in range(12)]
    refusing = Recording(refused=frozenset({("owner-3", "SUCCEEDED")}))
    # When the first call leaves one entry refused
    answer = execution_events.publish([_ended(*end) for end in ends], execution_change, refusing, "bus")
    # Then the stream retries from that entry's record, and the second call is not made: the stream
    # puts its entries when it retries
    assert answer == {"batchItemFailures": [{"itemIdentifier": "203"}]}
    assert [len(call) for call in refusing.calls] == [10, 1, 1]
