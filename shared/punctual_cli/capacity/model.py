"""The capacity planner's arithmetic: cost per execution by service, and the plan (shards, fan-out,
worker concurrency, provisioned capacity, warnings near AWS's limits) for a sustained rate and a
busiest minute. Pure functions of punctual_cli.capacity.figures and punctual.platform.aws_limits.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from punctual.platform.aws_limits import (
    ACCOUNT_PROVISIONED_UNITS,
    API_GATEWAY_RPS,
    ESM_MAX_CONCURRENCY,
    EVENTBRIDGE_PUT_EVENTS_PER_SECOND,
    LAMBDA_ACCOUNT_CONCURRENCY,
    LAMBDA_MB_PER_VCPU,
    LAMBDA_REQUESTS_PER_ENVIRONMENT,
    MIN_POLLERS_RANGE,
    NEW_TABLE_WRITE_UNITS,
    PARTITION_WRITE_UNITS,
    POLLER_CONCURRENT_INVOKES,
    POLLER_RECEIVES_PER_SECOND,
    SQS_BATCH,
    SQS_IN_FLIGHT,
    TABLE_QUOTA_UNITS,
)
from punctual_cli.capacity.figures import (
    BATCH_JOBS,
    BOOKKEEPING_WRITES_PER_SHARD,
    FIXED_ALARMS,
    FIXED_METRICS,
    IDLE_POLLS_PER_MINUTE,
    INDEXES,
    KEYS_ONLY_ENTRY_BYTES,
    ONE_TIME,
    ONE_TIME_BATCHED,
    PRICES,
    RECURRING,
    SCANNER_CPU_MS_PER_1000,
    SCANNER_RATE_FULL_CORE,
    SECONDS_PER_MONTH,
    Assumptions,
    ExecutionUsage,
    Prices,
    batch_api_seconds,
)


def scanner_rate(memory_mb: int) -> float:
    """Executions a second one scanner invocation enqueues at `memory_mb` (GIL: one core at most)."""
    share = min(1.0, memory_mb / LAMBDA_MB_PER_VCPU)
    return min(SCANNER_RATE_FULL_CORE, share * 1e6 / SCANNER_CPU_MS_PER_1000)


def environments_for(invocations_per_second: float, seconds_each: float) -> float:
    """Execution environments a function needs for `invocations_per_second` lasting `seconds_each`:
    Little's law, and never under a tenth of the rate, since an environment serves about 10 requests a
    second however short they are ("Lambda scaling behavior")."""
    return max(
        invocations_per_second * seconds_each, invocations_per_second / LAMBDA_REQUESTS_PER_ENVIRONMENT
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


# ------------------------------------------------------------------------------------ cost


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
    events_invocations = events / a.events_batch
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


def events_per_execution(usage: ExecutionUsage, assumptions: Assumptions) -> float:
    """Execution status events an execution puts on the stack's bus, as `execution_events` says."""
    mode = assumptions.execution_events
    return {"all": usage.status_changes, "final": min(1.0, usage.status_changes)}.get(mode, 0.0)


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


# ------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class ProvisionedPlan:
    """The table provisioned and auto scaled to keep `target_utilisation` percent of it busy, and the
    CDK context that deploys it (`context`, the keys of infra/settings.py).

    Request units are priced as if the load were steady at the target: auto scaling then keeps the
    capacity at the load over the utilisation, so a unit consumed costs the capacity-hour price /
    3,600 / utilisation, and the minimums (sized to the sustained load) are paid by the executions.
    Units a second are sustained (the plan's rate) or peak (its busiest minute, every unit at its
    rate, job creation included, as the plan's load figures); the table's include the scanner's
    bookkeeping, the index's are those of the index written most (by_status), which each index is
    given (`index_write_units` is all the indexes' together). A busiest minute above
    the minimums is throttled until auto scaling catches up, minutes later: the plan warns.
    """

    target_utilisation: int  # percent
    write_unit_price: float  # USD a write unit consumed, at the target
    read_unit_price: float  # USD a read unit consumed, at the target
    table_write_units: float
    table_write_units_peak: float
    table_read_units: float
    table_read_units_peak: float
    index_write_units: float
    index_write_units_peak: float
    index_read_units: float  # list requests only, which the model leaves out: none assumed
    context: dict[str, Any]  # `-c key=value` to deploy with
    minimums_monthly: float  # USD a month for the minimums alone, busy or idle
    reserved: bool = False  # the capacity bought as one-year reserved capacity (`reserved_prices`)


