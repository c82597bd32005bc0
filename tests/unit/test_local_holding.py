"""The local stack's DelaySeconds: delayed messages wait in HoldingSqs, then go to SQS undelayed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from punctual.clock import ManualClock
from punctual.local import holding as holding_module
from punctual.local.holding import RELEASE_AHEAD_SECONDS, STEP_SECONDS, HoldingSqs
from punctual.worker import MAX_EARLY_WAIT

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


def test_many_messages_for_one_instant_go_ahead_of_it_at_a_pace_and_spread_ones_at_their_time() -> None:
    clock = ManualClock(START)
    sqs = RecordingSqs()
    holding = HoldingSqs(sqs, clock)
    # Given 1,000 messages for one instant 60 s away, and one message alone 30 s after it
    for start in range(0, 1000, 10):
        holding.send_message_batch(
            QueueUrl=QUEUE,
            Entries=[{"Id": str(i), "MessageBody": f"b{start + i}", "DelaySeconds": 60} for i in range(10)],
        )
    holding.send_message_batch(
        QueueUrl=QUEUE, Entries=[{"Id": "0", "MessageBody": "alone", "DelaySeconds": 90}]
    )
    # When the releases run as their loop would, at the times they ask for
    released_at: dict[str, float] = {}
    while (wait := holding.release_due()) is not None or holding.held:
        for body in bodies(sqs):
            released_at.setdefault(body, (clock.now() - START).total_seconds())
        assert wait is not None and wait > -1e-6
        clock.advance(max(wait, 0.001))
    for body in bodies(sqs):
        released_at.setdefault(body, (clock.now() - START).total_seconds())
    # Then the burst's went from PACE_SECONDS before their release time, ten at a time, no more than
    # PACE_PER_SECOND a second, the last at its release time, in due order
    burst = [released_at[f"b{i}"] for i in range(1000)]
    release = 60 - RELEASE_AHEAD_SECONDS
    assert release - holding_module.PACE_SECONDS - STEP_SECONDS <= min(burst)
    assert max(burst) <= release and burst == sorted(burst)
    assert all(len(batch) == 10 for batch in sqs.sent[:100])
    for second in range(54, 60):
        within = [t for t in burst if second <= t < second + 1]
        assert len(within) <= holding_module.PACE_PER_SECOND + 10
    # And the message alone went at its own time, not early
    assert release + 30 - STEP_SECONDS - 1e-6 <= released_at["alone"] <= release + 30


def test_the_earliest_paced_release_is_within_the_workers_wait_for_an_early_message() -> None:
    # (a message the worker receives further ahead than its wait goes back to the queue until then)
    earliest = RELEASE_AHEAD_SECONDS + holding_module.PACE_SECONDS + STEP_SECONDS
    assert earliest < MAX_EARLY_WAIT.total_seconds() - 0.5
