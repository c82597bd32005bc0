"""Dashboard and alarms: Punctual's own metrics (Powertools) beside the AWS services' metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.api import ApiMetrics
from punctual.platform import observability as obs
from punctual.platform import resources

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)


def punctual_metric(name: str, statistic: str = "Sum", period: Duration = MINUTE) -> cloudwatch.Metric:
    """A metric the functions emit with Powertools (namespace Punctual, dimension service)."""
    return cloudwatch.Metric(
        namespace=obs.NAMESPACE,
        metric_name=name,
        dimensions_map={"service": obs.SERVICE},
        statistic=statistic,
        period=period,
    )


def _sum_of(
    metrics: Mapping[str, cloudwatch.IMetric], label: str, period: Duration
) -> cloudwatch.MathExpression:
    return cloudwatch.MathExpression(
        expression=" + ".join(metrics), using_metrics=dict(metrics), label=label, period=period
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        functions: Mapping[str, lambda_.Function],
        table: dynamodb.Table,
        work_queue: sqs.Queue,
        dead_letter_queue: sqs.Queue,
        api_metrics: ApiMetrics,
        notify_dead_letter_queue: sqs.Queue | None = None,
        dropped_events_queue: sqs.Queue | None = None,
        alarm_email: str | None,
        lookahead_seconds: int,
        burst_forecast: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self._prefix = Stack.of(self).stack_name
        self.topic = sns.Topic(self, "AlarmTopic", display_name="Punctual alarms", enforce_ssl=True)
        # The topic has its own policy (SSL only), so CloudWatch's right to publish must be stated.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        scanner = functions["scanner"]
        throttles = _sum_of(
            {key: fn.metric_throttles(statistic="Sum", period=FIVE_MINUTES) for key, fn in functions.items()},
            "Lambda throttles",
            FIVE_MINUTES,
        )
        # Read and write throttles apart: an alarm's math takes at most 10 metrics, and the table with
        # its indexes has more than that of both kinds together.
        table_metrics = self._table_throttle_metrics(table)
        read_throttles, write_throttles = (
            _sum_of(
                {key: metric for key, metric in table_metrics.items() if key.startswith(kind)},
                f"DynamoDB {kind} throttle events",
                FIVE_MINUTES,
            )
            for kind in ("read", "write")
        )
        table_throttles = _sum_of(
            {"reads": read_throttles, "writes": write_throttles}, "DynamoDB throttle events", FIVE_MINUTES
        )
        dead_letter_depth = _sum_of(
            {
                "visible": dead_letter_queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=MINUTE
                ),
                "in_flight": dead_letter_queue.metric_approximate_number_of_messages_not_visible(
                    statistic="Maximum", period=MINUTE
                ),
            },
            "Dead-letter queue depth",
            MINUTE,
        )

        # ApproximateAgeOfOldestMessage counts from the send, and the scanner sends each message up to
        # the lookahead ahead of its time (DelaySeconds holds it): in normal operation the oldest
        # message is about lookahead seconds old. Only the age beyond that is the workers' delay, and
        # they get a minute of it.
        self.oldest_message_threshold = lookahead_seconds + 60
        gte = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        gt = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        self.alarms = [
            self._alarm(
                "DeadLetterQueueNotEmpty",
                dead_letter_depth,
                threshold=1,
                comparison=gte,
                evaluation_periods=5,
                description="The dead-letter queue has held messages for 5 minutes: the dead-letter "
                "handler cannot record them. Check its logs.",
            ),
            self._alarm(
                "ExecutionsDeadLettered",
                punctual_metric(obs.DEAD_LETTERED, period=FIVE_MINUTES),
                threshold=1,
                comparison=gte,
                description="An execution's message exhausted its receives and reached the dead-letter queue.",
            ),
            self._alarm(
                "ExecutionsQuarantined",
                punctual_metric(obs.EXECUTIONS_QUARANTINED, period=FIVE_MINUTES),
                threshold=1,
                comparison=gte,
                description="A job's item cannot be read, so its executions were set aside: fix the job, "
                "then run scripts/quarantine.py --stack STACK release JOB_ID. The alarm returns to OK after 5 minutes "
                "without new ones; `scripts/quarantine.py --stack STACK list` shows what is still set aside.",
            ),
            self._alarm(
                "LatenessP99",
                punctual_metric(obs.LATENESS_MS, statistic="p99"),
                threshold=2000,
                comparison=gt,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                description="Executions start more than 2 s after their scheduled time (p99).",
            ),
            self._alarm(
                "ScannerErrors",
                scanner.metric_errors(statistic="Sum", period=MINUTE),
                threshold=1,
                comparison=gte,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                description="The scanner failed in 2 of the last 3 ticks: due executions are not enqueued.",
            ),
            self._alarm(
                "ScannerDuration",
                scanner.metric_duration(statistic="Maximum", period=MINUTE),
                threshold=45_000,
                comparison=gt,
                description="A scanner run took longer than 45 s; runs must end within the 1-minute tick.",
            ),
            self._alarm(
                "ScannerBehind",
                punctual_metric(obs.SCANNER_BEHIND_SECONDS, statistic="Maximum"),
                threshold=120,
                comparison=gt,
                evaluation_periods=3,
                description="A scanner shard has been more than 2 minutes behind for 3 ticks: due "
                "executions wait (a backlog after an outage that does not shrink, or markers it cannot "
                "set aside). Check the scanner's logs.",
            ),
            self._alarm(
                "WorkQueueOldestMessageAge",
                work_queue.metric_approximate_age_of_oldest_message(statistic="Maximum", period=MINUTE),
                threshold=self.oldest_message_threshold,
                comparison=gt,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                description="The oldest work queue message is older than lookahead + 60 s "
                f"({self.oldest_message_threshold} s): workers are falling behind.",
            ),
            self._alarm(
                "LambdaThrottles",
                throttles,
                threshold=1,
                comparison=gte,
                description="A Punctual function was throttled (account or function concurrency limit).",
            ),
            self._alarm(
                "DynamoDbReadThrottles",
                read_throttles,
                threshold=1,
                comparison=gte,
                description="DynamoDB throttled reads of the Punctual table or its indexes.",
            ),
            self._alarm(
                "DynamoDbWriteThrottles",
                write_throttles,
                threshold=1,
                comparison=gte,
                description="DynamoDB throttled writes to the Punctual table or its indexes.",
            ),
        ]
        for name, queue, description in (
            (
                "NotifyDeadLetterQueueNotEmpty",
                notify_dead_letter_queue,
                "A job notification's message reached the notification dead-letter queue: the notifier "
                "failed on it at every receive (its logs say why). Deliveries it gives up on are "
                "recorded on their executions instead, and counted in NotificationsFailed.",
            ),
            (
                "ExecutionEventsDropped",
                dropped_events_queue,
                "The table stream gave up on a batch of execution status changes (after its retries, "
                "or a day): their events are not on the bus. The message on the execution events' "
                "failure queue names the stream records (the function's logs say why).",
            ),
        ):
            if queue is not None:
                held = queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=FIVE_MINUTES
                )
                self.alarms.append(
                    self._alarm(name, held, threshold=1, comparison=gte, description=description)
                )
        if burst_forecast:
            self.alarms.append(
                self._alarm(
                    "BurstOverCapacity",
                    punctual_metric(obs.BURST_LOAD_PERCENT, statistic="Maximum"),
                    threshold=100,
                    comparison=gt,
                    description="A coming minute holds more due executions than the deployment can start "
                    "on time (worker concurrency, Lambda concurrency or table write units; the scanner's "
                    "log says which minute): raise the limit, or some of them will start late.",
                )
            )
        self.dashboard = self._dashboard(
            functions, table, work_queue, dead_letter_queue, api_metrics, throttles, table_throttles
        )

    def _alarm(
        self,
        id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        description: str,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int | None = None,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            id,
            alarm_name=f"{self._prefix}-{id}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm or evaluation_periods,
            # No data means no traffic (no executions, no messages), not trouble.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        action = cloudwatch_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

    @staticmethod
    def _table_throttle_metrics(table: dynamodb.Table) -> dict[str, cloudwatch.IMetric]:
        """Read and write throttle events of the table and of each index (reported apart)."""
        metrics: dict[str, cloudwatch.IMetric] = {}
        scopes: list[tuple[str, dict[str, str]]] = [("table", {"TableName": table.table_name})]
        scopes += [
            (index.name, {"TableName": table.table_name, "GlobalSecondaryIndexName": index.name})
            for index in resources.TABLE.indexes
        ]
        for key, dimensions in scopes:
            for kind in ("Read", "Write"):
                metrics[f"{kind.lower()}_{key}"] = cloudwatch.Metric(
                    namespace="AWS/DynamoDB",
                    metric_name=f"{kind}ThrottleEvents",
                    dimensions_map=dimensions,
                    statistic="Sum",
                    period=FIVE_MINUTES,
                    label=f"{kind} throttles ({key})",
                )
        return metrics

    def _dashboard(
        self,
        functions: Mapping[str, lambda_.Function],
        table: dynamodb.Table,
        work_queue: sqs.Queue,
        dead_letter_queue: sqs.Queue,
        api_metrics: ApiMetrics,
        throttles: cloudwatch.IMetric,
        table_throttles: cloudwatch.IMetric,
    ) -> cloudwatch.Dashboard:
        def graph(
            title: str,
            left: Sequence[cloudwatch.IMetric],
            *,
            right: Sequence[cloudwatch.IMetric] = (),
            line: float | None = None,
            width: int = 8,
        ) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=title,
                left=list(left),
                right=list(right),
                width=width,
                height=6,
                left_annotations=[cloudwatch.HorizontalAnnotation(value=line, label="alarm")]
                if line is not None
                else None,
            )

        scanner = functions["scanner"]
        execution_metrics = (
            obs.EXECUTIONS_ENQUEUED,
            obs.EXECUTIONS_STARTED,
            obs.EXECUTIONS_SUCCEEDED,
            obs.EXECUTIONS_FAILED,
            obs.EXECUTIONS_RETRIED,
            obs.EXECUTIONS_SKIPPED,
            obs.DEAD_LETTERED,
        )
        dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=self._prefix, default_interval=Duration.hours(3)
        )
        dashboard.add_widgets(
            graph("Executions", [punctual_metric(name) for name in execution_metrics], width=12),
            graph("Jobs created", [punctual_metric(obs.JOBS_CREATED)], width=6),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=6, height=6),
        )
        dashboard.add_widgets(
            graph(
                "Lateness (ms)",
                [punctual_metric(obs.LATENESS_MS, statistic=s) for s in ("p50", "p90", "p99", "Maximum")],
                line=2000,
            ),
            graph(
                "Scanner duration (ms)",
                [
                    punctual_metric(obs.SCANNER_DURATION_MS, statistic="Average"),
                    punctual_metric(obs.SCANNER_DURATION_MS, statistic="Maximum"),
                    scanner.metric_duration(statistic="Maximum", period=MINUTE),
                ],
                line=45_000,
            ),
            graph(
                "Scanner behind now (s)",
                [punctual_metric(obs.SCANNER_BEHIND_SECONDS, statistic="Maximum")],
                line=120,
            ),
            graph(
                "Oldest message age (s)",
                [
                    work_queue.metric_approximate_age_of_oldest_message(statistic="Maximum", period=MINUTE),
                    dead_letter_queue.metric_approximate_age_of_oldest_message(
                        statistic="Maximum", period=MINUTE
                    ),
                ],
                line=self.oldest_message_threshold,
            ),
        )
        dashboard.add_widgets(
            graph(
                "Work queue depth",
                [
                    work_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=MINUTE
                    ),
                    work_queue.metric_approximate_number_of_messages_not_visible(
                        statistic="Maximum", period=MINUTE
                    ),
                    work_queue.metric(
                        "ApproximateNumberOfMessagesDelayed", statistic="Maximum", period=MINUTE
                    ),
                ],
            ),
            graph(
                "Dead-letter queue depth",
                [
                    dead_letter_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=MINUTE
                    ),
                    dead_letter_queue.metric_approximate_number_of_messages_not_visible(
                        statistic="Maximum", period=MINUTE
                    ),
                ],
            ),
            graph("Throttles", [throttles, table_throttles]),
        )
        dashboard.add_widgets(
            graph(
                "Lambda errors",
                [
                    fn.metric_errors(statistic="Sum", period=MINUTE, label=key)
                    for key, fn in functions.items()
                ],
            ),
            graph(
                "Lambda throttles",
                [
                    fn.metric_throttles(statistic="Sum", period=MINUTE, label=key)
                    for key, fn in functions.items()
                ],
            ),
            graph(
                "Lambda duration p99 (ms)",
                [
                    fn.metric_duration(statistic="p99", period=MINUTE, label=key)
                    for key, fn in functions.items()
                ],
            ),
        )
        dashboard.add_widgets(
            graph(
                "DynamoDB throttle events",
                list(self._table_throttle_metrics(table).values()),
                width=12,
            ),
            graph(
                "API requests and errors",
                [
                    api_metrics.metric_count(statistic="Sum", period=MINUTE),
                    api_metrics.metric_client_error(statistic="Sum", period=MINUTE),
                    api_metrics.metric_server_error(statistic="Sum", period=MINUTE),
                ],
                right=[api_metrics.metric_latency(statistic="p99", period=MINUTE)],
                width=12,
            ),
        )
        return dashboard
