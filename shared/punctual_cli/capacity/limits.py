"""The plan's warnings: a figure past 80 % of an AWS limit (quotas of DynamoDB, Lambda, SQS, API
Gateway, EventBridge), a busiest minute that provisioned capacity would throttle, a scanner that
drains too slowly."""

from __future__ import annotations

import math

from punctual.platform.aws_limits import (
    ACCOUNT_PROVISIONED_UNITS,
    API_GATEWAY_RPS,
    ESM_MAX_CONCURRENCY,
    EVENTBRIDGE_PUT_EVENTS_PER_SECOND,
    LAMBDA_ACCOUNT_CONCURRENCY,
    NEW_TABLE_WRITE_UNITS,
    SQS_IN_FLIGHT,
    TABLE_QUOTA_UNITS,
)
from punctual_cli.capacity.cost import RESERVED_BLOCK_UNITS
from punctual_cli.capacity.figures import (
    HOURS_PER_MONTH,
    PRICES,
    Prices,
)
from punctual_cli.capacity.result import Plan, ProvisionedPlan


def near_limit(value: float, quota: float, what: str, advice: str) -> list[str]:
    """A warning when `value` passes 80 % of `quota`."""
    if value <= 0.8 * quota:
        return []
    return [f"{what} {value:,.0f} is {value / quota:.0%} of {quota:,.0f}: {advice}"]


def on_demand_warnings(p: Plan) -> list[str]:
    return [
        *near_limit(
            p.dynamodb_write_units_per_second,
            TABLE_QUOTA_UNITS,
            "DynamoDB write units/s",
            "the on-demand table quota; request an increase",
        ),
        *near_limit(
            p.dynamodb_read_units_per_second,
            TABLE_QUOTA_UNITS,
            "DynamoDB read units/s",
            "the on-demand table quota; request an increase",
        ),
        *near_limit(
            p.dynamodb_write_units_per_second,
            NEW_TABLE_WRITE_UNITS,
            "DynamoDB write units/s",
            "what a new on-demand table serves at first; pre-warm it (warm throughput)",
        ),
    ]


def provisioned_warnings(p: ProvisionedPlan, prices: Prices) -> list[str]:
    c = p.context
    quota = "DynamoDB's quota a table or index for provisioned capacity; request an increase"
    account = "the account's quota for provisioned capacity in the region (all tables); request an increase"
    found = [
        *near_limit(c["table_max_write_units"], TABLE_QUOTA_UNITS, "table_max_write_units", quota),
        *near_limit(c["table_max_read_units"], TABLE_QUOTA_UNITS, "table_max_read_units", quota),
        *near_limit(c["index_max_write_units"], TABLE_QUOTA_UNITS, "index_max_write_units", quota),
        *near_limit(
            c["table_max_write_units"] + c["index_max_write_units"],
            ACCOUNT_PROVISIONED_UNITS,
            "write units provisioned at peak, table and index,",
            account,
        ),
        *near_limit(
            c["table_max_read_units"] + c["index_max_read_units"],
            ACCOUNT_PROVISIONED_UNITS,
            "read units provisioned at peak, table and index,",
            account,
        ),
    ]
    if p.reserved:
        for what, units in (
            ("write", c["table_min_write_units"] + c["index_min_write_units"]),
            ("read", c["table_min_read_units"] + c["index_min_read_units"]),
        ):
            if units < RESERVED_BLOCK_UNITS:
                found.append(
                    f"reserved capacity is bought {RESERVED_BLOCK_UNITS} units at a time: the minimum "
                    f"{units:,} {what} units (table and index) are under one block, so the reserved "
                    "prices do not apply to them; leave out --reserved"
                )
    # A burst beyond the minimum: auto scaling raises capacity only after about two minutes of
    # consumption over the target, in steps, and does not see throttled requests.
    # The index's writes are job creations: a burst of executions loads it only if their jobs are
    # created in that minute too, which the plan assumes, as its load figures do.
    for what, busiest, setting, hourly, note in (
        ("table write", p.table_write_units_peak, "table_min_write_units", prices.dynamodb_wcu_hour, ""),
        ("table read", p.table_read_units_peak, "table_min_read_units", prices.dynamodb_rcu_hour, ""),
        (
            "index write",
            p.index_write_units_peak,
            "index_min_write_units",
            prices.dynamodb_wcu_hour,
            " (if the burst's jobs are created in that minute too)",
        ),
    ):
        minimum = c[setting]
        if busiest <= minimum:
            continue
        needed = math.ceil(busiest)
        found.append(
            f"the busiest minute needs {busiest:,.0f} {what} units/s{note}, over the {minimum:,} of "
            f"{setting}: auto scaling adds capacity only after about two minutes over the target, so "
            f"the burst is throttled and runs late. Deploy on-demand, or raise {setting} to {needed:,} "
            f"(${(needed - minimum) * hourly * HOURS_PER_MONTH:,.0f} a month more, busy or idle)"
        )
    return found


def warnings_for(p: Plan, prices: Prices = PRICES) -> list[str]:
    found = [
        *(on_demand_warnings(p) if p.provisioned is None else provisioned_warnings(p.provisioned, prices)),
        *near_limit(
            p.worker_max_concurrency,
            ESM_MAX_CONCURRENCY,
            "worker max concurrency",
            "the event source mapping's maximum; shorter tasks, or a second queue",
        ),
        *near_limit(
            p.lambda_concurrency,
            LAMBDA_ACCOUNT_CONCURRENCY,
            "Lambda concurrency",
            "the default account quota; request an increase",
        ),
        *near_limit(
            p.worker_executions_in_flight,
            SQS_IN_FLIGHT,
            "SQS messages in flight",
            "a standard queue's limit; a second queue",
        ),
        *near_limit(
            p.api_requests_per_second,
            API_GATEWAY_RPS,
            "API requests/s",
            "API Gateway's account quota; request an increase, or create jobs in batches",
        ),
        *near_limit(
            p.events_per_second,
            EVENTBRIDGE_PUT_EVENTS_PER_SECOND,
            # Entries, each counted as a transaction: the stricter reading of a quota in transactions.
            "execution event entries/s",
            "EventBridge's PutEvents quota in us-east-1 (lower in most regions); request an increase, "
            "or deploy -c execution_events=final (the ends only) or off",
        ),
    ]
    if p.scanner_drain_seconds > p.drain_target_seconds:
        found.append(f"the busiest minute drains in {p.scanner_drain_seconds:,.0f} s, over the target")
    return found
