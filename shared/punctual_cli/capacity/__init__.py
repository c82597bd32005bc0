"""The capacity planner: how to deploy Punctual for N executions a second, and what it costs.

Laptop-side only (`punctual capacity`, the benchmarks, infra's settings): no Lambda function imports
it, and it is not in the Lambda bundle. Pure arithmetic on three kinds of input, each stated where it
is defined:
- AWS list prices (`figures.Prices`, the one price table) and limits (punctual.platform.aws_limits, which the
  runtime shares);
- figures measured by the benchmarks (`bench/scanner_throughput.py`, `bench/cost/`), kept as data
  in `figures` with the command that produced them;
- assumptions (task duration, Lambda memory, batch fill: `figures.Assumptions`), which the caller can
  change.
`model` computes the plan from them (with `cost`, `provisioned` and the warnings of `limits`;
`result` holds what it answers), `render` shows it to people, and `command` is `punctual capacity`. docs/scaling.md walks through
the same arithmetic for 10,000 a second and a 1,000,000 burst minute. The table is priced on-demand,
or provisioned and auto scaled (`plan(..., utilisation_percent=70)`).

The names below are the planner's interface, used as `capacity.plan(...)`, `capacity.PRICES`.
"""

from punctual_cli.capacity.cost import (
    RESERVED_BLOCK_UNITS,
    RESERVED_TERM_HOURS,
    changes_per_event,
    cost_per_execution,
    eventbridge_scheduler_per_million,
    events_per_execution,
    fixed_monthly,
    index_write_units,
    per_million,
    provisioned_prices,
    provisioned_read_unit_price,
    provisioned_write_unit_price,
    reserved_prices,
    status_changes_put,
)
from punctual_cli.capacity.figures import (
    BATCH_JOBS,
    BOOKKEEPING_WRITES_PER_SHARD,
    EVENTBRIDGE_EVENT_BYTES,
    EVENTS_ENTRY_OVERHEAD_BYTES,
    FIXED_ALARMS,
    FIXED_METRICS,
    HANDED_OFF_EXTRA_WRITE_UNITS,
    HANDED_OFF_FEWER_READ_UNITS,
    HOURS_PER_MONTH,
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
    WORKER_CPU_MS_PER_WEBHOOK,
    Assumptions,
    ExecutionUsage,
    Prices,
    batch_api_seconds,
    scanner_rate,
)
from punctual_cli.capacity.model import (
    DRAIN_SHARE,
    FILING_SHARE,
    WORKER_HEADROOM,
    blended,
    environments_for,
    plan,
)
from punctual_cli.capacity.provisioned import INDEX_MAX_READ_UNITS, MIN_PROVISIONED_UNITS, UTILISATION_RANGE
from punctual_cli.capacity.render import render
from punctual_cli.capacity.result import Plan, ProvisionedPlan

__all__ = [
    "BATCH_JOBS",
    "BOOKKEEPING_WRITES_PER_SHARD",
    "DRAIN_SHARE",
    "EVENTBRIDGE_EVENT_BYTES",
    "EVENTS_ENTRY_OVERHEAD_BYTES",
    "FILING_SHARE",
    "FIXED_ALARMS",
    "FIXED_METRICS",
    "HANDED_OFF_EXTRA_WRITE_UNITS",
    "HANDED_OFF_FEWER_READ_UNITS",
    "HOURS_PER_MONTH",
    "IDLE_POLLS_PER_MINUTE",
    "INDEXES",
    "INDEX_MAX_READ_UNITS",
    "KEYS_ONLY_ENTRY_BYTES",
    "MIN_PROVISIONED_UNITS",
    "ONE_TIME",
    "ONE_TIME_BATCHED",
    "PRICES",
    "RECURRING",
    "RESERVED_BLOCK_UNITS",
    "RESERVED_TERM_HOURS",
    "SCANNER_CPU_MS_PER_1000",
    "SCANNER_RATE_FULL_CORE",
    "SECONDS_PER_MONTH",
    "UTILISATION_RANGE",
    "WORKER_CPU_MS_PER_WEBHOOK",
    "WORKER_HEADROOM",
    "Assumptions",
    "ExecutionUsage",
    "Plan",
    "Prices",
    "ProvisionedPlan",
    "batch_api_seconds",
    "blended",
    "changes_per_event",
    "cost_per_execution",
    "environments_for",
    "eventbridge_scheduler_per_million",
    "events_per_execution",
    "fixed_monthly",
    "index_write_units",
    "per_million",
    "plan",
    "provisioned_prices",
    "provisioned_read_unit_price",
    "provisioned_write_unit_price",
    "render",
    "reserved_prices",
    "scanner_rate",
    "status_changes_put",
]
