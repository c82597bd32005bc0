"""Job notifications, their delivery: the notifier function's handling of one notification message.

It calls the webhook (signed when the job has a signing secret), publishes to the SNS topic or puts
the event on the EventBridge bus, and keeps what happened on the execution's item (`Delivery`).
A failed attempt that another could cure comes back after `RETRY_DELAYS` by the message's
visibility, up to `MAX_ATTEMPTS`; other answers fail the delivery at once. What is sent, and when,
is punctual.notify.messages'.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from enum import Enum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from punctual import tasks
from punctual.domain.executions import Delivery, DeliveryStatus
from punctual.domain.models import TaskSpec
from punctual.notify.messages import Notification, NotifyPolicy
from punctual.platform import target_arns
from punctual.platform.aws_limits import SQS_MAX_VISIBILITY_SECONDS
from punctual.platform.clock import Clock
from punctual.platform.observability import NOTIFICATIONS_DELIVERED, NOTIFICATIONS_FAILED, logger, metrics
from punctual.ports.store import Store
from punctual.tasks import AwsClients, TaskContext, TaskFailed
from punctual.tasks.netguard import Resolver

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
                    VisibilityTimeout=min(SQS_MAX_VISIBILITY_SECONDS, delay),
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
