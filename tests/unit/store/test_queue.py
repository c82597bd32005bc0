"""The work queue: batched sends that retry partial failures and calls without an answer (fake SQS)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from punctual.domain.work import WorkItem
from punctual.store import queue as queue_module
from punctual.store.queue import WorkQueue

NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/punctual-work"


def item(n: int) -> WorkItem:
    return WorkItem(job_id=f"job{n}", execution_id=f"job{n}.e", scheduled_at=NOW + timedelta(seconds=n))


@dataclass
class FakeSqs:
    """send_message_batch that fails chosen messages a chosen number of times (by execution id)."""

    failures: dict[str, int] = field(default_factory=dict)  # execution id -> times to fail
    throttle_calls: int = 0  # whole calls that raise ClientError first
    lost_connections: int = 0  # whole calls that raise a connection error (no answer) first
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    delivered: list[dict[str, Any]] = field(default_factory=list)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        assert QueueUrl == QUEUE_URL
        assert 1 <= len(Entries) <= 10, "SQS takes at most 10 entries per batch"
        assert len({e["Id"] for e in Entries}) == len(Entries), "batch entry ids must be distinct"
        self.calls.append(Entries)
        if self.lost_connections:
            self.lost_connections -= 1
            raise ReadTimeoutError(endpoint_url=QUEUE_URL)
        if self.throttle_calls:
            self.throttle_calls -= 1
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "SendMessageBatch"
            )
        failed, ok = [], []
        for entry in Entries:
            execution_id = json.loads(entry["MessageBody"])["execution_id"]
            if self.failures.get(execution_id, 0) > 0:
                self.failures[execution_id] -= 1
                failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
            else:
                ok.append({"Id": entry["Id"], "MessageId": f"m-{execution_id}"})
                self.delivered.append(entry)
        return {"Successful": ok, "Failed": failed}

    def delivered_ids(self) -> list[str]:
        return [json.loads(e["MessageBody"])["execution_id"] for e in self.delivered]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff sleeps, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(queue_module.time, "sleep", recorded.append)
    return recorded


# --- send --------------------------------------------------------------------------------------------


def test_send_batches_by_ten_with_bodies_and_delays(sleeps: list[float]) -> None:
    # Given 23 items with their delays
    sqs = FakeSqs()
    items = [(item(n), n % 7) for n in range(23)]

    # When sent
    failed = WorkQueue(sqs, QUEUE_URL).send(items)

    # Then three batches of 10, 10 and 3 carry every item once, with its own delay, and nothing failed
    assert failed == []
    assert [len(call) for call in sqs.calls] == [10, 10, 3]
    sent = [(WorkItem.from_body(e["MessageBody"]), e["DelaySeconds"]) for call in sqs.calls for e in call]
    assert sent == items
    assert sleeps == []


def test_send_retries_only_the_entries_that_failed(sleeps: list[float]) -> None:
    # Given SQS failing two entries of the first batch once, one of them twice
    sqs = FakeSqs(failures={"job3.e": 1, "job7.e": 2})
    items = [(item(n), 0) for n in range(12)]

    # When sent
    failed = WorkQueue(sqs, QUEUE_URL).send(items)

    # Then each failed entry was sent again (and only those), until all were delivered exactly once
    assert failed == []
    assert sorted(sqs.delivered_ids()) == sorted(f"job{n}.e" for n in range(12))
    retried = [[json.loads(e["MessageBody"])["execution_id"] for e in call] for call in sqs.calls[1:3]]
    assert retried == [["job3.e", "job7.e"], ["job7.e"]]
    assert len(sqs.calls) == 4  # 10 + retry of 2 + retry of 1, then the batch of 2
    # and it backed off between attempts
    assert len(sleeps) == 2 and sleeps[0] < sleeps[1]


def test_send_returns_what_still_failed_after_all_attempts(sleeps: list[float]) -> None:
    # Given one entry SQS keeps refusing
    sqs = FakeSqs(failures={"job4.e": 99})
    items = [(item(n), 0) for n in range(6)]

    # When sent with 3 attempts
    failed = WorkQueue(sqs, QUEUE_URL).send(items, attempts=3)

    # Then it was tried 3 times, is returned (its marker stays for the next tick), and the others went
    assert failed == [item(4)]
    assert len(sqs.calls) == 3
    assert sorted(sqs.delivered_ids()) == sorted(f"job{n}.e" for n in range(6) if n != 4)


def test_send_retries_a_throttled_call(sleeps: list[float]) -> None:
    # Given a call that raises (throttling), then succeeds
    sqs = FakeSqs(throttle_calls=1)
    items = [(item(n), 0) for n in range(3)]

    # When sent / Then the whole batch is sent again and nothing is lost
    assert WorkQueue(sqs, QUEUE_URL).send(items) == []
    assert len(sqs.calls) == 2
    assert sorted(sqs.delivered_ids()) == ["job0.e", "job1.e", "job2.e"]


def test_send_retries_a_call_that_lost_its_connection(sleeps: list[float]) -> None:
    # Given a call that times out after botocore's own retries (no answer at all), then succeeds
    sqs = FakeSqs(lost_connections=1)
    items = [(item(n), 0) for n in range(3)]

    # When sent / Then the batch is sent again, as after a refusal, instead of the error escaping
    assert WorkQueue(sqs, QUEUE_URL).send(items) == []
    assert sorted(sqs.delivered_ids()) == ["job0.e", "job1.e", "job2.e"]


def test_send_gives_up_per_batch_and_carries_on_with_the_next(
    sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given SQS throttling the first batch's every attempt (batches sent one after another, so that
    # "first" is well defined)
    monkeypatch.setattr(queue_module, "parallel_map", lambda fn, items: [fn(i) for i in items])
    sqs = FakeSqs(throttle_calls=2)
    items = [(item(n), 0) for n in range(15)]

    # When sent with 2 attempts / Then the first batch is returned, the second delivered
    failed = WorkQueue(sqs, QUEUE_URL).send(items, attempts=2)
    assert failed == [item(n) for n in range(10)]
    assert sqs.delivered_ids() == [f"job{n}.e" for n in range(10, 15)]


def test_send_of_nothing_calls_nothing(sleeps: list[float]) -> None:
    sqs = FakeSqs()
    assert WorkQueue(sqs, QUEUE_URL).send([]) == []
    assert sqs.calls == []


def test_send_does_not_wait_after_its_last_attempt(sleeps: list[float]) -> None:
    sqs = FakeSqs(failures={"job0.e": 99})
    WorkQueue(sqs, QUEUE_URL).send([(item(0), 0)], attempts=3)
    assert len(sqs.calls) == 3
    assert len(sleeps) == 2  # between attempts only
