"""Deployment settings, read from CDK context (cdk.json, overridden with `-c key=value`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from punctual.notify import execution_events
from punctual.platform import aws_limits as sizing
from punctual.platform import resources, target_arns
from punctual.platform.config import Settings

# Context values given on the command line arrive as strings; cdk.json gives JSON types.
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

ON_DEMAND = "on_demand"
PROVISIONED = "provisioned"
TABLE_CAPACITY_MODES = (ON_DEMAND, PROVISIONED)

HTTP_API = "http"
REST_API = "rest"
API_TYPES = (HTTP_API, REST_API)


@dataclass(frozen=True)
class ProvisionedCapacity:
    """The table's provisioned capacity, in units a second, kept `target_utilisation` percent busy by
    auto scaling between the bounds; each index has its own bounds (`index_*`), scaled to the same
    target. An index short of write capacity throttles the writes to the table itself."""

    min_write_units: int
    max_write_units: int
    min_read_units: int
    max_read_units: int
    target_utilisation: int
    index_min_write_units: int
    index_max_write_units: int
    index_min_read_units: int
    index_max_read_units: int


@dataclass(frozen=True)
class DeploySettings:
    stack_name: str = resources.APP_NAME
    # Sized for the promise: 10,000 executions a second and a 1,000,000-execution minute drained in
    # under 30 s (docs/scaling.md, `punctual capacity --jobs-per-second 10000 --burst 1000000`).
    # Shard count may grow between deployments, never shrink: markers keep the shard they were filed in.
    shard_count: int = 64
    # Scanner invocations per tick, each scanning its share of the shards (1: no fan-out).
    scanner_fanout: int = 64
    lookahead_seconds: int = 90
    retention_days: int = 30
    webhook_allowed_networks: tuple[str, ...] = ()
    # Lambda functions the `lambda` task may invoke: ARN patterns with * and ? as wildcards, e.g.
    # ["arn:aws:lambda:us-east-1:123456789012:function:reports-*"]. The worker is granted
    # lambda:InvokeFunction on these and nothing else; none by default.
    lambda_functions: tuple[str, ...] = ()
    # What the sqs, sns, eventbridge and stepfunctions tasks may reach: ARN patterns likewise, e.g.
    # ["arn:aws:sqs:us-east-1:123456789012:orders-*"]. The worker is granted sqs:SendMessage,
    # sns:Publish, events:PutEvents and states:StartExecution on these and nothing else; none by default.
    sqs_queues: tuple[str, ...] = ()
    sns_topics: tuple[str, ...] = ()
    eventbridge_buses: tuple[str, ...] = ()
    state_machines: tuple[str, ...] = ()
    # How long a worker keeps a named task before reading it again (a change reaches executions
    # starting this long after it): one read per task and worker container this often.
    task_cache_seconds: int = 10
    # SNS topics and EventBridge buses job notifications may go to: ARN patterns with * and ? as
    # wildcards, e.g. ["arn:aws:sns:us-east-1:123456789012:alerts-*"]. The notifier is granted
    # sns:Publish and events:PutEvents on these and nothing else; none by default (webhooks only).
    notification_targets: tuple[str, ...] = ()
    # One EventBridge event per execution status change on the stack's bus: "all" (about two an
    # execution: RUNNING, then its end; $1.00 a million events), "final" (only the ends: one) or "off"
    # (no stream on the table, no bus).
    execution_events: str = "all"
    alarm_email: str | None = None
    # Off only for throwaway test stacks: the table and the logs are then deleted with the stack.
    deletion_protection: bool = True
    worker_max_concurrency: int = 20
    # AWS's public Powertools layer (account 017000801446); 32 carries Powertools 3.28.0.
    powertools_layer_version: int = 32
    log_level: str = "INFO"
    log_retention_days: int = 30
    api_throttle_rate: int = 50
    api_throttle_burst: int = 100
    # The API Gateway in front of the API function: "http" (an HTTP API: $1.00 a million requests
    # against REST's $3.50, and lower latency) or "rest" (a REST API, for what only REST APIs offer:
    # AWS WAF, resource policies, private endpoints, API Gateway X-Ray tracing, usage plans). Both
    # authorize with IAM (SigV4); the API function answers either's events.
    api_type: str = HTTP_API
    # The table's capacity mode: "on_demand" follows any load at once and is right for bursts;
    # "provisioned" is for a steady load. Kept 70 % busy, provisioned capacity costs 41 % of on-demand
    # a unit (bench/cost/levers.py), but auto scaling raises it only after consumption has stayed
    # over the target for two minutes, CloudWatch adds minutes, and throttled requests do not count as
    # consumed: a jump far above what is provisioned is followed in steps, minutes to tens of minutes
    # of throttled and retried requests (executions late). A burst minute of 1,000,000 executions
    # (~120,000 write units/s while the scanner drains it, docs/scaling.md section 4) needs on-demand,
    # or minimums that high all month.
    table_capacity: str = ON_DEMAND
    # Provisioned only: the table's bounds, units a second (each index has its own, below).
    # The minimums are paid for all month, busy or idle: 100 write and 100 read units are ~$57 a month
    # (list prices, punctual_cli.capacity.Prices). Kept 70 % busy they hold ~10 one-time executions a
    # second (5 write units each on the table, 1 on the index; 4 read units) and easily the idle
    # scanner's bookkeeping (3 writes a shard a tick). Above them auto scaling brings the table to its
    # load. Raise them to what must be served at once, without waiting for auto scaling (`punctual
    # capacity --jobs-per-second N --provisioned` prints them for a load).
    # The maximums cap the bill. 40,000 is DynamoDB's default quota for a provisioned table (and for
    # an on-demand table: the default stack tops out there too), ~5,600 one-time executions a second
    # at 70 % (5 write units each on the table). The 10,000 a second of docs/scaling.md consume 50,000
    # table write, 10,000 index write and 40,000 read units a second: at 70 % busy, ~71,400, ~14,300
    # and ~57,000 units provisioned (`punctual capacity --jobs-per-second 10000 --provisioned`).
    # Raise the table and account quotas, then these.
    table_min_write_units: int = 100
    table_max_write_units: int = 40_000
    table_min_read_units: int = 100
    table_max_read_units: int = 40_000
    # Provisioned only: the bounds of each global secondary index (by_owner), units a second. The
    # index takes 1 of a one-time execution's 6 write units (its entry, put when the job is created;
    # KEYS_ONLY, so later job updates do not touch it), none of a recurring occurrence's, and is read
    # only by list requests: the table's minimums would be paid a second time for little use. The
    # index's write minimum must still take job creations as they come, since an index short of write
    # capacity throttles the table's writes: 15 take ~10 creations a second at 70 % (the table's 100
    # cover ~10 executions a second), ~$8 a month with the read minimum. Maximums as for the table.
    index_min_write_units: int = 15
    index_max_write_units: int = 40_000
    index_min_read_units: int = 10
    index_max_read_units: int = 40_000
    # Percent of the provisioned capacity auto scaling keeps consumed, on the table and each index.
    # The rest is headroom for a rise until auto scaling catches up: lower is safer and dearer.
    # The cost model prices 70 (`punctual capacity --provisioned --utilisation PERCENT` for others).
    table_target_utilisation: int = 70
    # The worker's event source mapping in provisioned mode: at least this many event pollers kept
    # ready (2-200; 0, the default, is standard mode, bounded by worker_max_concurrency instead). Each
    # poller takes up to 10 concurrent invokes or 10 receives a second; the pollers kept are billed by
    # the hour (`punctual capacity --pollers N`), and scale up at 1,000 concurrent invokes a minute,
    # against standard mode's 300 from 5 (docs/scaling.md, section 4).
    worker_min_pollers: int = 0
    # Provisioned mode only: 2-2,000 (CloudFormation's ceiling; the API reference's is 10,000), at
    # least worker_min_pollers. 210 take a million executions due at one instant: 2,048 packs of 500
    # on 64 shards, each holding an invoke from its lead until it has fired, 10 a poller (205).
    # Pollers past the minimum are billed only while they run.
    worker_max_pollers: int = 210
    # The burst forecast: each tick counts the due buckets of this many coming minutes, publishes the
    # busiest (ComingMinuteExecutions) and its share of what the deployment can start
    # (BurstLoadPercent: worker concurrency, lambda_concurrency_quota, table write units), and alarms
    # over 100 %. 0 (the default) is off: no counting, nothing added to the tick. Costs about one read
    # unit per shard and minute counted, each tick.
    burst_forecast_minutes: int = 0
    # Warm the worker's pollers ahead of a large minute: the tick raises the mapping's minimum pollers
    # (between worker_min_pollers and worker_prescale_max_pollers) for the coming minutes' load, and
    # lowers them once it has passed. Needs provisioned mode and the forecast.
    worker_prescale: bool = False
    worker_prescale_max_pollers: int = 200
    # The account's Lambda concurrency quota (per region; 1,000 by default), for the forecast's alarm.
    lambda_concurrency_quota: int = 1000
    # The most a crowded instant's work messages are made visible before it (0-15 s; 0: never), by
    # the lead the scanner chooses from how many executions fall due then: none for an instant of at
    # most a pack a shard, the time the mapping and Lambda take to start its packs for a larger one
    # (punctual.scheduling.prescaling.lead_seconds). The worker holds them until the instant.
    lead_max_seconds: int = 15
    # How many of the list indexes (resources.LIST_INDEXES) the table has. An existing table gains
    # them one deployment at a time (1, then the default): DynamoDB adds one index an update.
    list_indexes: int = len(resources.LIST_INDEXES)
    # How many of an earlier version's list indexes (resources.RETIRED_LIST_INDEXES: by_status, then
    # by_outcome) the table keeps. A table that has both drops them one deployment at a time (2, then
    # 1, then the default): DynamoDB drops one index an update, and adds by_flag in the first.
    retired_indexes: int = 0

    def __post_init__(self) -> None:
        self._check_pollers()  # first: the functions' settings are derived from them
        # The functions validate their configuration at cold start; fail at synth instead.
        self.function_settings()
        if not 2 <= self.worker_max_concurrency <= 1000:
            raise ValueError("worker_max_concurrency must be between 2 and 1000 (SQS event source limit)")
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"log_level {self.log_level!r} is not a Python logging level")
        if self.api_type not in API_TYPES:
            raise ValueError(f"api_type {self.api_type!r} is not one of {', '.join(API_TYPES)}")
        if self.execution_events not in execution_events.MODES:
            raise ValueError(
                f"execution_events {self.execution_events!r} is not one of {', '.join(execution_events.MODES)}"
            )
        self._check_table_capacity()
        if not 0 <= self.list_indexes <= len(resources.LIST_INDEXES):
            raise ValueError(f"list_indexes must be between 0 and {len(resources.LIST_INDEXES)}")
        if not 0 <= self.retired_indexes <= len(resources.RETIRED_LIST_INDEXES):
            raise ValueError(f"retired_indexes must be between 0 and {len(resources.RETIRED_LIST_INDEXES)}")

    def _check_pollers(self) -> None:
        if self.worker_min_pollers:
            if not 2 <= self.worker_min_pollers <= 200:
                raise ValueError("worker_min_pollers must be between 2 and 200 (or 0: standard mode)")
            if not self.worker_min_pollers <= self.worker_max_pollers <= 2000:
                raise ValueError("worker_max_pollers must be between worker_min_pollers and 2,000")
        if not 0 <= self.lead_max_seconds <= 15:
            raise ValueError("lead_max_seconds must be between 0 (no lead) and 15")
        if not 0 <= self.burst_forecast_minutes <= 15:
            raise ValueError("burst_forecast_minutes must be between 0 (off) and 15")
        if self.worker_prescale:
            if not self.worker_min_pollers:
                raise ValueError("worker_prescale needs provisioned mode: set worker_min_pollers")
            if not self.burst_forecast_minutes:
                raise ValueError("worker_prescale needs the forecast: set burst_forecast_minutes")
            if (
                not self.worker_min_pollers
                <= self.worker_prescale_max_pollers
                <= min(200, self.worker_max_pollers)
            ):
                raise ValueError(
                    "worker_prescale_max_pollers must be between worker_min_pollers and worker_max_pollers, "
                    "and at most 200 (MinimumPollers' maximum)"
                )

    def worker_pollers(self) -> tuple[int, int] | None:
        """(minimum, maximum) pollers of the worker's mapping, or None: standard mode."""
        return (self.worker_min_pollers, self.worker_max_pollers) if self.worker_min_pollers else None

    def ready_pollers(self) -> int:
        """The worker mapping's pollers ready for a crowded minute: its MinimumPollers as the
        pre-scaling raises it (or as set, without it); 0 in standard mode."""
        if not self.worker_min_pollers:
            return 0
        return self.worker_prescale_max_pollers if self.worker_prescale else self.worker_min_pollers

    def worker_concurrency(self) -> int:
        """The most concurrent worker invocations the mapping starts: its maximum concurrency, or in
        provisioned mode 10 invokes a poller."""
        if self.worker_min_pollers:
            return self.worker_max_pollers * 10
        return self.worker_max_concurrency

    def _check_table_capacity(self) -> None:
        if self.table_capacity not in TABLE_CAPACITY_MODES:
            raise ValueError(
                f"table_capacity {self.table_capacity!r} is not one of {', '.join(TABLE_CAPACITY_MODES)}"
            )
        for scope in ("table", "index"):
            for kind in ("write", "read"):
                low = getattr(self, f"{scope}_min_{kind}_units")
                high = getattr(self, f"{scope}_max_{kind}_units")
                if low < 1:
                    raise ValueError(
                        f"{scope}_min_{kind}_units must be at least 1 (DynamoDB's minimum), not {low}"
                    )
                if low > high:
                    raise ValueError(
                        f"{scope}_min_{kind}_units ({low}) is above {scope}_max_{kind}_units ({high})"
                    )
        if not 20 <= self.table_target_utilisation <= 90:
            raise ValueError(
                "table_target_utilisation must be between 20 and 90 percent (DynamoDB auto scaling's range), "
                f"not {self.table_target_utilisation}"
            )

    def provisioned_capacity(self) -> ProvisionedCapacity | None:
        """The table's provisioned capacity, or None for on-demand."""
        if self.table_capacity != PROVISIONED:
            return None
        return ProvisionedCapacity(
            min_write_units=self.table_min_write_units,
            max_write_units=self.table_max_write_units,
            min_read_units=self.table_min_read_units,
            max_read_units=self.table_max_read_units,
            target_utilisation=self.table_target_utilisation,
            index_min_write_units=self.index_min_write_units,
            index_max_write_units=self.index_max_write_units,
            index_min_read_units=self.index_min_read_units,
            index_max_read_units=self.index_max_read_units,
        )

    def function_settings(self) -> Settings:
        """The functions' own settings model, filled from this deployment's values."""
        return Settings(
            shard_count=self.shard_count,
            scanner_fanout=self.scanner_fanout,
            lookahead_seconds=self.lookahead_seconds,
            retention_days=self.retention_days,
            webhook_allowed_networks=self.webhook_allowed_networks,
            lambda_functions=self.lambda_functions,
            sqs_queues=self.sqs_queues,
            sns_topics=self.sns_topics,
            eventbridge_buses=self.eventbridge_buses,
            state_machines=self.state_machines,
            task_cache_seconds=self.task_cache_seconds,
            notification_targets=self.notification_targets,
            burst_forecast_minutes=self.burst_forecast_minutes,
            burst_pollers_floor=self.worker_min_pollers or 2,
            burst_pollers_ceiling=(
                self.worker_prescale_max_pollers if self.worker_prescale else self.worker_min_pollers or 2
            ),
            burst_worker_concurrency=self.worker_concurrency(),
            lead_max_seconds=self.lead_max_seconds,
            worker_ready_pollers=self.ready_pollers(),
            burst_lambda_concurrency=self.lambda_concurrency_quota,
            burst_table_write_units=(
                self.table_max_write_units if self.table_capacity == PROVISIONED else sizing.TABLE_QUOTA_UNITS
            ),
        )

    @classmethod
    def from_context(cls, value: Callable[[str], Any]) -> DeploySettings:
        """Read from a context lookup such as `app.node.try_get_context`."""
        values: dict[str, Any] = {}
        for key, kind in (
            ("stack_name", str),
            ("shard_count", int),
            ("scanner_fanout", int),
            ("lookahead_seconds", int),
            ("retention_days", int),
            ("worker_max_concurrency", int),
            ("powertools_layer_version", int),
            ("log_level", str),
            ("log_retention_days", int),
            ("api_throttle_rate", int),
            ("api_throttle_burst", int),
            ("api_type", str),
            ("execution_events", str),
            ("table_capacity", str),
            ("table_min_write_units", int),
            ("table_max_write_units", int),
            ("table_min_read_units", int),
            ("table_max_read_units", int),
            ("table_target_utilisation", int),
            ("index_min_write_units", int),
            ("index_max_write_units", int),
            ("index_min_read_units", int),
            ("index_max_read_units", int),
            ("worker_min_pollers", int),
            ("worker_max_pollers", int),
            ("burst_forecast_minutes", int),
            ("worker_prescale_max_pollers", int),
            ("lambda_concurrency_quota", int),
            ("lead_max_seconds", int),
            ("task_cache_seconds", int),
            ("list_indexes", int),
            ("retired_indexes", int),
        ):
            raw = value(key)
            if raw in (None, ""):
                continue
            try:
                values[key] = kind(raw)
            except ValueError as exc:
                raise ValueError(f"context {key}={raw!r} is not an integer") from exc
        for flag in ("deletion_protection", "worker_prescale"):
            if value(flag) is not None:
                values[flag] = _as_bool(flag, value(flag))
        values["alarm_email"] = str(value("alarm_email") or "").strip() or None
        values["webhook_allowed_networks"] = _as_list(value("webhook_allowed_networks"))
        values["lambda_functions"] = _as_list(value("lambda_functions"))
        for target in target_arns.TARGETS:
            values[target.setting] = _as_list(value(target.setting))
        values["notification_targets"] = _as_list(value("notification_targets"))
        return cls(**values)


def _as_bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"context {key}={raw!r} is not a boolean")


def _as_list(raw: Any) -> tuple[str, ...]:
    """A JSON list (cdk.json) or a comma-separated string (`-c webhook_allowed_networks=a,b`)."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())
