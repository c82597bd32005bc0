"""The capacity plan for people: one line a figure, the reason beside it (`punctual capacity`)."""

from __future__ import annotations

from punctual.platform.aws_limits import PARTITION_WRITE_UNITS
from punctual_cli.capacity.figures import PRICES
from punctual_cli.capacity.result import Plan, ProvisionedPlan

_API_NAMES = {"http": "HTTP API", "rest": "REST API"}


def render(p: Plan) -> str:
    """The plan for people: one line a figure, the reason in brackets."""
    lines = [
        f"Punctual capacity plan: {p.executions_per_second:,.0f} executions/s ({p.recurring_share:.0%} "
        f"recurring), busiest minute {p.busiest_minute:,} executions",
        "",
        "deploy (CDK context), at least",
        f"  shard_count             {p.shard_count:>9,}   {p.markers_per_shard:,} markers a shard in the "
        f"busiest minute; filing {p.bucket_filing_write_units:,.0f} writes/s a bucket",
        f"  scanner_fanout          {p.scanner_fanout:>9,}   {p.scanner_rate_per_invocation:,.0f} executions/s "
        f"an invocation at {p.scanner_memory_mb} MB: drains in {p.scanner_drain_seconds:,.1f} s "
        f"(target {p.drain_target_seconds:,.0f} s)",
        f"  worker_max_concurrency  {p.worker_max_concurrency:>9,}   {p.worker_concurrency:,.1f} busy on "
        f"average, {p.worker_executions_in_flight:,.0f} executions in flight",
        *(
            []
            if p.worker_pollers is None
            else [
                f"  worker_max_pollers      {p.worker_pollers:>9,}   provisioned mode (instead): 10 invokes, "
                f"10 receives/s a poller (${PRICES.sqs_poller_epu_hour:.5f} a poller-hour)"
            ]
        ),
        "",
        f"load, at {p.peak_per_second:,.0f} executions/s",
        f"  DynamoDB write units/s  {p.dynamodb_write_units_per_second:>9,.0f}",
        f"  DynamoDB read units/s   {p.dynamodb_read_units_per_second:>9,.0f}",
        f"  bucket writes/s         {p.bucket_drain_write_units + p.bucket_filing_write_units:>9,.0f}   "
        f"draining and filing, of {PARTITION_WRITE_UNITS:,.0f} a partition",
        f"  SQS requests/s          {p.sqs_requests_per_second:>9,.0f}",
        f"  API requests/s          {p.api_requests_per_second:>9,.0f}",
        f"  Lambda concurrency      {p.lambda_concurrency:>9,.0f}   API {p.api_concurrency:,.0f}, workers "
        f"{p.worker_concurrency:,.0f}, scanners {p.scanner_fanout:,}",
        "",
    ]
    if p.provisioned is None:
        lines += [f"cost per month (us-east-1 list prices, {_API_NAMES[p.api_type]}, on-demand)"]
    else:
        lines += [
            *_render_provisioned(p.provisioned),
            "",
            f"cost per month (us-east-1 list prices, {_API_NAMES[p.api_type]}, provisioned "
            f"{p.provisioned.target_utilisation}% busy"
            f"{', one-year reserved capacity' if p.provisioned.reserved else ''}: a steady load assumed)",
        ]
    lines += [f"  {name:<26} ${value:>13,.2f}" for name, value in p.monthly_cost.items() if name != "total"]
    lines += [
        f"  {'total':<26} ${p.monthly_cost['total']:>13,.2f}",
        f"  {'per million executions':<26} ${p.cost_per_million['total']:>13,.2f}",
    ]
    if p.provisioned is not None:
        lines += [
            f"  {'minimums, busy or idle':<26} ${p.provisioned.minimums_monthly:>13,.2f}   the floor "
            "if the load stops",
        ]
    if p.warnings:
        lines += ["", "limits", *(f"  ! {w}" for w in p.warnings)]
    return "\n".join(lines)


def _render_provisioned(p: ProvisionedPlan) -> list[str]:
    """The provisioned settings, each with the load it is sized from."""
    c = p.context
    share = f"/ {p.target_utilisation}%"
    reasons = {
        "table_capacity": "auto scaled between the bounds below",
        "table_min_write_units": f"sustained {p.table_write_units:,.0f} write units/s {share}",
        "table_max_write_units": f"busiest minute {p.table_write_units_peak:,.0f} write units/s {share}",
        "table_min_read_units": f"sustained {p.table_read_units:,.0f} read units/s {share}",
        "table_max_read_units": f"busiest minute {p.table_read_units_peak:,.0f} read units/s {share}",
        "index_min_write_units": f"by_owner: sustained {p.index_write_units:,.0f} write units/s {share}",
        "index_max_write_units": f"busiest minute {p.index_write_units_peak:,.0f} write units/s {share}",
        "index_min_read_units": "list requests only, not modelled: none assumed, a floor",
        "index_max_read_units": "room for list requests, about one unit a page",
        "table_target_utilisation": f"write unit ${p.write_unit_price * 1e6:,.4f}/M, "
        f"read unit ${p.read_unit_price * 1e6:,.4f}/M",
    }
    lines = [f"deploy provisioned (CDK context), kept {p.target_utilisation}% busy"]
    for key, value in c.items():
        shown = f"{value:>11,}" if isinstance(value, int) else f"{value:>11}"
        lines.append(f"  {key:<25}{shown}   {reasons[key]}")
    return lines
