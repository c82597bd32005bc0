"""Notification rules, the events an execution makes, and delivery decisions: no network, no AWS."""

from __future__ import annotations

import dataclasses
import json
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from pydantic import ValidationError

from punctual import tasks
from punctual.domain.errors import InvalidRequest
from punctual.domain.executions import (
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    execution_id_for,
    manual_execution_id,
    scheduled_at_of,
)
from punctual.domain.models import Job, JobStatus, TaskSpec
from punctual.domain.policies import NotifyEvent, NotifyRule, RetryPolicy
from punctual.domain.schedules import NowSchedule
from punctual.notify.delivery import RETRY_DELAYS, Handled, Notifier
from punctual.notify.messages import (
    Notification,
    NotifyPolicy,
    check_rules,
    events_at_end,
    message_id,
    notifications,
)
from punctual.platform.clock import ManualClock
from tests.hostile_urls import (
    KEPT_AS_GIVEN,
    LOCAL_STACK_NETWORKS,
    MALFORMED,
    PRIVATE_SPELLINGS,
    PublicForAnyName,
)
from tests.stubs import StubResolver, no_lookups

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TOPIC = "arn:aws:sns:eu-west-1:123456789012:alerts-payments"


def rule(*on: str, to: str = "https://hooks.example.com/punctual", late: int | None = None) -> NotifyRule:
    return NotifyRule.model_validate({"on": list(on), "to": to, "late_after_seconds": late})


def execution(status: ExecutionStatus, **extra: Any) -> Execution:
    values: dict[str, Any] = {
        "id": "job_1.19ad7e5d690.7",
        "job_id": "job_1",
        "owner": "alice",
        "scheduled_at": NOW,
        "status": status,
        "schedule_version": 7,
        "attempts": 1,
        "started_at": NOW,
        "finished_at": NOW + timedelta(seconds=1),
        "lateness_ms": 20,
    }
    return Execution(**{**values, **extra})


