"""Deployment settings, read from CDK context (cdk.json, overridden with `-c key=value`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from punctual import resources
from punctual.config import Settings

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
    alarm_email: str | None = None
    # Off only for throwaway test stacks: the table and the logs are then deleted with the stack.
    deletion_protection: bool = True
    # Store every execution as QUEUED before its message is sent (one more write unit an execution).
    # Needed for one deployment when upgrading from a version whose workers drop a message naming an
    # execution that is not stored (before 2026-11-30): deploy with it on, then off once every
    # function runs this version (README, "Upgrading").
    record_queued: bool = False
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
    # a unit (bench/cost.py, `levers`), but auto scaling raises it only after consumption has stayed
    # over the target for two minutes, CloudWatch adds minutes, and throttled requests do not count as
    # consumed: a jump far above what is provisioned is followed in steps, minutes to tens of minutes
    # of throttled and retried requests (executions late). A burst minute of 1,000,000 executions
    # (~120,000 write units/s while the scanner drains it, docs/scaling.md section 4) needs on-demand,
    # or minimums that high all month.
    table_capacity: str = ON_DEMAND
    # Provisioned only: the table's bounds, units a second (each index has its own, below).
    # The minimums are paid for all month, busy or idle: 100 write and 100 read units are ~$57 a month
    # (list prices, punctual.capacity.Prices). Kept 70 % busy they hold ~10 one-time executions a
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

    def __post_init__(self) -> None:
        # The functions validate their configuration at cold start; fail at synth instead.
        self.function_settings()
        if not 2 <= self.worker_max_concurrency <= 1000:
            raise ValueError("worker_max_concurrency must be between 2 and 1000 (SQS event source limit)")
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"log_level {self.log_level!r} is not a Python logging level")
        if self.api_type not in API_TYPES:
            raise ValueError(f"api_type {self.api_type!r} is not one of {', '.join(API_TYPES)}")
        self._check_table_capacity()

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
            record_queued=self.record_queued,
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
        ):
            raw = value(key)
            if raw in (None, ""):
                continue
            try:
                values[key] = kind(raw)
            except ValueError as exc:
                raise ValueError(f"context {key}={raw!r} is not an integer") from exc
        for flag in ("deletion_protection", "record_queued"):
            if value(flag) is not None:
                values[flag] = _as_bool(flag, value(flag))
        values["alarm_email"] = str(value("alarm_email") or "").strip() or None
        values["webhook_allowed_networks"] = _as_list(value("webhook_allowed_networks"))
        values["lambda_functions"] = _as_list(value("lambda_functions"))
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
