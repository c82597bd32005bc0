"""The local stack's DelaySeconds: delayed messages wait in HoldingSqs, then go to SQS undelayed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from punctual.platform.clock import ManualClock
from punctual_local.holding import COMING_EVERY_SECONDS, RELEASE_AHEAD_SECONDS, ComingCounts, HoldingSqs

START = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
QUEUE = "http://127.0.0.1/000000000000/work"


class RecordingSqs:
    """send_message_batch that records its calls, failing the first `failures` of them."""

    def __init__(self, failures: int = 0) -> None:
        self.sent: list[list[dict[str, Any]]] = []
        self.failures = failures

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.failures:
            self.failures -= 1
            return {"Successful": [], "Failed": [{"Id": e["Id"], "SenderFault": False} for e in Entries]}
        self.sent.append(Entries)
        return {"Successful": [{"Id": e["Id"], "MessageId": e["Id"]} for e in Entries], "Failed": []}

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        return {"QueueUrl": QueueName}


def bodies(sqs: RecordingSqs) -> list[str]:
    return [entry["MessageBody"] for batch in sqs.sent for entry in batch]


def test_a_delayed_message_reaches_sqs_undelayed_when_its_delay_ends() -> None:
    # Given a message sent with a 30 s delay
    clock = ManualClock(START)
    sqs = RecordingSqs()
    holding = HoldingSqs(sqs, clock)
    answer = holding.send_message_batch(
        QueueUrl=QUEUE, Entries=[{"Id": "0", "MessageBody": "later", "DelaySeconds": 30}]
    )
    assert [s["Id"] for s in answer["Successful"]] == ["0"] and not answer["Failed"]

    # When less than the delay has passed
    clock.advance(28)
    wait = holding.release_due()

    # Then nothing has reached SQS, and the next release is due as the delay ends (a little ahead)
    assert sqs.sent == [] and holding.held == 1
    assert wait is not None and abs(wait - (2 - RELEASE_AHEAD_SECONDS)) < 1e-6

    # When the delay ends
    clock.advance(2)
    assert holding.release_due() is None

    # Then it is sent without a delay, and nothing is held any more
    assert sqs.sent == [[{"Id": "0", "MessageBody": "later"}]]
    assert holding.held == 0


def test_undelayed_messages_go_to_sqs_at_once_and_other_calls_pass_through() -> None:
    # Given a holding client
    sqs = RecordingSqs()
    holding = HoldingSqs(sqs, ManualClock(START))

    # When messages are sent without a delay, and another SQS call is made
    holding.send_message_batch(
        QueueUrl=QUEUE,
        Entries=[{"Id": "0", "MessageBody": "now", "DelaySeconds": 0}, {"Id": "1", "MessageBody": "now too"}],
    )
    answer = holding.get_queue_url(QueueName="work")

    # Then the messages were sent straight away, and the call reached the wrapped client
    assert bodies(sqs) == ["now", "now too"]
    assert answer == {"QueueUrl": "work"}


def test_messages_are_released_in_due_order_in_batches_of_ten() -> None:
    # Given 25 messages due in 5 s and one due sooner, in 3 s
    clock = ManualClock(START)
    sqs = RecordingSqs()
    holding = HoldingSqs(sqs, clock)
    entries = [{"Id": str(i), "MessageBody": f"m{i}", "DelaySeconds": 5} for i in range(25)]
    holding.send_message_batch(QueueUrl=QUEUE, Entries=entries)
    holding.send_message_batch(
        QueueUrl=QUEUE, Entries=[{"Id": "0", "MessageBody": "first", "DelaySeconds": 3}]
    )

    # When 3 s have passed, and then 5
    clock.advance(3)
    holding.release_due()
    first = bodies(sqs)
    clock.advance(2)
    holding.release_due()

    # Then the sooner one went first, alone, and the rest in batches of at most ten
    assert first == ["first"]
    assert [len(batch) for batch in sqs.sent] == [1, 10, 10, 5]
    assert bodies(sqs)[1:] == [f"m{i}" for i in range(25)]


def test_a_release_that_sqs_refuses_is_tried_again() -> None:
    # Given a delayed message and an SQS that fails the first send
    clock = ManualClock(START)
    sqs = RecordingSqs(failures=1)
    holding = HoldingSqs(sqs, clock)
    holding.send_message_batch(QueueUrl=QUEUE, Entries=[{"Id": "0", "MessageBody": "m", "DelaySeconds": 2}])

    # When it comes due, and the retry's time comes
    clock.advance(2)
    wait = holding.release_due()
    held_after_failure = holding.held
    clock.advance(wait or 0)
    holding.release_due()

    # Then it was held again, and sent by the retry
    assert held_after_failure == 1
    assert bodies(sqs) == ["m"] and holding.held == 0


def test_pollers_prepare_for_the_sum_of_what_every_holder_has_coming_while_its_report_is_fresh() -> None:
    now = [100.0]
    prepared: list[tuple[str, int]] = []
    coming = ComingCounts(lambda queue, count: prepared.append((queue, count)), monotonic=lambda: now[0])
    stack, api = coming.reporter("stack"), coming.reporter("api")
    # Given the stack's held sends report 500 messages coming on the work queue
    stack("work", 500)
    # When the API's process reports 400 on it, and 3 on another queue
    api("work", 400)
    api("notify", 3)
    # Then the work queue's pollers prepare for both holders' messages, the other's for its own
    assert prepared == [("work", 500), ("work", 900), ("notify", 3)]
    # And a holder that has not reported for two of its periods no longer counts (all released)
    now[0] += 2 * COMING_EVERY_SECONDS + 0.01
    api("work", 10)
    assert prepared[-1] == ("work", 10)
    # And a holder's new report replaces its last
    stack("work", 20)
    api("work", 5)
    assert prepared[-2:] == [("work", 30), ("work", 25)]
