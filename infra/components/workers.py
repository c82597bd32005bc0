"""The worker (work queue consumer) and the dead-letter handler (dead-letter queue consumer)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.components.functions import FunctionFactory
from infra.components.queues import Queues
from infra.components.storage import Storage
from punctual import resources

BATCH_SIZE = 10


class Workers(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        factory: FunctionFactory,
        storage: Storage,
        queues: Queues,
        max_concurrency: int,
    ) -> None:
        super().__init__(scope, id)
        self.worker = factory.create(
            self,
            "Worker",
            "worker",
            description="Punctual worker: runs due executions from the work queue",
            timeout=Duration.seconds(resources.WORKER_TIMEOUT_SECONDS),
        )
        storage.grant_read_write(self.worker)
        # Consuming grants ChangeMessageVisibility too: the worker holds early or leased messages.
        self.worker.add_event_source(
            event_sources.SqsEventSource(
                queues.work_queue,
                batch_size=BATCH_SIZE,
                # Precision first: invoke as soon as a message is visible, never wait to fill a batch.
                max_batching_window=Duration.seconds(0),
                report_batch_item_failures=True,
                max_concurrency=max_concurrency,
            )
        )

        self.dead_letter = factory.create(
            self,
            "DeadLetter",
            "dead_letter",
            description="Punctual dead-letter handler: records executions that exhausted their receives",
            timeout=Duration.seconds(30),
        )
        # Reads the execution and its job, then marks the execution failed.
        storage.grant_read_write(self.dead_letter)
        self.dead_letter.add_event_source(
            event_sources.SqsEventSource(
                queues.dead_letter_queue,
                batch_size=BATCH_SIZE,
                report_batch_item_failures=True,
            )
        )
