"""The scheduler tick: an EventBridge rule runs the scanner every minute."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.functions import FunctionFactory
from infra.components.queues import Queues
from infra.components.storage import Storage
from punctual.platform import resources

TICK = Duration.minutes(1)


class SchedulerTick(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        factory: FunctionFactory,
        storage: Storage,
        queues: Queues,
        fanout: int,
    ) -> None:
        super().__init__(scope, id)
        self.function = factory.create(
            self,
            "Scanner",
            "scanner",
            description="Punctual scanner: enqueues the executions due within the lookahead",
            # Finish before the next tick starts; the duration alarm fires well before this.
            timeout=TICK.minus(Duration.seconds(5)),
            # A full vCPU: the scanner is CPU-bound in boto3 (bench/scanner_throughput.py), and an
            # idle tick is short, so the larger size costs little.
            memory_size=resources.SCANNER_MEMORY_MB,
            environment={"PUNCTUAL_SCANNER_FANOUT": str(fanout)},
        )
        storage.grant_read_write(self.function)
        queues.work_queue.grant_send_messages(self.function)
        # Applies to the tick and to the fan-out's shard-group invocations alike. A failed or late
        # one is not retried: the next tick, a minute later, covers the same due buckets (the
        # checkpoints are per shard), and a retry would only race it.
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=TICK)
        self.rule = events.Rule(
            self,
            "Tick",
            description="Punctual scheduler tick",
            schedule=events.Schedule.rate(TICK),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=TICK)],
        )
        if fanout > 1:
            self._allow_invoking_itself()

    def _allow_invoking_itself(self) -> None:
        """The fanned-out tick invokes this same function once per shard group.

        Its own unqualified ARN only: the rule targets it, so that is the ARN the tick is invoked
        by and invokes again (`context.invoked_function_arn`). The statement is a policy of its
        own, not the role's default policy: the function depends on that one, and a reference to
        its ARN there would be a dependency cycle.
        """
        policy = iam.Policy(
            self,
            "ScannerFanOut",
            roles=[self.function.role] if self.function.role else None,
            statements=[
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"],
                    resources=[self.function.function_arn],
                )
            ],
        )
        # The first tick should find the permission in place.
        self.rule.node.add_dependency(policy)
