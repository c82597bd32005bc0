"""Configuration: one typed model read from the environment, with defaults that work locally."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from punctual.platform import lambda_arns, resources, target_arns

# A pack's members a worker starts at once, by default: as many as a pack holds, so that none waits
# for another's answer (each holds a socket while it starts: Lambda allows 1,024 descriptors).
FIRE_THREADS = 500


class Settings(BaseModel):
    table_name: str = resources.TABLE.name
    queue_url: str = ""
    dlq_url: str = ""
    notify_queue_url: str = ""
    # The stack's bus for execution status changes (AWS only: none locally), and which changes go on
    # it: "all", or "final" (punctual.notify.execution_events).
    event_bus_name: str = ""
    execution_events: str = Field(default="all", pattern="^(all|final|off)$")
    # AWS endpoint override: the local stack's moto server. None means the real AWS endpoints.
    endpoint_url: str | None = None
    region: str = "us-east-1"

    shard_count: int = Field(default=16, ge=1, le=1000)
    # How many scanner invocations share the shards each tick (the tick itself only fans out).
    scanner_fanout: int = Field(default=1, ge=1, le=1000)
    # The scanner enqueues executions due before now + lookahead; SQS DelaySeconds holds them.
    lookahead_seconds: int = Field(default=90, ge=5, le=900)
    # The period of the scanner's tick (EventBridge: one minute).
    tick_seconds: int = Field(default=60, ge=1, le=300)
    # How much later than its period a tick may run: EventBridge fires a `rate(1 minute)` rule within
    # its minute, not on its second 0. The local stack's ticker keeps time (0).
    tick_lateness_seconds: int = Field(default=60, ge=0, le=300)
    retention_days: int = Field(default=30, ge=1, le=3650)
    # Make every message visible at least this much before its instant; the worker reads and claims
    # the execution then and waits out the rest. 0 on AWS, where a waiting invocation is billed and a
    # quiet instant needs none; the local stack sets it: its store answers slowly when many executions
    # share an instant, so their reads and claims need a head start.
    early_visibility_seconds: int = Field(default=0, ge=0, le=15)
    # The most a crowded instant's messages are made visible ahead of it, by the lead the dispatcher
    # chooses from how many executions fall due then (punctual.scheduling.prescaling.lead_seconds): the
    # time the deployment needs to start the environments and pollers that many packs need. 0: none.
    # The worker holds a message that early (and never starts it before its instant).
    lead_max_seconds: int = Field(default=15, ge=0, le=15)
    # The worker mapping's pollers ready for a crowded minute in provisioned mode (its MinimumPollers,
    # as the pre-scaling raises it); 0 is standard mode. With burst_worker_concurrency, what the lead
    # is chosen for.
    worker_ready_pollers: int = Field(default=0, ge=0, le=200)
    # Executions of one instant a work message carries at most (its worker starts them side by side):
    # about 40 bytes each, and a socket each while a webhook starts (Lambda allows 1,024 descriptors).
    pack_size: int = Field(default=500, ge=1, le=2000)
    # Members of a pack a worker starts at once: on Lambda one environment per pack, its threads
    # waiting on the network.
    fire_threads: int = Field(default=FIRE_THREADS, ge=1, le=1000)
    # Networks a webhook may reach even though they are private, loopback or link-local.
    webhook_allowed_networks: tuple[str, ...] = ()
    # Lambda functions the `lambda` task may invoke: ARN patterns, * and ? as wildcards (lambda_arns).
    # None by default: a job that names a function not listed is refused.
    lambda_functions: tuple[str, ...] = ()
    # What the sqs, sns, eventbridge and stepfunctions tasks may reach: ARN patterns likewise
    # (punctual.platform.target_arns). None by default.
    sqs_queues: tuple[str, ...] = ()
    sns_topics: tuple[str, ...] = ()
    eventbridge_buses: tuple[str, ...] = ()
    state_machines: tuple[str, ...] = ()
    # How long a worker keeps a named task's definition before reading it again: a change to a task
    # reaches executions that start this long after it.
    task_cache_seconds: float = Field(default=10, ge=0, le=300)
    # SNS topics and EventBridge buses job notifications may go to: ARN patterns, * and ? as wildcards
    # (punctual.platform.target_arns: the same pattern checks as the sns and eventbridge tasks', but a
    # list of its own). None by default: a job naming another target is refused.
    notification_targets: tuple[str, ...] = ()
    cursor_secret: str = "punctual-local-cursor-secret"
    # On AWS: the Secrets Manager secret whose value signs cursors, read when a cursor is first made
    # or read (it then takes the place of `cursor_secret`).
    cursor_secret_arn: str = ""
    result_max_bytes: int = Field(default=4096, ge=0, le=65536)
    # Burst forecast (punctual.scheduling.prescaling), off at 0: the scanner's tick counts the due buckets of this
    # many coming minutes, publishes the busiest and its load on the limits below, and, given the
    # worker mapping's id (provisioned mode), keeps its minimum pollers between floor and ceiling.
    burst_forecast_minutes: int = Field(default=0, ge=0, le=15)
    worker_mapping_id: str = ""
    burst_pollers_floor: int = Field(default=2, ge=2, le=200)
    burst_pollers_ceiling: int = Field(default=200, ge=2, le=200)
    # What the deployment can start at once: its worker concurrency, the account's Lambda
    # concurrency, the table's write units a second.
    burst_worker_concurrency: int = Field(default=20, ge=1)
    burst_lambda_concurrency: int = Field(default=1000, ge=1)
    burst_table_write_units: int = Field(default=40_000, ge=1)

    @field_validator("burst_pollers_ceiling")
    @classmethod
    def _ceiling_above_floor(cls, value: int, info: ValidationInfo) -> int:
        floor = info.data.get("burst_pollers_floor", 2)
        if value < floor:
            raise ValueError(f"burst_pollers_ceiling ({value}) is below burst_pollers_floor ({floor})")
        return value

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            ipaddress.ip_network(network, strict=False)
        return value

    @field_validator("lambda_functions")
    @classmethod
    def _functions_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            lambda_arns.check_pattern(pattern)
        return value

    @field_validator("sqs_queues", "sns_topics", "eventbridge_buses", "state_machines")
    @classmethod
    def _target_patterns_parse(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        target = next(t for t in target_arns.TARGETS if t.setting == info.field_name)
        for pattern in value:
            target.check_pattern(pattern)
        return value

    @field_validator("notification_targets")
    @classmethod
    def _targets_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            target_arns.check_notification_pattern(pattern)
        return value

    @property
    def handoff_seconds(self) -> int:
        """Executions due sooner than this are enqueued by the API itself, not left to the scanner.

        A tick that has already run read up to its own now + lookahead; the next one runs within a tick
        period. Anything due before now + lookahead + tick period + a margin for a slow request could
        fall between them, so the API hands it to the queue directly.
        """
        return self.lookahead_seconds + self.tick_seconds + 30

    @property
    def handoff_claim_seconds(self) -> int:
        """Of what the API files under a soon partition, what is due sooner than this it enqueues itself.

        The next tick runs within a period and its lateness, and sends all that the soon partitions
        hold (it reads them up to its now + the hand-off window), so anything due after that and a
        margin for the tick's own run (15 s) can wait for it, and be sent packed with the rest of its
        instant (scheduling/handoff.py, tick.py).
        """
        return min(self.handoff_seconds, self.tick_seconds + self.tick_lateness_seconds + 15)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        plain = {
            "table_name": resources.ENV_TABLE_NAME,
            "queue_url": resources.ENV_QUEUE_URL,
            "dlq_url": resources.ENV_DLQ_URL,
            "notify_queue_url": resources.ENV_NOTIFY_QUEUE_URL,
            "event_bus_name": resources.ENV_EVENT_BUS_NAME,
            "execution_events": "PUNCTUAL_EXECUTION_EVENTS",
            "endpoint_url": "PUNCTUAL_AWS_ENDPOINT_URL",
            "shard_count": "PUNCTUAL_SHARD_COUNT",
            "scanner_fanout": "PUNCTUAL_SCANNER_FANOUT",
            "lookahead_seconds": "PUNCTUAL_LOOKAHEAD_SECONDS",
            "tick_seconds": "PUNCTUAL_TICK_SECONDS",
            "retention_days": "PUNCTUAL_RETENTION_DAYS",
            "cursor_secret": "PUNCTUAL_CURSOR_SECRET",
            "cursor_secret_arn": "PUNCTUAL_CURSOR_SECRET_ARN",
            "result_max_bytes": "PUNCTUAL_RESULT_MAX_BYTES",
            "task_cache_seconds": "PUNCTUAL_TASK_CACHE_SECONDS",
            "lead_max_seconds": "PUNCTUAL_LEAD_MAX_SECONDS",
            "worker_ready_pollers": "PUNCTUAL_WORKER_READY_POLLERS",
            "burst_forecast_minutes": "PUNCTUAL_BURST_FORECAST_MINUTES",
            "worker_mapping_id": resources.ENV_WORKER_MAPPING_ID,
            "burst_pollers_floor": "PUNCTUAL_BURST_POLLERS_FLOOR",
            "burst_pollers_ceiling": "PUNCTUAL_BURST_POLLERS_CEILING",
            "burst_worker_concurrency": "PUNCTUAL_BURST_WORKER_CONCURRENCY",
            "burst_lambda_concurrency": "PUNCTUAL_BURST_LAMBDA_CONCURRENCY",
            "burst_table_write_units": "PUNCTUAL_BURST_TABLE_WRITE_UNITS",
        }
        for field_name, variable in plain.items():
            if env.get(variable):
                values[field_name] = env[variable]
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            values["region"] = region
        networks = env.get("PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS", "")
        values["webhook_allowed_networks"] = tuple(n.strip() for n in networks.split(",") if n.strip())
        functions = env.get("PUNCTUAL_LAMBDA_FUNCTIONS", "")
        values["lambda_functions"] = tuple(f.strip() for f in functions.split(",") if f.strip())
        for target in target_arns.TARGETS:
            listed = env.get(target.env, "")
            values[target.setting] = tuple(p.strip() for p in listed.split(",") if p.strip())
        targets = env.get("PUNCTUAL_NOTIFICATION_TARGETS", "")
        values["notification_targets"] = tuple(t.strip() for t in targets.split(",") if t.strip())
        return cls.model_validate(values)


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The process's settings, read once (Lambda cold start)."""
    return Settings.from_env()
