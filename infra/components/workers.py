"""The worker (work queue consumer) and the dead-letter handler (dead-letter queue consumer)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.components.functions import FunctionFactory
from infra.components.queues import Queues
from infra.components.storage import Storage
from punctual.platform import aws_limits as sizing
from punctual.platform import lambda_arns, resources, target_arns

# The worker takes one message an invocation: a pack of the executions of one instant (and shard),
# its unit; packs spread over execution environments.
WORK_BATCH_SIZE = sizing.WORKER_BATCH
DEAD_LETTER_BATCH_SIZE = 10


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
        lambda_functions: tuple[str, ...] = (),
        targets: dict[str, tuple[str, ...]] | None = None,
        pollers: tuple[int, int] | None = None,
    ) -> None:
        """`pollers` (minimum, maximum) puts the worker's event source mapping in provisioned mode,
        which has no maximum concurrency: its pollers bound it (10 concurrent invokes each)."""
        super().__init__(scope, id)
        self.worker = factory.create(
            self,
            "Worker",
            "worker",
            description="Punctual worker: runs due executions from the work queue",
            timeout=Duration.seconds(resources.WORKER_TIMEOUT_SECONDS),
        )
        storage.grant_read_write(self.worker)
        if lambda_functions:
            self._grant_invoke(lambda_functions)
        for target in target_arns.TARGETS:
            patterns = (targets or {}).get(target.setting, ())
            if patterns:
                self._grant_target(target, patterns)
        # Consuming grants ChangeMessageVisibility too: the worker holds early or leased messages.
        scaling: dict[str, Any] = (
            {"max_concurrency": max_concurrency}
            if pollers is None
            else {
                "provisioned_poller_config": lambda_.ProvisionedPollerConfig(
                    minimum_pollers=pollers[0], maximum_pollers=pollers[1]
                )
            }
        )
        self.work_source = event_sources.SqsEventSource(
            queues.work_queue,
            batch_size=WORK_BATCH_SIZE,
            # Precision first: invoke as soon as a message is visible, never wait to fill a batch.
            max_batching_window=Duration.seconds(0),
            report_batch_item_failures=True,
            **scaling,
        )
        self.worker.add_event_source(self.work_source)

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
                batch_size=DEAD_LETTER_BATCH_SIZE,
                report_batch_item_failures=True,
            )
        )

    def allow_setting_pollers(self, function: lambda_.Function) -> None:
        """Let `function` read the work mapping and set its pollers: that one mapping, nothing else."""
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
                resources=[self.work_source.event_source_mapping_arn],
            )
        )
        function.add_environment(resources.ENV_WORKER_MAPPING_ID, self.work_source.event_source_mapping_id)

    def _grant_target(self, target: target_arns.Target, patterns: tuple[str, ...]) -> None:
        """An AWS target task's one action, on the resources its setting allows and nothing else."""
        assert self.worker.role is not None
        self.worker.add_to_role_policy(iam.PolicyStatement(actions=[target.action], resources=list(patterns)))
        for pattern in patterns:
            if "*" in pattern or "?" in pattern:
                Validations.of(self.worker.role).acknowledge(
                    Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{pattern}]",
                        reason=f"The resources the deployment lets the {target.type} task reach (setting "
                        f"{target.setting}).",
                    )
                )

    def _grant_invoke(self, lambda_functions: tuple[str, ...]) -> None:
        """The `lambda` task's functions: those the deployment allows, any version or alias."""
        assert self.worker.role is not None
        allowed = lambda_arns.iam_resources(lambda_functions)
        self.worker.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=allowed)
        )
        for resource in allowed:
            if "*" in resource or "?" in resource:
                Validations.of(self.worker.role).acknowledge(
                    Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{resource}]",
                        reason="The functions the deployment lets the lambda task invoke (setting "
                        "lambda_functions), and their versions and aliases.",
                    )
                )