def job(*rules: NotifyRule) -> Job:
    return Job(
        id="job_1",
        owner="alice",
        name="nightly",
        status=JobStatus.ACTIVE,
        task=TaskSpec(type="noop"),
        schedule=NowSchedule(type="now"),
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=NOW,
        updated_at=NOW,
        notify=rules,
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"on": ["late"], "to": "https://x.example.com"}, "late_after_seconds: required"),
        ({"on": ["failed"], "to": "https://x.example.com", "late_after_seconds": 3}, "applies only"),
        ({"on": ["failed", "failed"], "to": "https://x.example.com"}, "names an event twice"),
        ({"on": ["boom"], "to": "https://x.example.com"}, "Input should be"),
        ({"on": ["failed"], "to": "arn:aws:sqs:us-east-1:123456789012:q"}, "SNS topic ARN"),
        ({"on": ["failed"], "to": "ftp://x.example.com"}, "webhook URL"),
    ],
)
def test_a_rule_that_makes_no_sense_is_refused(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NotifyRule.model_validate(given)


def test_a_target_is_a_webhook_a_topic_or_a_bus() -> None:
    assert rule("failed").kind == "webhook"
    assert rule("failed", to=TOPIC).kind == "sns"
    assert rule("failed", to="arn:aws:events:eu-west-1:123456789012:event-bus/ops").kind == "eventbridge"


def test_the_deployment_decides_which_targets_are_allowed() -> None:
    # (no lookup at creation: only literal addresses and this machine's names are refused then)
    policy = NotifyPolicy(targets=("arn:aws:sns:eu-west-1:123456789012:alerts-*",))
    assert check_rules([rule("failed", to=TOPIC), rule("failed")], policy)
    for refused, field in [
        (rule("failed", to="arn:aws:sns:eu-west-1:123456789012:billing"), "notify[1].to"),
        (rule("failed", to="http://10.1.2.3/hook"), "notify[1].to"),
        (rule("failed", to="http://localhost:8080/hook"), "notify[1].to"),
    ]:
        with pytest.raises(InvalidRequest) as raised:
            check_rules([rule("failed"), refused], policy)
        assert raised.value.field == field
    loopback = NotifyPolicy(allowed_networks=("127.0.0.0/8", "::1/128"))
    assert check_rules([rule("failed", to="http://localhost:8080/hook")], loopback)


def test_an_ending_makes_the_events_each_rule_asks_for() -> None:
    ok, failed = execution(ExecutionStatus.SUCCEEDED), execution(ExecutionStatus.FAILED)
    dead = execution(ExecutionStatus.FAILED, dead_lettered=True)
    skipped = execution(ExecutionStatus.SKIPPED, started_at=None, lateness_ms=None)
    everything = rule("succeeded", "failed", "dead_lettered", "skipped")
    assert events_at_end(everything, ok, late_sent=False) == [NotifyEvent.SUCCEEDED]
    assert events_at_end(everything, failed, late_sent=False) == [NotifyEvent.FAILED]
    # a dead-lettered one once, as the most specific event the rule asks for
    assert events_at_end(everything, dead, late_sent=False) == [NotifyEvent.DEAD_LETTERED]
    assert events_at_end(rule("failed"), dead, late_sent=False) == [NotifyEvent.FAILED]
    assert events_at_end(rule("dead_lettered"), failed, late_sent=False) == []
    assert events_at_end(everything, skipped, late_sent=False) == [NotifyEvent.SKIPPED]
    assert events_at_end(rule("failed"), ok, late_sent=False) == []
    # and lateness over the rule's threshold, unless told at the start already
    late = rule("late", late=30)
    assert events_at_end(late, execution(ExecutionStatus.SUCCEEDED, lateness_ms=30_001), late_sent=False) == [
        NotifyEvent.LATE
    ]
    assert (
        events_at_end(late, execution(ExecutionStatus.SUCCEEDED, lateness_ms=30_000), late_sent=False) == []
    )
    assert events_at_end(late, execution(ExecutionStatus.SUCCEEDED, lateness_ms=90_000), late_sent=True) == []


def test_one_message_per_rule_and_event_each_with_the_events_id() -> None:
    first, second = rule("failed"), rule("failed", to=TOPIC)
    found = notifications(
        job(first, second),
        execution(ExecutionStatus.FAILED),
        NOW,
        lambda r: events_at_end(r, execution(ExecutionStatus.FAILED), late_sent=False),
    )
    assert [(n.rule, n.to) for n in found] == [(0, first.to), (1, TOPIC)]
    # (receivers de-duplicate on the id: the same for one event, whichever rule carries it)
    assert found[0].id == found[1].id == message_id("job_1.19ad7e5d690.7", NotifyEvent.FAILED)
    assert message_id("job_1.19ad7e5d690.7", NotifyEvent.LATE) != found[0].id
    assert found[0].payload["type"] == "execution.failed"
    assert found[0].payload["data"]["job"] == {
        "id": "job_1",
        "name": "nightly",
        "status": "ACTIVE",
        "pause_note": None,
    }
    assert Notification.from_body(found[0].to_body()) == found[0]


def test_an_execution_id_carries_its_instant() -> None:
    at = NOW + timedelta(milliseconds=123)
    assert scheduled_at_of("job_1", execution_id_for("job_1", at, 7)) == at
    assert scheduled_at_of("job_1", manual_execution_id("job_1", at, "beef")) == at
    for other in ("job_2.19ad7e5d690.7", "job_1.zz.7", "job_1", "job_1.19ad7e5d690", "job_1..7"):
        assert scheduled_at_of("job_1", other) is None


@pytest.mark.parametrize("url", PRIVATE_SPELLINGS)
def test_a_webhook_target_is_checked_as_an_http_task_url_in_every_spelling(url: str) -> None:
    # Given the local stack's allowed networks (loopback) / When a rule's target is a private address
    # in some spelling / Then the rule is refused: when read (not a webhook URL, or not plain text) or
    # when checked, naming notify[0].to
    policy = NotifyPolicy(allowed_networks=LOCAL_STACK_NETWORKS)
    with pytest.raises((ValidationError, InvalidRequest)) as raised:
        check_rules([rule("succeeded", to=url)], policy)
    if isinstance(raised.value, InvalidRequest):
        assert raised.value.field == "notify[0].to"
        assert str(raised.value).startswith("notify[0].to: ")


@pytest.mark.parametrize(("url", "says"), [(u, says) for u, says in MALFORMED if u.startswith("http")])
def test_a_webhook_target_that_is_not_a_valid_url_is_refused_saying_why(url: str, says: str) -> None:
    # (control characters and over-long text are refused when the rule is read; the rest when checked)
    with pytest.raises((ValidationError, InvalidRequest)) as raised:
        check_rules([rule("failed"), rule("failed", to=url)], NotifyPolicy())
    if isinstance(raised.value, InvalidRequest):
        assert raised.value.field == "notify[1].to"
        assert says in str(raised.value)


@pytest.mark.parametrize("url", KEPT_AS_GIVEN)
def test_a_webhook_target_is_kept_as_given(url: str) -> None:
    [checked] = check_rules([rule("failed", to=url)], NotifyPolicy())
    assert checked.to == url


class FakeJobs:
    def __init__(self, stored: Job | None) -> None:
        self.stored = stored

    def get(self, job_id: str) -> Job | None:
        return self.stored


class FakeDeliveries(list[Any]):
    """The deliveries recorded, in order."""

    def record(self, job_id: str, scheduled_at: datetime, execution_id: str, delivery: Any) -> None:
        self.append(delivery)


class FakeStore:
    def __init__(self, stored: Job | None) -> None:
        self.jobs = FakeJobs(stored)
        self.deliveries = FakeDeliveries()


class FakeSqs:
    def __init__(self) -> None:
        self.visibility: list[int] = []

    def change_message_visibility(self, **kwargs: Any) -> None:
        self.visibility.append(kwargs["VisibilityTimeout"])


class FakeSns:
    def __init__(self, *errors: str) -> None:
        self.errors = list(errors)
        self.published: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, Any]:
        if self.errors:
            code = self.errors.pop(0)
            raise ClientError({"Error": {"Code": code, "Message": code}}, "Publish")
        self.published.append(request)
        return {"MessageId": "1"}


