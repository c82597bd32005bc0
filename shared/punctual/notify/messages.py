"""Job notifications, what is sent: a job's `notify` rules checked against what the deployment may
reach, the events an execution makes under each rule, what a notification says, and the sending of
its messages to the stack's notification queue (`Outbox`).

The worker and the dead-letter handler build and send these after recording an execution's outcome;
the API checks the rules when a job is written. Their delivery is punctual.notify.delivery's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from punctual.domain.errors import InvalidRequest, RetryableStoreError
from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import Job
from punctual.domain.policies import NotifyEvent, NotifyRule, TargetKind
from punctual.platform import target_arns
from punctual.platform.concurrency import chunks, parallel_map
from punctual.platform.observability import logger
from punctual.platform.timefmt import from_epoch_ms, to_epoch_ms, to_rfc3339
from punctual.tasks.netguard import AddressRefused, BadUrl, check_url


@dataclass(frozen=True)
class NotifyPolicy:
    """What this deployment lets notifications reach, from its settings: webhooks as the `http` task
    (`webhook_allowed_networks`), SNS topics and buses by ARN pattern (`notification_targets`)."""

    allowed_networks: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


def check_rules(rules: Sequence[NotifyRule], policy: NotifyPolicy) -> tuple[NotifyRule, ...]:
    """Refuse (InvalidRequest naming `notify[i].to`) a target this deployment may not reach: a webhook
    URL the `http` task's guard refuses (not a valid absolute http or https URL, a literal private,
    loopback or link-local address, a name meaning this machine; its other names are checked when
    resolved, at each delivery), or an ARN no pattern of `notification_targets` matches."""
    for i, rule in enumerate(rules):
        where = f"notify[{i}].to"
        if rule.kind is TargetKind.WEBHOOK:
            try:
                check_url(rule.to, policy.allowed_networks)
            except (BadUrl, AddressRefused) as exc:
                raise InvalidRequest(f"{where}: {exc}", field=where) from None
        elif not target_arns.is_allowed(rule.to, policy.targets):
            allowed = ", ".join(policy.targets) or "none"
            raise InvalidRequest(
                f"{where}: this deployment does not notify {rule.to} (its notification_targets allow: "
                f"{allowed})",
                field=where,
            )
    return tuple(rules)


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
