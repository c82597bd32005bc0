"""The capacity planner's arithmetic: the plan (shards, fan-out, worker concurrency, API, pollers,
monthly cost) for a sustained rate and a busiest minute. The cost is in `cost`, the provisioned
table's bounds in `provisioned`, the warnings near AWS's limits in `limits`."""

from __future__ import annotations

import math
from dataclasses import asdict, replace

from punctual.platform.aws_limits import (
    LAMBDA_REQUESTS_PER_ENVIRONMENT,
    MIN_POLLERS_RANGE,
    PARTITION_WRITE_UNITS,
    POLLER_CONCURRENT_INVOKES,
    POLLER_RECEIVES_PER_SECOND,
    SQS_BATCH,
)
from punctual_cli.capacity.cost import (
    cost_per_execution,
    events_per_execution,
    fixed_monthly,
    per_million,
    provisioned_prices,
    reserved_prices,
)
from punctual_cli.capacity.figures import (
    BATCH_JOBS,
    HOURS_PER_MONTH,
    ONE_TIME,
    ONE_TIME_BATCHED,
    PRICES,
    RECURRING,
    SECONDS_PER_MONTH,
    Assumptions,
    ExecutionUsage,
    Prices,
    batch_api_seconds,
    scanner_rate,
)
from punctual_cli.capacity.limits import warnings_for
from punctual_cli.capacity.provisioned import UTILISATION_RANGE, provisioned_plan
from punctual_cli.capacity.result import Plan

# Each marker partition's 1,000 write units a second are shared: draining (the scanner deleting the
# markers of a soon partition: hand-offs and short-period recurring jobs; it deletes nothing from a
# minute's bucket) may use half, filing (the API and the scanner writing markers) a quarter, so that
# both at once stay at three quarters of the limit.
DRAIN_SHARE = 0.5


FILING_SHARE = 0.25


# The event source mapping's maximum concurrency is set this much above the average need.
WORKER_HEADROOM = 1.5


def environments_for(invocations_per_second: float, seconds_each: float) -> float:
    """Execution environments a function needs for `invocations_per_second` lasting `seconds_each`:
    Little's law, and never under a tenth of the rate, since an environment serves about 10 requests a
    second however short they are ("Lambda scaling behavior")."""
    return max(
        invocations_per_second * seconds_each, invocations_per_second / LAMBDA_REQUESTS_PER_ENVIRONMENT
    )


def blended(recurring_share: float, *, batched: bool = False) -> ExecutionUsage:
    """Usage of an average execution when `recurring_share` of them are cron/rate occurrences (and the
    one-time jobs are created through POST /jobs/batch, when `batched`)."""
    one, rec = asdict(ONE_TIME_BATCHED if batched else ONE_TIME), asdict(RECURRING)
    return ExecutionUsage(**{k: (1 - recurring_share) * one[k] + recurring_share * rec[k] for k in one})


