"""What an execution costs, by service, at list prices: DynamoDB on-demand, provisioned or reserved;
the fixed monthly costs of a deployment; and EventBridge Scheduler's, to compare."""

from __future__ import annotations

import math
from dataclasses import replace

from punctual_cli.capacity.figures import (
    BOOKKEEPING_WRITES_PER_SHARD,
    EVENTBRIDGE_EVENT_BYTES,
    EVENTS_ENTRY_OVERHEAD_BYTES,
    FIXED_ALARMS,
    FIXED_METRICS,
    IDLE_POLLS_PER_MINUTE,
    INDEXES,
    KEYS_ONLY_ENTRY_BYTES,
    PRICES,
    SECONDS_PER_MONTH,
    Assumptions,
    ExecutionUsage,
    Prices,
    scanner_rate,
)


def fixed_monthly(fanout: int, shard_count: int, prices: Prices = PRICES) -> dict[str, float]:
    minutes = SECONDS_PER_MONTH / 60
    return {
        "dashboard": prices.dashboard_month,
        "alarms": FIXED_ALARMS * prices.alarm_month,
        "custom_metrics": FIXED_METRICS * prices.metric_month,
        "secret": prices.secret_month,
        "idle_polling": IDLE_POLLS_PER_MINUTE * minutes * prices.sqs_per_million / 1e6,
        "scanner_ticks": (1 + fanout) * minutes * prices.lambda_requests_per_million / 1e6,
        "scanner_bookkeeping": BOOKKEEPING_WRITES_PER_SHARD
        * shard_count
        * minutes
        * prices.dynamodb_write_units_per_million
        / 1e6,
    }


def index_write_units(usage: ExecutionUsage, keys_only: bool = True) -> float:
    """Of `usage`'s write units, those that fall on the indexes. KEYS_ONLY, an entry is written only
    when it is put (a one-time job's, at creation); projecting ALL, every rewrite of a job rewrites
    its entry too, which is all that ALL adds to the measured units."""
    rewrites = 0.0 if keys_only else usage.write_units - usage.write_units_keys_only
    return usage.index_write_units_keys_only + rewrites


def cost_per_execution(
    usage: ExecutionUsage,
    assumptions: Assumptions = Assumptions(),
    prices: Prices = PRICES,
    *,
    utilisation: float | None = None,
) -> dict[str, float]:
    """USD per execution, by service, at list prices: DynamoDB on-demand, or, given a `utilisation`
    (a fraction), provisioned capacity kept that busy — its request units at provisioned rates
    (`provisioned_write_unit_price`), the indexes' writes then a row of their own
    (`dynamodb_index_writes`, out of `dynamodb_writes`)."""
    a = assumptions
    worker_invocations = 1 / a.batch_fill
    scanner_seconds = 1 / scanner_rate(a.scanner_memory_mb)
    gb_seconds = (
        usage.api_requests * a.api_memory_mb / 1024 * a.api_seconds
        + worker_invocations * a.worker_memory_mb / 1024 * (a.worker_overhead_seconds + a.task_seconds)
        + a.scanner_memory_mb / 1024 * scanner_seconds
    )
    events = events_per_execution(usage, a)
    # The events function runs once a batch of the stream's records, whatever events they make.
    events_invocations = status_changes_put(usage, a) / a.events_batch
    gb_seconds += events_invocations * a.events_memory_mb / 1024 * a.events_seconds
    invocations = usage.api_requests + worker_invocations + events_invocations
    write_units = usage.write_units_keys_only if a.keys_only_indexes else usage.write_units
    # Storage of the execution and, for a one-time job, of its item (in the table and its indexes)
    # for the retention period: a finished job expires with its history.
    months = a.retention_days / (SECONDS_PER_MONTH / 86400)
    table_gb_months = (usage.item_bytes + usage.job_bytes) * months / 2**30
    entry_bytes = KEYS_ONLY_ENTRY_BYTES if a.keys_only_indexes else usage.job_bytes
    index_gb_months = INDEXES * entry_bytes * (usage.job_bytes > 0) * months / 2**30
    api_price = prices.api_http_per_million if a.http_api else prices.api_rest_per_million
    if utilisation is None:
        dynamodb = {
            "dynamodb_writes": write_units * prices.dynamodb_write_units_per_million / 1e6,
            "dynamodb_reads": usage.read_units * prices.dynamodb_read_units_per_million / 1e6,
        }
    else:
        write_price = provisioned_write_unit_price(utilisation, prices)
        index_writes = index_write_units(usage, a.keys_only_indexes)
        dynamodb = {
            "dynamodb_writes": (write_units - index_writes) * write_price,
            "dynamodb_index_writes": index_writes * write_price,
            "dynamodb_reads": usage.read_units * provisioned_read_unit_price(utilisation, prices),
        }
    return {
        "api_gateway": usage.api_requests * api_price / 1e6,
        "lambda_requests": invocations * prices.lambda_requests_per_million / 1e6,
        "lambda_compute": gb_seconds * prices.lambda_arm64_gb_second,
        **dynamodb,
        "dynamodb_storage": (table_gb_months + index_gb_months) * prices.dynamodb_storage_gb_month
        + table_gb_months * prices.dynamodb_pitr_gb_month,
        "sqs": usage.sqs_requests * prices.sqs_per_million / 1e6,
        "eventbridge_events": events * prices.eventbridge_events_per_million / 1e6,
        "cloudwatch_logs": (usage.log_bytes + invocations * a.platform_log_bytes)
        / 2**30
        * prices.logs_ingested_gb,
        "xray": invocations * a.xray_sampled * prices.xray_traces_per_million / 1e6,
    }