def notifier(
    store: FakeStore, sqs: FakeSqs, *, resolver: Any = no_lookups, sns: FakeSns | None = None
) -> Notifier:
    return Notifier(
        store,  # type: ignore[arg-type]
        sqs,
        "queue",
        ManualClock(NOW),
        NotifyPolicy(targets=(TOPIC,)),
        resolver=resolver,
        aws_clients=lambda service, region, timeout: sns,
    )


def one(to: str) -> Notification:
    r = rule("failed", to=to)
    return notifications(job(r), execution(ExecutionStatus.FAILED), NOW, lambda _: [NotifyEvent.FAILED])[0]


def test_a_webhook_whose_name_now_resolves_to_a_private_address_is_not_called_and_fails() -> None:
    # Given a webhook whose name resolves, at delivery, to an address of the private network
    store, sqs = FakeStore(job()), FakeSqs()
    resolver = StubResolver({"hooks.example.com": ["10.0.0.7"]})
    # When it is delivered
    handled = notifier(store, sqs, resolver=resolver).deliver(one("https://hooks.example.com/x"), "r", 1)
    # Then nothing is sent, and it fails at once (no retry cures it)
    assert handled is Handled.DONE and sqs.visibility == []
    [delivery] = store.deliveries
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 1)
    assert "10.0.0.7" in delivery.error
    assert resolver.asked == [("hooks.example.com", 443)]


