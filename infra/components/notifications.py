"""Job notifications (the notification queue and the notifier) and the execution status events
(the table's stream, the execution_events function and the stack's bus)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, CfnOutput, Duration, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.functions import FunctionFactory
from infra.components.queues import Queues
from infra.components.storage import Storage
from punctual.notify import execution_events
from punctual.platform import resources, target_arns
from punctual.store import streams

NOTIFIER_BATCH_SIZE = 10
# The stream's records reach the function in batches of up to this many, within this long: a
# batch's changes of one owner to one status are one event.
EVENTS_BATCH_SIZE = 100
EVENTS_BATCHING_WINDOW = Duration.seconds(1)


class Notifications(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        factory: FunctionFactory,
        storage: Storage,
        queues: Queues,
        senders: Sequence[lambda_.Function],
        targets: tuple[str, ...] = (),
    ) -> None:
        """`senders` queue notifications (the worker, the dead-letter handler); `targets` are the
        deployment's notification_targets: the SNS topics and buses the notifier may reach."""
        super().__init__(scope, id)
        for sender in senders:
            queues.notify_queue.grant_send_messages(sender)
        self.notifier = factory.create(
            self,
            "Notifier",
            "notifier",
            description="Punctual notifier: delivers job notifications (webhooks, SNS, EventBridge)",
            timeout=Duration.seconds(resources.NOTIFIER_TIMEOUT_SECONDS),
        )
        # Reads the job (its signing keys) and records each delivery on its execution.
        storage.grant_read_write(self.notifier)
        # Consuming grants ChangeMessageVisibility too: a retry waits by its message's visibility.
        self.notifier.add_event_source(
            event_sources.SqsEventSource(
                queues.notify_queue, batch_size=NOTIFIER_BATCH_SIZE, report_batch_item_failures=True
            )
        )
        self._grant_targets(targets)

    def _grant_targets(self, targets: tuple[str, ...]) -> None:
        assert self.notifier.role is not None
        for actions, allowed in (
            (["sns:Publish"], target_arns.SNS.patterns_in(targets)),
            (["events:PutEvents"], target_arns.EVENTBRIDGE.patterns_in(targets)),
        ):
            if not allowed:
                continue
            self.notifier.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=allowed))
            for resource in allowed:
                if "*" in resource or "?" in resource:
                    Validations.of(self.notifier.role).acknowledge(
                        Acknowledgment(
                            id=f"AwsSolutions-IAM5[Resource::{resource}]",
                            reason="The notification targets the deployment allows (setting "
                            "notification_targets): jobs' notify rules may name those only.",
                        )
                    )


class ExecutionEvents(Construct):
    """Execution status changes from the table's stream as EventBridge events on a bus of the stack: a
    stream batch's changes grouped by owner and status, each group one event (cut at 64 KB)."""

    def __init__(
        self, scope: Construct, id: str, *, factory: FunctionFactory, storage: Storage, mode: str
    ) -> None:
        super().__init__(scope, id)
        if storage.table.table_stream_arn is None:
            raise ValueError("execution events need the table's stream (Storage(stream=True))")
        self.bus = events.EventBus(self, "Bus", event_bus_name=f"{Stack.of(self).stack_name}-executions")
        self.function = factory.create(
            self,
            "Publisher",
            "execution_events",
            description="Punctual execution events: puts execution status changes on the stack's bus, "
            "grouped by owner and status",
            timeout=Duration.seconds(60),
            memory_size=256,
            environment={
                resources.ENV_EVENT_BUS_NAME: self.bus.event_bus_name,
                "PUNCTUAL_EXECUTION_EVENTS": mode,
            },
        )
        self.bus.grant_put_events_to(self.function)
        # Only the records that write an execution reach the function (the stream carries every
        # item's writes); the store says which those are.
        final = execution_events.FINAL_STATUS_VALUES if mode == execution_events.FINAL else None
        filters = [lambda_.FilterCriteria.filter(pattern) for pattern in streams.record_filters(final)]
        # What the mapping gives up on (a batch still failing after the retries below, or whose
        # records reach a day old) is described here, not dropped without a trace: its shard and
        # sequence numbers (the records themselves may be gone: the stream keeps 24 hours), and an
        # alarm (Monitoring) says it happened.
        self.dropped = sqs.Queue(
            self,
            "Dropped",
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        Validations.of(self.dropped).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="The stream mapping's failure destination: it is itself where failures end up.",
            )
        )
        self.function.add_event_source(
            event_sources.DynamoEventSource(
                storage.table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=EVENTS_BATCH_SIZE,
                max_batching_window=EVENTS_BATCHING_WINDOW,
                # A failed record is retried (from the earliest record of an event not put) for a day,
                # then skipped.
                retry_attempts=100,
                max_record_age=Duration.days(1),
                report_batch_item_failures=True,
                filters=filters,
                on_failure=event_sources.SqsDlq(self.dropped),
            )
        )
        assert self.function.role is not None
        Validations.of(self.function.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray's PutTraceSegments and PutTelemetryRecords and DynamoDB Streams' "
                "ListStreams (which reading the table's stream needs) support no resource-level "
                "permissions.",
            )
        )
        CfnOutput(scope, "ExecutionEventBusName", value=self.bus.event_bus_name)
        CfnOutput(scope, "ExecutionEventBusArn", value=self.bus.event_bus_arn)