def status_changes_put(usage: ExecutionUsage, assumptions: Assumptions) -> float:
    """An execution's status changes put on the stack's bus, as `execution_events` says (each a
    record of the table's stream reaching the events function)."""
    mode = assumptions.execution_events
    return {"all": usage.status_changes, "final": min(1.0, usage.status_changes)}.get(mode, 0.0)


def changes_per_event(usage: ExecutionUsage, assumptions: Assumptions) -> float:
    """Status changes one billed EventBridge event carries: a stream batch's (events_batch of them, one
    owner's to one status) cut into as few entries of EVENTBRIDGE_EVENT_BYTES as their details fit."""
    batch = max(1, math.floor(assumptions.events_batch))
    room = EVENTBRIDGE_EVENT_BYTES - EVENTS_ENTRY_OVERHEAD_BYTES
    fit = max(1, math.floor(room / usage.event_detail_bytes)) if usage.event_detail_bytes > 0 else batch
    return batch / math.ceil(batch / min(fit, batch))


def events_per_execution(usage: ExecutionUsage, assumptions: Assumptions) -> float:
    """Billed EventBridge events an execution's status changes cost (each an entry of PutEvents)."""
    return status_changes_put(usage, assumptions) / changes_per_event(usage, assumptions)


def per_million(costs: dict[str, float]) -> dict[str, float]:
    rows = {name: round(value * 1e6, 4) for name, value in costs.items()}
    rows["total"] = round(sum(costs.values()) * 1e6, 4)
    return rows


def provisioned_write_unit_price(utilisation: float = 0.7, prices: Prices = PRICES) -> float:
    """USD per write unit on provisioned capacity kept `utilisation` busy (auto scaling's target)."""
    return prices.dynamodb_wcu_hour / 3600 / utilisation


def provisioned_read_unit_price(utilisation: float = 0.7, prices: Prices = PRICES) -> float:
    """USD per read unit on provisioned capacity kept `utilisation` busy (auto scaling's target)."""
    return prices.dynamodb_rcu_hour / 3600 / utilisation


def provisioned_prices(utilisation: float, prices: Prices = PRICES) -> Prices:
    """`prices` with DynamoDB's request units at the provisioned rates for `utilisation`."""
    return replace(
        prices,
        dynamodb_write_units_per_million=provisioned_write_unit_price(utilisation, prices) * 1e6,
        dynamodb_read_units_per_million=provisioned_read_unit_price(utilisation, prices) * 1e6,
    )


RESERVED_TERM_HOURS = 365 * 24


RESERVED_BLOCK_UNITS = 100  # reserved capacity is bought in blocks of 100 units


def reserved_prices(prices: Prices = PRICES) -> Prices:
    """`prices` with provisioned capacity bought as one-year reserved capacity: its fee upfront spread
    over the term's hours, plus the hourly rate, a unit. (About 54 % under the provisioned rates; a
    commitment: the units reserved are paid for the year, busy or idle.)"""

    def hourly(upfront: float, hour: float) -> float:
        return (upfront / RESERVED_TERM_HOURS + hour) / RESERVED_BLOCK_UNITS

    return replace(
        prices,
        dynamodb_wcu_hour=hourly(
            prices.dynamodb_reserved_100_wcu_upfront, prices.dynamodb_reserved_100_wcu_hour
        ),
        dynamodb_rcu_hour=hourly(
            prices.dynamodb_reserved_100_rcu_upfront, prices.dynamodb_reserved_100_rcu_hour
        ),
    )


def eventbridge_scheduler_per_million(
    assumptions: Assumptions = Assumptions(), prices: Prices = PRICES
) -> dict[str, float]:
    """EventBridge Scheduler invoking a Lambda function per execution that runs the same task."""
    a = assumptions
    rows = {
        "scheduler": prices.eventbridge_scheduler_per_million,
        "lambda_requests": prices.lambda_requests_per_million,
        "lambda_compute": a.worker_memory_mb / 1024 * a.task_seconds * prices.lambda_arm64_gb_second * 1e6,
    }
    rows["total"] = round(sum(rows.values()), 4)
    return {k: round(v, 4) for k, v in rows.items()}