def test_a_throttled_topic_is_retried_with_backoff_and_a_missing_one_fails() -> None:
    store, sqs, sns = FakeStore(job()), FakeSqs(), FakeSns("Throttled", "NotFound")
    send = notifier(store, sqs, sns=sns)
    assert send.deliver(one(TOPIC), "r", 1) is Handled.LATER
    assert sqs.visibility == [RETRY_DELAYS[0]]
    assert store.deliveries[-1].status is DeliveryStatus.RETRYING
    assert store.deliveries[-1].next_attempt_at == NOW + timedelta(seconds=RETRY_DELAYS[0])
    assert send.deliver(one(TOPIC), "r", 2) is Handled.DONE
    assert (store.deliveries[-1].status, store.deliveries[-1].attempts) == (DeliveryStatus.FAILED, 2)
    assert send.deliver(one(TOPIC), "r", 3) is Handled.DONE
    assert store.deliveries[-1].status is DeliveryStatus.DELIVERED
    [published] = sns.published
    assert published["TopicArn"] == TOPIC
    assert published["MessageAttributes"]["type"]["StringValue"] == "execution.failed"


def test_the_last_attempt_is_not_retried() -> None:
    store, sqs = FakeStore(job()), FakeSqs()
    send = notifier(store, sqs, sns=FakeSns("Throttled"))
    assert send.deliver(one(TOPIC), "r", len(RETRY_DELAYS) + 1) is Handled.DONE
    assert store.deliveries[-1].status is DeliveryStatus.FAILED and sqs.visibility == []


def test_a_topic_the_deployment_no_longer_allows_is_not_published_to() -> None:
    store, sqs, sns = FakeStore(job()), FakeSqs(), FakeSns()
    other = "arn:aws:sns:eu-west-1:123456789012:elsewhere"
    assert notifier(store, sqs, sns=sns).deliver(one(other), "r", 1) is Handled.DONE
    assert sns.published == [] and "no longer allows" in store.deliveries[-1].error


def test_a_webhook_payload_is_sent_as_it_is_not_rendered_as_a_task_template(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a failed execution whose error reads like one of the `http` task's references (users'
    # text: a task's answer, a job's name), told to a webhook
    sent: list[Any] = []
    monkeypatch.setattr(tasks.get("http"), "run", lambda params, context: sent.append(params.body))
    r = rule("failed", to="https://hooks.example.com/x")
    failed = execution(ExecutionStatus.FAILED, error="answered {{ job.name }} and {{ nope }}")
    [message] = notifications(job(r), failed, NOW, lambda _: [NotifyEvent.FAILED])
    store, sqs = FakeStore(job(r)), FakeSqs()
    # When it is delivered
    assert notifier(store, sqs).deliver(message, "r", 1) is Handled.DONE
    # Then the payload goes as it was made: no reference substituted, none refused
    assert store.deliveries[-1].status is DeliveryStatus.DELIVERED
    assert sent == [message.payload]
    assert "answered {{ job.name }} and {{ nope }}" in json.dumps(sent[0])


@pytest.mark.parametrize("url", [u for u in PRIVATE_SPELLINGS if u.startswith(("http://", "https://"))])
def test_a_webhook_stored_in_a_private_spelling_is_neither_looked_up_nor_called(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a notification whose target was stored before these checks, a resolver that would answer
    # a public address for any name, and no connection allowed
    opened: list[Any] = []

    def refuse(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        opened.append(address)
        raise ConnectionRefusedError("no connection in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    resolver = PublicForAnyName()
    store, sqs = FakeStore(job()), FakeSqs()
    message = dataclasses.replace(one("https://hooks.example.com/x"), to=url)

    # When it is delivered
    handled = notifier(store, sqs, resolver=resolver).deliver(message, "r", 1)

    # Then it fails at once, having looked nothing up and connected nowhere
    assert handled is Handled.DONE and sqs.visibility == []
    assert store.deliveries[-1].status is DeliveryStatus.FAILED
    assert resolver.asked == [] and opened == []
