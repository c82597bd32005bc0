"""Job notifications: a job's `notify` rules say where to tell of its executions' events.

Delivery is at least once and never holds up an execution. The worker (or the dead-letter handler)
records the execution's outcome first, then sends one message per rule and event to the stack's
notification queue (`Outbox`); a failure to send makes the work message come back, and the outcome,
recorded already, is not written twice, while its notifications are sent again. The notifier function
consumes that queue (`Notifier`): it calls the webhook (signed when the job has a signing secret),
publishes to the SNS topic or puts the event on the EventBridge bus, and keeps what happened on the
execution's item (`Delivery`: delivered, retrying or failed, with attempts and the last error).
A failed attempt that another could cure (a network error, 408, 429, 5xx, throttling) comes back after
`RETRY_DELAYS` by the message's visibility, up to `MAX_ATTEMPTS` over about eleven hours; other
answers fail the delivery at once. A receiver de-duplicates on `webhook-id` (or the payload's `id`):
one message per execution and event, whichever rule and attempt carried it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from punctual import target_arns, tasks
from punctual.clock import Clock
from punctual.concurrency import chunks, parallel_map
from punctual.errors import InvalidRequest, RetryableStoreError
from punctual.models import (
    Delivery,
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    Job,
    NotifyEvent,
    NotifyRule,
    TargetKind,
    TaskSpec,
)
from punctual.netguard import Resolver, is_allowed, is_loopback_name, literal_address, loopback_allowed
from punctual.observability import NOTIFICATIONS_DELIVERED, NOTIFICATIONS_FAILED, logger, metrics
from punctual.queue import MAX_VISIBILITY_SECONDS
from punctual.store import Store
from punctual.tasks import AwsClients, TaskContext, TaskFailed
from punctual.timefmt import from_epoch_ms, to_epoch_ms, to_rfc3339

# After failed attempt n (1-based), the next comes this many seconds later.
RETRY_DELAYS = (5, 30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
WEBHOOK_TIMEOUT_SECONDS = 10
# How long an SNS or EventBridge delivery waits for its answer (one attempt: a delivery that cannot
# get through is retried later, by its message).
AWS_TIMEOUT_SECONDS = 10
MAX_ERROR_CHARS = 300
SOURCE = "punctual"  # EventBridge's `source` of the events Punctual puts on a bus
# Errors that another attempt cannot cure: a topic or bus that does not exist, or that the deployment
# may not reach. (Throttling and service errors are retried.)
_PERMANENT_AWS_ERRORS = frozenset(
    {
        "NotFound",
        "NotFoundException",
        "ResourceNotFoundException",
        "InvalidParameter",
        "InvalidParameterValue",
        "InvalidParameterException",
        "ValidationException",
        "AuthorizationError",
        "AccessDenied",
        "AccessDeniedException",
        "NotAuthorizedForSourceException",
    }
)


@dataclass(frozen=True)
class NotifyPolicy:
    """What this deployment lets notifications reach, from its settings: webhooks as the `http` task
    (`webhook_allowed_networks`), SNS topics and buses by ARN pattern (`notification_targets`)."""

    allowed_networks: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


def check_rules(rules: Sequence[NotifyRule], policy: NotifyPolicy) -> tuple[NotifyRule, ...]:
    """Refuse (InvalidRequest naming `notify[i].to`) a target this deployment may not reach: a webhook
    at a literal private, loopback or link-local address, or at a name meaning this machine (its other
    names are checked when resolved, at each delivery), or an ARN no pattern of `notification_targets`
    matches."""
    for i, rule in enumerate(rules):
        where = f"notify[{i}].to"
        if rule.kind is TargetKind.WEBHOOK:
            try:
                host = urlsplit(rule.to).hostname or ""
            except ValueError:
                raise InvalidRequest(f"{where}: not a URL", field=where) from None
            if not host:
                raise InvalidRequest(f"{where}: the URL names no host", field=where)
            literal = literal_address(host)
            if literal and not is_allowed(literal, policy.allowed_networks):
                raise InvalidRequest(
                    f"{where}: {host} is a private, loopback or link-local address", field=where
                )
            if literal is None and is_loopback_name(host) and not loopback_allowed(policy.allowed_networks):
                raise InvalidRequest(f"{where}: {host} names this machine (a loopback address)", field=where)
        elif not target_arns.is_allowed(rule.to, policy.targets):
            allowed = ", ".join(policy.targets) or "none"
            raise InvalidRequest(
                f"{where}: this deployment does not notify {rule.to} (its notification_targets allow: "
                f"{allowed})",
                field=where,
            )
    return tuple(rules)


# ------------------------------------------------------------------------------------ events
def events_at_end(rule: NotifyRule, execution: Execution, *, late_sent: bool) -> list[NotifyEvent]:
    """The events of `rule` that an execution reaching its final status makes: its end (a
    dead-lettered one once, as the most specific event the rule asks for) and, unless told already
    at its start (`late_sent`), its lateness."""
    wanted = set(rule.on)
    found: list[NotifyEvent] = []
    if execution.status is ExecutionStatus.SUCCEEDED and NotifyEvent.SUCCEEDED in wanted:
        found.append(NotifyEvent.SUCCEEDED)
    elif execution.status is ExecutionStatus.FAILED:
        if execution.dead_lettered and NotifyEvent.DEAD_LETTERED in wanted:
            found.append(NotifyEvent.DEAD_LETTERED)
        elif NotifyEvent.FAILED in wanted:
            found.append(NotifyEvent.FAILED)
    elif execution.status is ExecutionStatus.SKIPPED and NotifyEvent.SKIPPED in wanted:
        found.append(NotifyEvent.SKIPPED)
    if not late_sent and is_late(rule, execution):
        found.append(NotifyEvent.LATE)
    return found


def is_late(rule: NotifyRule, execution: Execution) -> bool:
    return (
        NotifyEvent.LATE in rule.on
        and rule.late_after_seconds is not None
        and execution.lateness_ms is not None
        and execution.lateness_ms > rule.late_after_seconds * 1000
    )


def message_id(execution_id: str, event: NotifyEvent) -> str:
    """The same for every rule and every attempt that tells of this event (Standard Webhooks'
    `webhook-id`): receivers de-duplicate on it."""
    return "msg_" + hashlib.sha256(f"{execution_id}|{event.value}".encode()).hexdigest()[:32]


def payload(
    job: Job, execution: Execution, event: NotifyEvent, rule: NotifyRule, at: datetime
) -> dict[str, Any]:
    """What a notification says (the webhook's JSON body, the SNS message, the EventBridge detail)."""
    data: dict[str, Any] = {
        "job": {
            "id": job.id,
            "name": job.name,
            "status": job.status.value,
            "pause_note": job.pause_note,
        },
        "execution": {
            "id": execution.id,
            "job_id": execution.job_id,
            "scheduled_at": to_rfc3339(execution.scheduled_at),
            "status": execution.status.value,
            "attempts": execution.attempts,
            "manual": execution.manual,
            "retry_of": execution.retry_of,
            "dead_lettered": execution.dead_lettered,
            "started_at": None if execution.started_at is None else to_rfc3339(execution.started_at),
            "finished_at": None if execution.finished_at is None else to_rfc3339(execution.finished_at),
            "lateness_ms": execution.lateness_ms,
            "error": execution.error,
        },
    }
    if job.outcome is not None and event in (NotifyEvent.FAILED, NotifyEvent.DEAD_LETTERED):
        data["consecutive_failures"] = job.outcome.consecutive_failures
    if event is NotifyEvent.LATE:
        data["late_after_seconds"] = rule.late_after_seconds
    return {
        "id": message_id(execution.id, event),
        "type": f"execution.{event.value}",
        "timestamp": to_rfc3339(at),
        "data": data,
    }


@dataclass(frozen=True)
class Notification:
    """One message of the notification queue: an event of an execution, for one rule's target."""

    id: str
    event: NotifyEvent
    rule: int
    to: str
    job_id: str
    execution_id: str
    scheduled_at: datetime
    payload: dict[str, Any] = field(default_factory=dict)

    def to_body(self) -> str:
        return json.dumps(
            {
                "v": 1,
                "id": self.id,
                "event": self.event.value,
                "rule": self.rule,
                "to": self.to,
                "job_id": self.job_id,
                "execution_id": self.execution_id,
                "scheduled_ms": to_epoch_ms(self.scheduled_at),
                "payload": self.payload,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_body(cls, body: str) -> Notification:
        data = json.loads(body)
        return cls(
            id=str(data["id"]),
            event=NotifyEvent(data["event"]),
            rule=int(data["rule"]),
            to=str(data["to"]),
            job_id=str(data["job_id"]),
            execution_id=str(data["execution_id"]),
            scheduled_at=from_epoch_ms(int(data["scheduled_ms"])),
            payload=dict(data["payload"]),
        )


def notifications(
    job: Job, execution: Execution, at: datetime, pick: Callable[[NotifyRule], Iterable[NotifyEvent]]
) -> list[Notification]:
    """The job's notifications of this execution: for each rule, one per event `pick` finds in it."""
    found = []
    for index, rule in enumerate(job.notify):
        for event in pick(rule):
            found.append(
                Notification(
                    id=message_id(execution.id, event),
                    event=event,
                    rule=index,
                    to=rule.to,
                    job_id=job.id,
                    execution_id=execution.id,
                    scheduled_at=execution.scheduled_at,
                    payload=payload(job, execution, event, rule, at),
                )
            )
    return found


class Outbox:
    """Sends notifications to the stack's notification queue, ten a call side by side."""

    def __init__(self, sqs: Any, queue_url: str, attempts: int = 4) -> None:
        self._sqs = sqs
        self.url = queue_url
        self._attempts = attempts

    def send(self, messages: Sequence[Notification]) -> None:
        """Raises RetryableStoreError if some could not be sent (the caller tries again later)."""
        if not messages:
            return
        if not self.url:
            logger.warning(
                "no notification queue configured; notifications dropped", extra={"count": len(messages)}
            )
            return
        unsent = [m for failed in parallel_map(self._send_batch, chunks(list(messages), 10)) for m in failed]
        if unsent:
            raise RetryableStoreError(f"{len(unsent)} notifications could not be queued")

    def _send_batch(self, batch: Sequence[Notification]) -> list[Notification]:
        pending = {str(i): message for i, message in enumerate(batch)}
        for _ in range(self._attempts):
            entries = [{"Id": key, "MessageBody": message.to_body()} for key, message in pending.items()]
            try:
                response = self._sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            except (ClientError, BotoCoreError):
                response = {"Failed": [{"Id": key} for key in pending]}
            pending = {f["Id"]: pending[f["Id"]] for f in response.get("Failed", [])}
            if not pending:
                break
        return list(pending.values())


# ------------------------------------------------------------------------------------ delivery
class Handled(Enum):
    DONE = "done"  # delete the message
    LATER = "later"  # it comes back when the visibility set for it ends


class DeliveryFailed(Exception):
    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Notifier:
    """Delivers one notification message (the notifier function's record handler)."""

    def __init__(
        self,
        store: Store,
        sqs: Any,
        queue_url: str,
        clock: Clock,
        policy: NotifyPolicy,
        *,
        resolver: Resolver,
        aws_clients: AwsClients | None = None,
    ) -> None:
        self._store = store
        self._sqs = sqs
        self._url = queue_url
        self._clock = clock
        self._policy = policy
        self._resolver = resolver
        self._aws_clients = aws_clients

    def deliver(self, notification: Notification, receipt_handle: str, receive_count: int) -> Handled:
        attempt = max(1, receive_count)
        body = json.dumps(notification.payload, separators=(",", ":")).encode()
        try:
            if notification.to.startswith(("http://", "https://")):
                self._webhook(notification, attempt, body)
            elif ":sns:" in notification.to:
                self._publish(notification, body)
            else:
                self._put_event(notification, body)
        except DeliveryFailed as exc:
            error = str(exc)[:MAX_ERROR_CHARS]
            if exc.retryable and attempt < MAX_ATTEMPTS:
                delay = RETRY_DELAYS[attempt - 1]
                self._record(notification, DeliveryStatus.RETRYING, attempt, error, delay)
                logger.info(
                    "notification will retry",
                    extra={
                        "notification": notification.id,
                        "to": notification.to,
                        "error": error,
                        "delay_seconds": delay,
                    },
                )
                self._sqs.change_message_visibility(
                    QueueUrl=self._url,
                    ReceiptHandle=receipt_handle,
                    VisibilityTimeout=min(MAX_VISIBILITY_SECONDS, delay),
                )
                return Handled.LATER
            self._record(notification, DeliveryStatus.FAILED, attempt, error)
            metrics.add_metric(name=NOTIFICATIONS_FAILED, unit="Count", value=1)
            logger.warning(
                "notification failed",
                extra={"notification": notification.id, "to": notification.to, "error": error},
            )
            return Handled.DONE
        self._record(notification, DeliveryStatus.DELIVERED, attempt)
        metrics.add_metric(name=NOTIFICATIONS_DELIVERED, unit="Count", value=1)
        logger.info("notification delivered", extra={"notification": notification.id, "to": notification.to})
        return Handled.DONE

    def _record(
        self,
        notification: Notification,
        status: DeliveryStatus,
        attempt: int,
        error: str | None = None,
        delay: int = 0,
    ) -> None:
        now = self._clock.now()
        self._store.deliveries.record(
            notification.job_id,
            notification.scheduled_at,
            notification.execution_id,
            Delivery(
                event=notification.event,
                rule=notification.rule,
                to=notification.to,
                status=status,
                attempts=attempt,
                at=now,
                error=error,
                next_attempt_at=now + timedelta(seconds=delay) if delay else None,
            ),
        )

    def _webhook(self, notification: Notification, attempt: int, body: bytes) -> None:
        # The `http` task's request, signed with the job's current keys (read now: a rotation since the
        # event signs with the new secret), its address checked after every lookup.
        job = self._store.jobs.get(notification.job_id)
        keys = () if job is None or job.signing is None else job.signing.active(self._clock.now())
        context = TaskContext(
            job_id=notification.job_id,
            execution_id=notification.execution_id,
            scheduled_at=notification.scheduled_at,
            attempt=attempt,
            timeout_seconds=WEBHOOK_TIMEOUT_SECONDS,
            clock=self._clock,
            policy=tasks.TaskPolicy(allowed_networks=self._policy.allowed_networks),
            resolver=self._resolver,
            signing_keys=keys,
            message_id=notification.id,
        )
        spec = TaskSpec(
            type="http", params={"url": notification.to, "method": "POST", "body": notification.payload}
        )
        try:
            tasks.run_given(spec, context)  # (not tasks.run: the payload is not a template)
        except TaskFailed as exc:
            raise DeliveryFailed(str(exc), retryable=exc.retryable) from exc
        except ValidationError as exc:  # a target the `http` task cannot call (not a valid URL)
            raise DeliveryFailed(
                f"not a URL the webhook can call: {exc.errors()[0]['msg']}", retryable=False
            ) from exc

    def _allowed(self, notification: Notification) -> None:
        # (Checked when the job was created; checked again here: the deployment's list may have changed.)
        if not target_arns.is_allowed(notification.to, self._policy.targets):
            raise DeliveryFailed(f"the deployment no longer allows {notification.to}", retryable=False)
        if self._aws_clients is None:
            raise DeliveryFailed("no AWS clients configured", retryable=False)

    def _publish(self, notification: Notification, body: bytes) -> None:
        self._allowed(notification)
        assert self._aws_clients is not None
        client = self._aws_clients("sns", target_arns.region(notification.to), AWS_TIMEOUT_SECONDS)
        request: dict[str, Any] = {
            "TopicArn": notification.to,
            "Message": body.decode(),
            "MessageAttributes": {
                "type": {"DataType": "String", "StringValue": str(notification.payload.get("type", ""))},
                "job_id": {"DataType": "String", "StringValue": notification.job_id},
            },
        }
        if notification.to.endswith(".fifo"):
            request.update(MessageGroupId=notification.job_id, MessageDeduplicationId=notification.id)
        _aws_call(lambda: client.publish(**request))

    def _put_event(self, notification: Notification, body: bytes) -> None:
        self._allowed(notification)
        assert self._aws_clients is not None
        client = self._aws_clients("events", target_arns.region(notification.to), AWS_TIMEOUT_SECONDS)
        entry = {
            "Source": SOURCE,
            "DetailType": f"Punctual {notification.payload.get('type', 'notification')}",
            "Detail": body.decode(),
            "EventBusName": notification.to,
            "Resources": [],
        }
        answer = _aws_call(lambda: client.put_events(Entries=[entry]))
        if answer.get("FailedEntryCount"):
            failed = (answer.get("Entries") or [{}])[0]
            code = str(failed.get("ErrorCode", ""))
            raise DeliveryFailed(
                f"{code}: {failed.get('ErrorMessage', '')}", retryable=code not in _PERMANENT_AWS_ERRORS
            )


def _aws_call(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        raise DeliveryFailed(f"{code}: {exc}", retryable=code not in _PERMANENT_AWS_ERRORS) from exc
    except BotoCoreError as exc:  # a connection error, a timeout
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}", retryable=True) from exc