@dataclass(frozen=True)
class Plan:
    executions_per_second: float  # sustained: the monthly cost is for this rate
    recurring_share: float
    busiest_minute: int  # executions due in the busiest minute
    peak_per_second: float  # the busiest minute's rate: the load figures below are at this rate
    drain_target_seconds: float
    shard_count: int
    scanner_fanout: int
    scanner_memory_mb: int
    scanner_rate_per_invocation: float  # executions a second: CPU share and bucket partition capped
    scanner_drain_seconds: float  # the busiest minute, every invocation in parallel
    markers_per_shard: int  # in the busiest minute
    bucket_drain_write_units: float  # a second, on the partition being drained (soon markers deleted)
    bucket_filing_write_units: float  # a second, markers filed into one bucket partition
    worker_executions_in_flight: float  # Little's law: rate x (task + batch overhead)
    worker_concurrency: float  # concurrent worker invocations, on average
    worker_max_concurrency: int  # the event source mapping setting to deploy, with headroom
    api_concurrency: float
    lambda_concurrency: float  # all functions at once, at peak
    api_requests_per_second: float
    dynamodb_write_units_per_second: float
    dynamodb_read_units_per_second: float
    sqs_requests_per_second: float
    cost_per_million: dict[str, float]
    monthly_cost: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    provisioned: ProvisionedPlan | None = None  # None: the table on-demand
    api_type: str = "http"  # the API Gateway type priced: "http" or "rest" (CDK context api_type)
    # The worker mapping in provisioned mode (priced with `pollers`): the pollers the busiest minute
    # needs, by receives and invokes. None: standard mode.
    worker_pollers: int | None = None
    # Execution status events put on the stack's bus a second, at peak (execution_events).
    events_per_second: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        if self.provisioned is None:
            del found["provisioned"]  # on-demand: no such key, as scripts reading the plan expect
        if self.worker_pollers is None:
            del found["worker_pollers"]
        return found