def plan(
    executions_per_second: float,
    *,
    recurring_share: float = 0.0,
    burst_minute: int | None = None,
    drain_seconds: float = 30.0,
    batched: bool = False,
    utilisation_percent: int | None = None,
    reserved: bool = False,
    pollers: int = 0,
    warm_pollers: int = 0,
    warm_hours: float = 0.0,
    assumptions: Assumptions = Assumptions(),
    prices: Prices = PRICES,
) -> Plan:
    """The deployment for a sustained rate (and an optional busier minute), and what it costs.

    - Scanner: the busiest minute must drain within `drain_seconds`. One invocation scans its shards
      one after another at its rate — the measured one, capped by the CPU share of its memory and,
      for recurring occurrences (taken as short-period: their markers sit in a soon partition and are
      deleted once sent), by the drain share of that partition — so the fan-out is the busiest minute
      over what one invocation drains in `drain_seconds`. One-time jobs filed ahead are read from
      their minute's bucket and not deleted: no partition limit applies to them.
    - Shards: at least one per invocation (a multiple of the fan-out, for even groups), and enough
      that filing a marker for every execution stays within the filing share of each bucket.
    - Workers: Little's law, executions in flight = rate x (task + batch overhead), ten a batch.
    - API: one request a one-time job, or one a BATCH_JOBS of them when `batched` (longer each).
      Either function needs at least a tenth of its invocations a second in environments
      (`environments_for`).
    - DynamoDB: on-demand, or with `utilisation_percent`, provisioned and auto scaled to keep that
      percent busy: see `ProvisionedPlan` (priced for a steady load at the target) and `provisioned_plan`
      (its bounds); `reserved`, that capacity bought as one-year reserved capacity.
    - Worker pollers: with `pollers`, the worker mapping in provisioned mode with that minimum, paid
      all month; `warm_pollers` more minimum for `warm_hours` a month (raised ahead of bursts,
      punctual.scheduling.prescaling). The plan also says how many pollers the busiest minute needs.
    Load figures are at the busiest minute's rate; the monthly cost at the sustained rate.
    """
    if executions_per_second <= 0:
        raise ValueError("executions_per_second must be positive")
    if not 0 <= recurring_share <= 1:
        raise ValueError("recurring_share is between 0 and 1")
    low, high = UTILISATION_RANGE
    if utilisation_percent is not None and not low <= utilisation_percent <= high:
        raise ValueError(
            f"utilisation_percent is between {low} and {high} (DynamoDB auto scaling's target range), "
            f"not {utilisation_percent}"
        )
    if reserved:
        if utilisation_percent is None:
            raise ValueError("reserved capacity is for a provisioned table: give utilisation_percent")
        prices = reserved_prices(prices)
    a = replace(assumptions, api_seconds=batch_api_seconds(BATCH_JOBS)) if batched else assumptions
    n = executions_per_second
    busiest = max(math.ceil(60 * n), burst_minute or 0)
    deletes_per_execution = recurring_share  # a soon marker deleted per recurring occurrence
    drain_cap = (
        PARTITION_WRITE_UNITS * DRAIN_SHARE / deletes_per_execution if deletes_per_execution else math.inf
    )
    rate = min(scanner_rate(a.scanner_memory_mb), drain_cap)
    fanout = max(1, math.ceil(busiest / (drain_seconds * rate)))
    # Every execution files one marker: the API for a new job, the scanner for the next occurrence.
    shards = max(fanout, math.ceil(n / (PARTITION_WRITE_UNITS * FILING_SHARE)))
    shards = math.ceil(shards / fanout) * fanout

    peak = busiest / 60
    in_flight = peak * (a.task_seconds + a.worker_overhead_seconds)
    worker_concurrency = environments_for(peak / a.batch_fill, a.task_seconds + a.worker_overhead_seconds)
    usage = blended(recurring_share, batched=batched)
    api_rps = n * usage.api_requests
    api_concurrency = environments_for(api_rps, a.api_seconds)
    write_units = usage.write_units_keys_only if a.keys_only_indexes else usage.write_units
    utilisation = None if utilisation_percent is None else utilisation_percent / 100
    costs = cost_per_execution(usage, a, prices, utilisation=utilisation)
    monthly = {k: v * n * SECONDS_PER_MONTH for k, v in costs.items()}
    fixed_prices = prices if utilisation is None else provisioned_prices(utilisation, prices)
    monthly.update({f"fixed_{k}": v for k, v in fixed_monthly(fanout, shards, fixed_prices).items()})
    provisioned = None
    if utilisation_percent is not None:
        provisioned, monthly["fixed_capacity_floor"] = provisioned_plan(
            n, peak, usage, a, shards, utilisation_percent, prices, reserved=reserved
        )
    if pollers:
        low, high = MIN_POLLERS_RANGE
        if not low <= pollers <= high or not pollers <= warm_pollers + pollers <= high:
            raise ValueError(f"minimum pollers are between {low} and {high}")
        monthly["fixed_worker_pollers"] = pollers * HOURS_PER_MONTH * prices.sqs_poller_epu_hour
        monthly["worker_pollers_warmed"] = warm_pollers * warm_hours * prices.sqs_poller_epu_hour
    elif warm_pollers or warm_hours:
        raise ValueError("warm pollers are for a mapping in provisioned mode: give pollers")
    monthly = {k: round(v, 2) for k, v in monthly.items()}
    monthly["total"] = round(sum(monthly.values()), 2)

    result = Plan(
        api_type="http" if assumptions.http_api else "rest",
        executions_per_second=n,
        recurring_share=recurring_share,
        busiest_minute=busiest,
        peak_per_second=round(peak, 1),
        drain_target_seconds=drain_seconds,
        shard_count=shards,
        scanner_fanout=fanout,
        scanner_memory_mb=a.scanner_memory_mb,
        scanner_rate_per_invocation=round(rate, 1),
        scanner_drain_seconds=round(math.ceil(busiest / fanout) / rate, 1),
        markers_per_shard=math.ceil(busiest / shards),
        bucket_drain_write_units=round(rate * deletes_per_execution, 1),
        bucket_filing_write_units=round(n / shards, 1),
        worker_executions_in_flight=round(in_flight, 1),
        worker_concurrency=round(worker_concurrency, 1),
        worker_max_concurrency=max(2, math.ceil(worker_concurrency * WORKER_HEADROOM)),
        worker_pollers=max(
            MIN_POLLERS_RANGE[0],
            math.ceil(worker_concurrency * WORKER_HEADROOM / POLLER_CONCURRENT_INVOKES),
            math.ceil(peak * WORKER_HEADROOM / SQS_BATCH / POLLER_RECEIVES_PER_SECOND),
        )
        if pollers
        else None,
        api_concurrency=round(api_concurrency, 1),
        lambda_concurrency=round(worker_concurrency + api_concurrency + fanout, 1),
        api_requests_per_second=round(api_rps, 1),
        dynamodb_write_units_per_second=round(peak * write_units, 1),
        dynamodb_read_units_per_second=round(peak * usage.read_units, 1),
        sqs_requests_per_second=round(peak * usage.sqs_requests, 1),
        events_per_second=round(peak * events_per_execution(usage, a), 1),
        cost_per_million=per_million(costs),
        monthly_cost=monthly,
        provisioned=provisioned,
    )
    return replace(result, warnings=warnings_for(result, prices))
