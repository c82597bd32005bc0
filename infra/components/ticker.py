"""The scheduler tick: an EventBridge rule runs the scanner every minute."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.components.functions import FunctionFactory
from infra.components.queues import Queues
from infra.components.storage import Storage

TICK = Duration.minutes(1)


class SchedulerTick(Construct):
    def __init__(
        self, scope: Construct, id: str, *, factory: FunctionFactory, storage: Storage, queues: Queues
    ) -> None:
        super().__init__(scope, id)
        self.function = factory.create(
            self,
            "Scanner",
            "scanner",
            description="Punctual scanner: enqueues the executions due within the lookahead",
            # Finish before the next tick starts; the duration alarm fires well before this.
            timeout=TICK.minus(Duration.seconds(5)),
        )
        storage.grant_read_write(self.function)
        queues.work_queue.grant_send_messages(self.function)
        # A failed or late tick is not retried: the next tick, a minute later, covers the same
        # due buckets, and a retry would only race it.
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=TICK)
        self.rule = events.Rule(
            self,
            "Tick",
            description="Punctual scheduler tick",
            schedule=events.Schedule.rate(TICK),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=TICK)],
        )