# Each marker partition's 1,000 write units a second are shared: draining (the scanner deleting the
# markers of a soon partition: hand-offs and short-period recurring jobs; it deletes nothing from a
# minute's bucket) may use half, filing (the API and the scanner writing markers) a quarter, so that
# both at once stay at three quarters of the limit.
DRAIN_SHARE = 0.5
FILING_SHARE = 0.25
# The event source mapping's maximum concurrency is set this much above the average need.
WORKER_HEADROOM = 1.5
# Provisioned: auto scaling's range of target utilisation, in percent.
UTILISATION_RANGE = (20, 90)
# Provisioned: no minimum below this, for what the model leaves out (reading and listing jobs,
# updating them, creating recurring ones). The index's reads are only list requests, none per
# execution: it gets this floor, and room to grow with them (a page of 50 KEYS_ONLY entries reads
# about one unit, so some 700 pages a second at 70 %).
MIN_PROVISIONED_UNITS = 10
INDEX_MAX_READ_UNITS = 1_000
HOURS_PER_MONTH = SECONDS_PER_MONTH / 3600


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
      percent busy: see `ProvisionedPlan` (priced for a steady load at the target) and `_provisioned`
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
        provisioned, monthly["fixed_capacity_floor"] = _provisioned(
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
    return replace(result, warnings=_warnings(result, prices))


def _capacity(units: float, utilisation: float) -> int:
    """Whole capacity units that `units` a second consumed keep `utilisation` busy."""
    return math.ceil(round(units / utilisation, 6))  # 21 / 0.7 is 30, not 31


def _provisioned(
    n: float,
    peak: float,
    usage: ExecutionUsage,
    a: Assumptions,
    shards: int,
    utilisation_percent: int,
    prices: Prices,
    *,
    reserved: bool,
) -> tuple[ProvisionedPlan, float]:
    """Bounds for the table and the index: the minimum what the sustained rate keeps at the target,
    the maximum what the busiest minute does (never below the minimum, nor MIN_PROVISIONED_UNITS).
    With them, USD a month for the minimums' capacity that the sustained load does not keep busy
    (the floors, and rounding up): the request unit prices pay for the rest."""
    u = utilisation_percent / 100
    writes = usage.write_units_keys_only if a.keys_only_indexes else usage.write_units
    index_writes = index_write_units(usage, a.keys_only_indexes)
    bookkeeping = BOOKKEEPING_WRITES_PER_SHARD * shards / 60
    table_writes = (n * (writes - index_writes) + bookkeeping, peak * (writes - index_writes) + bookkeeping)
    table_reads = (n * usage.read_units, peak * usage.read_units)
    # (each index gets the bounds of the one written most: a one-time execution writes three entries
    # of by_status and one of each other list index)
    busiest = usage.busiest_index_write_units_keys_only
    per_index = index_writes * busiest / usage.index_write_units_keys_only if busiest else index_writes
    index = (n * per_index, peak * per_index)

    def bounds(sustained: float, busiest: float) -> tuple[int, int]:
        low = max(MIN_PROVISIONED_UNITS, _capacity(sustained, u))
        return low, max(low, _capacity(busiest, u))

    (tw_min, tw_max), (tr_min, tr_max), (iw_min, iw_max) = (
        bounds(*table_writes),
        bounds(*table_reads),
        bounds(*index),
    )
    ir_min, ir_max = MIN_PROVISIONED_UNITS, INDEX_MAX_READ_UNITS
    idle_writes = tw_min - table_writes[0] / u + iw_min - index[0] / u
    idle_reads = tr_min - table_reads[0] / u + ir_min
    floor = (idle_writes * prices.dynamodb_wcu_hour + idle_reads * prices.dynamodb_rcu_hour) * HOURS_PER_MONTH
    context: dict[str, Any] = {
        "table_capacity": "provisioned",
        "table_min_write_units": tw_min,
        "table_max_write_units": tw_max,
        "table_min_read_units": tr_min,
        "table_max_read_units": tr_max,
        "index_min_write_units": iw_min,
        "index_max_write_units": iw_max,
        "index_min_read_units": ir_min,
        "index_max_read_units": ir_max,
        "table_target_utilisation": utilisation_percent,
    }
    minimums = (tw_min + iw_min) * prices.dynamodb_wcu_hour + (tr_min + ir_min) * prices.dynamodb_rcu_hour
    plan = ProvisionedPlan(
        reserved=reserved,
        target_utilisation=utilisation_percent,
        write_unit_price=provisioned_write_unit_price(u, prices),
        read_unit_price=provisioned_read_unit_price(u, prices),
        table_write_units=round(table_writes[0], 1),
        table_write_units_peak=round(table_writes[1], 1),
        table_read_units=round(table_reads[0], 1),
        table_read_units_peak=round(table_reads[1], 1),
        index_write_units=round(index[0], 1),
        index_write_units_peak=round(index[1], 1),
        index_read_units=0.0,
        context=context,
        minimums_monthly=round(minimums * HOURS_PER_MONTH, 2),
    )
    return plan, floor


def _near(value: float, quota: float, what: str, advice: str) -> list[str]:
    """A warning when `value` passes 80 % of `quota`."""
    if value <= 0.8 * quota:
        return []
    return [f"{what} {value:,.0f} is {value / quota:.0%} of {quota:,.0f}: {advice}"]


def _on_demand_warnings(p: Plan) -> list[str]:
    return [
        *_near(
            p.dynamodb_write_units_per_second,
            TABLE_QUOTA_UNITS,
            "DynamoDB write units/s",
            "the on-demand table quota; request an increase",
        ),
        *_near(
            p.dynamodb_read_units_per_second,
            TABLE_QUOTA_UNITS,
            "DynamoDB read units/s",
            "the on-demand table quota; request an increase",
        ),
        *_near(
            p.dynamodb_write_units_per_second,
            NEW_TABLE_WRITE_UNITS,
            "DynamoDB write units/s",
            "what a new on-demand table serves at first; pre-warm it (warm throughput)",
        ),
    ]


def _provisioned_warnings(p: ProvisionedPlan, prices: Prices) -> list[str]:
    c = p.context
    quota = "DynamoDB's quota a table or index for provisioned capacity; request an increase"
    account = "the account's quota for provisioned capacity in the region (all tables); request an increase"
    found = [
        *_near(c["table_max_write_units"], TABLE_QUOTA_UNITS, "table_max_write_units", quota),
        *_near(c["table_max_read_units"], TABLE_QUOTA_UNITS, "table_max_read_units", quota),
        *_near(c["index_max_write_units"], TABLE_QUOTA_UNITS, "index_max_write_units", quota),
        *_near(
            c["table_max_write_units"] + c["index_max_write_units"],
            ACCOUNT_PROVISIONED_UNITS,
            "write units provisioned at peak, table and index,",
            account,
        ),
        *_near(
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


def _warnings(p: Plan, prices: Prices = PRICES) -> list[str]:
    found = [
        *(_on_demand_warnings(p) if p.provisioned is None else _provisioned_warnings(p.provisioned, prices)),
        *_near(
            p.worker_max_concurrency,
            ESM_MAX_CONCURRENCY,
            "worker max concurrency",
            "the event source mapping's maximum; shorter tasks, or a second queue",
        ),
        *_near(
            p.lambda_concurrency,
            LAMBDA_ACCOUNT_CONCURRENCY,
            "Lambda concurrency",
            "the default account quota; request an increase",
        ),
        *_near(
            p.worker_executions_in_flight,
            SQS_IN_FLIGHT,
            "SQS messages in flight",
            "a standard queue's limit; a second queue",
        ),
        *_near(
            p.api_requests_per_second,
            API_GATEWAY_RPS,
            "API requests/s",
            "API Gateway's account quota; request an increase, or create jobs in batches",
        ),
        *_near(
            p.events_per_second,
            EVENTBRIDGE_PUT_EVENTS_PER_SECOND,
            "execution events/s",
            "EventBridge's PutEvents quota in us-east-1 (lower in most regions); request an increase, "
            "or deploy -c execution_events=final (one an execution) or off",
        ),
    ]
    if p.scanner_drain_seconds > p.drain_target_seconds:
        found.append(f"the busiest minute drains in {p.scanner_drain_seconds:,.0f} s, over the target")
    return found
