"""Builds Punctual's objects from Settings: the one place where the pieces are put together."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from punctual.execution.config import WorkerConfig
from punctual.execution.dead_letters import DeadLetters
from punctual.execution.hooks import RunHooks
from punctual.execution.packs import PackRunner
from punctual.execution.worker import Worker
from punctual.jobs.cursor import Cursors
from punctual.jobs.named_tasks import TaskService
from punctual.jobs.service import JobService
from punctual.jobs.task_resolver import TaskResolver
from punctual.notify import execution_events as stream_events
from punctual.notify.delivery import Notifier
from punctual.notify.messages import NotifyPolicy, Outbox
from punctual.platform import aws
from punctual.platform.clock import Clock, SystemClock
from punctual.platform.config import Settings
from punctual.scheduling.dispatch import Dispatcher
from punctual.scheduling.prescaling import BurstPlanner, LeadPolicy, Limits, PollerPolicy
from punctual.scheduling.scanner import Scanner
from punctual.store import Store
from punctual.store.markers import count_bucket
from punctual.store.packs import PackRepository
from punctual.store.queue import WorkQueue
from punctual.store.streams import execution_change
from punctual.tasks import AwsClients, LambdaClients, TaskPolicy
from punctual.tasks.netguard import Resolver, system_resolver


@dataclass
class Punctual:
    settings: Settings
    clock: Clock
    store: Store
    queue: WorkQueue
    dispatcher: Dispatcher
    service: JobService
    cursors: Cursors
    worker: Worker
    packs: PackRunner
    tasks: TaskService
    outbox: Outbox
    hooks: RunHooks
    notifier: Notifier
    dead_letters: DeadLetters

    def scanner(self, shards: list[int] | None = None) -> Scanner:
        return Scanner(
            self.store,
            self.dispatcher,
            self.clock,
            lookahead=timedelta(seconds=self.settings.lookahead_seconds),
            shards=shards if shards is not None else list(range(self.settings.shard_count)),
        )

    def burst_planner(self, lambda_client: Any = None) -> BurstPlanner | None:
        """The burst forecast, or None when it is off (settings.burst_forecast_minutes 0). It warms the
        worker mapping's pollers only when given the mapping's id (its client made here if not given)."""
        s = self.settings
        if not s.burst_forecast_minutes:
            return None
        if s.worker_mapping_id and lambda_client is None:
            lambda_client = aws.lambda_client(s)
        return BurstPlanner(
            partial(count_bucket, self.store.clients[1], s.table_name),
            s.shard_count,
            self.clock,
            minutes_ahead=s.burst_forecast_minutes,
            limits=Limits(
                worker_concurrency=s.burst_worker_concurrency,
                lambda_concurrency=s.burst_lambda_concurrency,
                table_write_units=s.burst_table_write_units,
            ),
            policy=PollerPolicy(
                floor=s.burst_pollers_floor,
                ceiling=s.burst_pollers_ceiling,
                pack_size=s.pack_size,
                shards=s.shard_count,
            ),
            lambda_client=lambda_client,
            mapping_id=s.worker_mapping_id,
        )


def build(
    settings: Settings,
    *,
    clock: Clock | None = None,
    dynamodb: Any = None,
    dynamodb_client: Any = None,
    sqs: Any = None,
    resolver: Resolver = system_resolver,
    lambda_clients: LambdaClients | None = None,
    aws_clients: AwsClients | None = None,
) -> Punctual:
    clock = clock or SystemClock()
    dynamodb = dynamodb if dynamodb is not None else aws.dynamodb_resource(settings)
    sqs = sqs if sqs is not None else aws.sqs_client(settings)
    store = Store(
        dynamodb,
        dynamodb_client if dynamodb_client is not None else aws.dynamodb_client(settings),
        settings.table_name,
        shard_count=settings.shard_count,
        retention_days=settings.retention_days,
        clock=clock,
    )
    queue = WorkQueue(sqs, settings.queue_url)
    dispatcher = Dispatcher(
        store,
        queue,
        clock,
        soon=timedelta(seconds=settings.handoff_seconds),
        early_visibility_seconds=settings.early_visibility_seconds,
        pack_size=settings.pack_size,
        lead=LeadPolicy.from_settings(settings),
    )
    task_policy = TaskPolicy(
        allowed_networks=settings.webhook_allowed_networks,
        lambda_functions=settings.lambda_functions,
        sqs_queues=settings.sqs_queues,
        sns_topics=settings.sns_topics,
        eventbridge_buses=settings.eventbridge_buses,
        state_machines=settings.state_machines,
    )
    named = TaskService(store.tasks, clock, task_policy)
    notify_policy = NotifyPolicy(
        allowed_networks=settings.webhook_allowed_networks, targets=settings.notification_targets
    )
    service = JobService(
        store,
        dispatcher,
        clock,
        task_policy=task_policy,
        named_tasks=named,
        notify_policy=notify_policy,
        handoff_claim=timedelta(seconds=settings.handoff_claim_seconds),
    )
    # The AWS target tasks' clients and the notifier's SNS and EventBridge ones: the same kind, kept once.
    aws_clients = aws_clients or aws_clients_for(settings)
    outbox = Outbox(sqs, settings.notify_queue_url)
    hooks = RunHooks(store, clock, outbox, sent_ahead=dispatcher.sends_ahead, queue=queue)
    worker_config = WorkerConfig(
        task_policy=task_policy,
        result_max_bytes=settings.result_max_bytes,
        early_visibility_seconds=settings.early_visibility_seconds,
        lead_max_seconds=settings.lead_max_seconds,
        fire_threads=settings.fire_threads,
    )
    worker = Worker(
        store,
        queue,
        clock,
        worker_config,
        resolver=resolver,
        lambda_clients=lambda_clients or lambda_clients_for(settings),
        aws_clients=aws_clients,
        named_tasks=TaskResolver(store.tasks, clock, ttl_seconds=settings.task_cache_seconds).effective,
        hooks=hooks,
    )
    notifier = Notifier(
        store,
        sqs,
        settings.notify_queue_url,
        clock,
        notify_policy,
        resolver=resolver,
        aws_clients=aws_clients,
    )
    return Punctual(
        settings=settings,
        clock=clock,
        store=store,
        queue=queue,
        dispatcher=dispatcher,
        service=service,
        cursors=Cursors(
            (lambda: aws.secret_string(settings, settings.cursor_secret_arn))
            if settings.cursor_secret_arn
            else settings.cursor_secret
        ),
        worker=worker,
        packs=PackRunner(worker, queue, clock, worker_config, PackRepository(store.table)),
        tasks=named,
        outbox=outbox,
        hooks=hooks,
        notifier=notifier,
        dead_letters=DeadLetters(store, queue, clock),
    )


def execution_events(events: Any, settings: Settings) -> Callable[[Sequence[dict[str, Any]]], dict[str, Any]]:
    """The execution_events function's work: a batch of the table's stream records -> their execution
    status changes on the stack's bus, grouped by owner and status, with `events`, an EventBridge client (the function
    builds nothing else: it reads no table)."""
    return partial(
        stream_events.publish,
        read=execution_change,
        events=events,
        bus=settings.event_bus_name,
        mode=settings.execution_events,
    )


def lambda_clients_for(settings: Settings, aws_session: Any = None) -> LambdaClients:
    """The `lambda` task's clients, one per region and timeout, each made when first needed (most
    workers never need one) and then kept with its connections. Under a lock: the worker runs a
    batch's records in threads, and boto3 makes clients one at a time."""
    lock = threading.Lock()
    made: dict[tuple[str, int], Any] = {}
    shared: list[Any] = [aws_session] if aws_session is not None else []

    def client(region: str, read_timeout_seconds: int) -> Any:
        with lock:
            key = (region, read_timeout_seconds)
            if key not in made:
                if not shared:
                    shared.append(aws.session(settings))
                made[key] = aws.lambda_invoke_client(settings, region, read_timeout_seconds, shared[0])
            return made[key]

    return client


