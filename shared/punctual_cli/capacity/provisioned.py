"""The table provisioned and auto scaled: the bounds of its capacity (and of its index's) for a
sustained rate and a busiest minute, the CDK context that deploys them, and what the minimums cost."""

from __future__ import annotations

import math
from typing import Any

from punctual_cli.capacity.cost import (
    index_write_units,
    provisioned_read_unit_price,
    provisioned_write_unit_price,
)
from punctual_cli.capacity.figures import (
    BOOKKEEPING_WRITES_PER_SHARD,
    HOURS_PER_MONTH,
    Assumptions,
    ExecutionUsage,
    Prices,
)
from punctual_cli.capacity.result import ProvisionedPlan

# Provisioned: auto scaling's range of target utilisation, in percent.
UTILISATION_RANGE = (20, 90)


# Provisioned: no minimum below this, for what the model leaves out (reading and listing jobs,
# updating them, creating recurring ones). The index's reads are only list requests, none per
# execution: it gets this floor, and room to grow with them (a page of 50 KEYS_ONLY entries reads
# about one unit, so some 700 pages a second at 70 %).
MIN_PROVISIONED_UNITS = 10


INDEX_MAX_READ_UNITS = 1_000


def capacity_units(units: float, utilisation: float) -> int:
    """Whole capacity units that `units` a second consumed keep `utilisation` busy."""
    return math.ceil(round(units / utilisation, 6))  # 21 / 0.7 is 30, not 31


def provisioned_plan(
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
        low = max(MIN_PROVISIONED_UNITS, capacity_units(sustained, u))
        return low, max(low, capacity_units(busiest, u))

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
