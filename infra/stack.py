"""Punctual's one stack: storage, queues, API, scheduler tick, workers and monitoring."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, RemovalPolicy, Stack
from constructs import Construct

from infra.components.api import Api
from infra.components.functions import FunctionFactory
from infra.components.monitoring import Monitoring
from infra.components.notifications import ExecutionEvents, Notifications
from infra.components.queues import Queues
from infra.components.storage import Storage
from infra.components.ticker import TICK, SchedulerTick
from infra.components.workers import Workers
from infra.settings import DeploySettings
from punctual.notify import execution_events
from punctual.platform import resources, target_arns
from punctual.platform.config import Settings

# Stack output keys; scripts/smoke.py reads API_URL_OUTPUT.
API_URL_OUTPUT = "ApiUrl"


class PunctualStack(Stack):
    def __init__(self, scope: Construct, id: str, *, settings: DeploySettings, **kwargs: Any) -> None:
        super().__init__(scope, id, description="Punctual: serverless job scheduler", **kwargs)
        removal_policy = RemovalPolicy.RETAIN if settings.deletion_protection else RemovalPolicy.DESTROY

        storage = Storage(
            self,
            "Storage",
            deletion_protection=settings.deletion_protection,
            provisioned=settings.provisioned_capacity(),
            stream=settings.execution_events != execution_events.OFF,
            list_indexes=settings.list_indexes,
            retired_indexes=settings.retired_indexes,
        )
        queues = Queues(self, "Queues")
        factory = FunctionFactory(
            self,
            environment={
                resources.ENV_TABLE_NAME: storage.table.table_name,
                resources.ENV_QUEUE_URL: queues.work_queue.queue_url,
                resources.ENV_DLQ_URL: queues.dead_letter_queue.queue_url,
                resources.ENV_NOTIFY_QUEUE_URL: queues.notify_queue.queue_url,
                **function_environment(settings),
            },
            log_level=settings.log_level,
            log_retention_days=settings.log_retention_days,
            powertools_layer_version=settings.powertools_layer_version,
            removal_policy=removal_policy,
        )
        api = Api(
            self,
            "Api",
            factory=factory,
            storage=storage,
            queues=queues,
            api_type=settings.api_type,
            throttle_rate=settings.api_throttle_rate,
            throttle_burst=settings.api_throttle_burst,
            log_retention_days=settings.log_retention_days,
            removal_policy=removal_policy,
        )
        tick = SchedulerTick(
            self,
            "SchedulerTick",
            factory=factory,
            storage=storage,
            queues=queues,
            fanout=settings.scanner_fanout,
        )
        workers = Workers(
            self,
            "Workers",
            factory=factory,
            storage=storage,
            queues=queues,
            max_concurrency=settings.worker_max_concurrency,
            lambda_functions=settings.lambda_functions,
            targets={target.setting: getattr(settings, target.setting) for target in target_arns.TARGETS},
            pollers=settings.worker_pollers(),
        )
        if settings.worker_prescale:
            workers.allow_setting_pollers(tick.function)
        Notifications(
            self,
            "Notifications",
            factory=factory,
            storage=storage,
            queues=queues,
            senders=[workers.worker, workers.dead_letter],
            targets=settings.notification_targets,
        )
        events_for_executions = None
        if settings.execution_events != execution_events.OFF:
            events_for_executions = ExecutionEvents(
                self, "ExecutionEvents", factory=factory, storage=storage, mode=settings.execution_events
            )
        monitoring = Monitoring(
            self,
            "Monitoring",
            functions=factory.functions,
            table=storage.table,
            work_queue=queues.work_queue,
            dead_letter_queue=queues.dead_letter_queue,
            notify_dead_letter_queue=queues.notify_dead_letter_queue,
            dropped_events_queue=None if events_for_executions is None else events_for_executions.dropped,
            api_metrics=api.metrics,
            alarm_email=settings.alarm_email,
            lookahead_seconds=settings.lookahead_seconds,
            burst_forecast=settings.burst_forecast_minutes > 0,
        )

        CfnOutput(self, API_URL_OUTPUT, value=api.url, description="Base URL of the Punctual API")
        CfnOutput(self, "TableName", value=storage.table.table_name)
        CfnOutput(self, "WorkQueueUrl", value=queues.work_queue.queue_url)
        CfnOutput(self, "DeadLetterQueueUrl", value=queues.dead_letter_queue.queue_url)
        CfnOutput(self, "AlarmTopicArn", value=monitoring.topic.topic_arn)
        CfnOutput(
            self,
            "DashboardUrl",
            value=f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            f"#dashboards:name={monitoring.dashboard.dashboard_name}",
        )


def function_environment(settings: DeploySettings) -> dict[str, str]:
    """The functions' configuration (read by punctual.platform.config.Settings.from_env)."""
    environment = {
        "PUNCTUAL_SHARD_COUNT": str(settings.shard_count),
        "PUNCTUAL_LOOKAHEAD_SECONDS": str(settings.lookahead_seconds),
        "PUNCTUAL_TICK_SECONDS": str(int(TICK.to_seconds())),
        "PUNCTUAL_RETENTION_DAYS": str(settings.retention_days),
    }
    if settings.webhook_allowed_networks:
        environment["PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS"] = ",".join(settings.webhook_allowed_networks)
    if settings.lambda_functions:
        environment["PUNCTUAL_LAMBDA_FUNCTIONS"] = ",".join(settings.lambda_functions)
    for target in target_arns.TARGETS:
        if getattr(settings, target.setting):
            environment[target.env] = ",".join(getattr(settings, target.setting))
    if settings.task_cache_seconds != 10:
        environment["PUNCTUAL_TASK_CACHE_SECONDS"] = str(settings.task_cache_seconds)
    if settings.notification_targets:
        environment["PUNCTUAL_NOTIFICATION_TARGETS"] = ",".join(settings.notification_targets)
    # What the scanner chooses a crowded instant's lead from, and how early the worker holds a message.
    functions = settings.function_settings()
    environment["PUNCTUAL_LEAD_MAX_SECONDS"] = str(functions.lead_max_seconds)
    if functions.worker_ready_pollers:
        environment["PUNCTUAL_WORKER_READY_POLLERS"] = str(functions.worker_ready_pollers)
    if functions.burst_worker_concurrency != Settings().burst_worker_concurrency:
        environment["PUNCTUAL_BURST_WORKER_CONCURRENCY"] = str(functions.burst_worker_concurrency)
    if settings.burst_forecast_minutes:
        burst = settings.function_settings()
        environment.update(
            {
                "PUNCTUAL_BURST_FORECAST_MINUTES": str(burst.burst_forecast_minutes),
                "PUNCTUAL_BURST_POLLERS_FLOOR": str(burst.burst_pollers_floor),
                "PUNCTUAL_BURST_POLLERS_CEILING": str(burst.burst_pollers_ceiling),
                "PUNCTUAL_BURST_WORKER_CONCURRENCY": str(burst.burst_worker_concurrency),
                "PUNCTUAL_BURST_LAMBDA_CONCURRENCY": str(burst.burst_lambda_concurrency),
                "PUNCTUAL_BURST_TABLE_WRITE_UNITS": str(burst.burst_table_write_units),
            }
        )
    return environment