def aws_clients_for(settings: Settings, aws_session: Any = None) -> AwsClients:
    """AWS clients by service, region and read timeout, one attempt a call, each made when first
    needed (as `lambda_clients_for`): the AWS target tasks' (the worker's) and the notifier's SNS and
    EventBridge ones, whose retries are their own (the job's retry policy, the notification's message)."""
    lock = threading.Lock()
    made: dict[tuple[str, str, int], Any] = {}
    shared: list[Any] = [aws_session] if aws_session is not None else []

    def client(service: str, region: str, read_timeout_seconds: int) -> Any:
        with lock:
            key = (service, region, read_timeout_seconds)
            if key not in made:
                if not shared:
                    shared.append(aws.session(settings))
                made[key] = aws.target_client(settings, service, region, read_timeout_seconds, shared[0])
            return made[key]

    return client


_DEFAULT: Punctual | None = None


def default() -> Punctual:
    """The process-wide instance (a Lambda container's), built on first use from the environment."""
    global _DEFAULT
    if _DEFAULT is None:
        from punctual.platform.config import settings

        _DEFAULT = build(settings())
    return _DEFAULT


def set_default(instance: Punctual | None) -> None:
    """Tests and the local stack install their own instance."""
    global _DEFAULT
    _DEFAULT = instance
