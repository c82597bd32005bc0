"""The work queue, the notification queue and their dead-letter queues, built from `punctual.platform.resources`."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from punctual.platform import resources


def _queue(
    scope: Construct,
    id: str,
    definition: resources.QueueDefinition,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
) -> sqs.Queue:
    return sqs.Queue(
        scope,
        id,
        visibility_timeout=Duration.seconds(definition.visibility_timeout_seconds),
        retention_period=Duration.seconds(definition.retention_seconds),
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        dead_letter_queue=dead_letter_queue,
    )


class Queues(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        if resources.WORK_QUEUE.max_receive_count is None:
            raise ValueError("the work queue needs max_receive_count to redrive to the dead-letter queue")
        if resources.WORK_QUEUE.visibility_timeout_seconds < resources.WORKER_TIMEOUT_SECONDS:
            raise ValueError("the work queue's visibility timeout must cover the worker's timeout")
        self.dead_letter_queue = _queue(self, "DeadLetterQueue", resources.DEAD_LETTER_QUEUE)
        self.work_queue = _queue(
            self,
            "WorkQueue",
            resources.WORK_QUEUE,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue,
                max_receive_count=resources.WORK_QUEUE.max_receive_count,
            ),
        )
        # Job notifications wait here for the notifier; its dead-letter queue only takes a message the
        # notifier cannot handle at all (it records a delivery it gives up on, and drops it).
        assert resources.NOTIFY_QUEUE.max_receive_count is not None
        self.notify_dead_letter_queue = _queue(
            self, "NotifyDeadLetterQueue", resources.NOTIFY_DEAD_LETTER_QUEUE
        )
        self.notify_queue = _queue(
            self,
            "NotifyQueue",
            resources.NOTIFY_QUEUE,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.notify_dead_letter_queue,
                max_receive_count=resources.NOTIFY_QUEUE.max_receive_count,
            ),
        )
