"""The capacity plan in provisioned mode: the units a load keeps busy, their bounds and price, the
warnings, and the on-demand plan's output unchanged beside it (docs/scaling.md).
"""

from __future__ import annotations

import json
import math

import pytest

from infra.settings import DeploySettings
from punctual_cli import capacity, common
from punctual_cli import main as cli
from punctual_cli.capacity.figures import Prices
from tests.unit.cli.capacity_inputs import BOOKKEEPING, FULL_VCPU, TABLE_WRITES, USAGE

READS = capacity.ONE_TIME.read_units  # a one-time execution's read units

# What `capacity --jobs-per-second N --json` printed before the provisioned mode: its fields must not
# change for the on-demand plan.
ON_DEMAND_FIELDS = {
    "api_type",
    "executions_per_second",
    "recurring_share",
    "busiest_minute",
    "peak_per_second",
    "drain_target_seconds",
    "shard_count",
    "scanner_fanout",
    "scanner_memory_mb",
    "scanner_rate_per_invocation",
    "scanner_drain_seconds",
    "markers_per_shard",
    "bucket_drain_write_units",
    "bucket_filing_write_units",
    "worker_executions_in_flight",
    "worker_concurrency",
    "worker_max_concurrency",
    "api_concurrency",
    "lambda_concurrency",
    "api_requests_per_second",
    "dynamodb_write_units_per_second",
    "dynamodb_read_units_per_second",
    "sqs_requests_per_second",
    "events_per_second",
    "cost_per_million",
    "monthly_cost",
    "warnings",
}
ON_DEMAND_COST_ROWS = [
    "api_gateway",
    "lambda_requests",
    "lambda_compute",
    "dynamodb_writes",
    "dynamodb_reads",
    "dynamodb_storage",
    "sqs",
    "eventbridge_events",
    "cloudwatch_logs",
    "xray",
]
CONTEXT_KEYS = [
    "table_capacity",
    "table_min_write_units",
    "table_max_write_units",
    "table_min_read_units",
    "table_max_read_units",
    "index_min_write_units",
    "index_max_write_units",
    "index_min_read_units",
    "index_max_read_units",
    "table_target_utilisation",
]
HOURS = 730


def test_the_indexes_take_one_write_of_a_one_time_execution_and_none_of_an_occurrence() -> None:
    # KEYS_ONLY: the by_owner entry put at creation (an unnamed job that succeeds has no by_name or
    # by_flag entry); an occurrence whose outcome holds writes none
    assert capacity.index_write_units(capacity.ONE_TIME) == 1
    assert capacity.index_write_units(capacity.ONE_TIME_BATCHED) == 0.01  # a batch's one entry
    assert capacity.index_write_units(capacity.RECURRING) == 0
    assert capacity.index_write_units(capacity.blended(0.25)) == pytest.approx(0.75)
    # Projecting ALL, every rewrite of the job rewrites its entries: what ALL adds is the indexes'
    assert capacity.index_write_units(capacity.ONE_TIME, keys_only=False) == 1 + (7 - 6)
    assert capacity.index_write_units(capacity.RECURRING, keys_only=False) == 0 + (8 - 6)


def test_provisioned_units_are_priced_from_the_capacity_hour_prices() -> None:
    # Given a price table of round numbers, and capacity kept 50 % busy
    prices = Prices(dynamodb_wcu_hour=0.0036, dynamodb_rcu_hour=0.0018)
    # When pricing an execution of USAGE (6 write units, 1 of them the index's; 4 read units)
    on_demand = capacity.cost_per_execution(USAGE, FULL_VCPU, prices)
    provisioned = capacity.cost_per_execution(USAGE, FULL_VCPU, prices, utilisation=0.5)
    # Then a write unit costs $0.0036 an hour / 3,600 s / 0.5 = $2 a million, a read unit $1
    assert capacity.provisioned_write_unit_price(0.5, prices) == pytest.approx(2e-6)
    assert capacity.provisioned_read_unit_price(0.5, prices) == pytest.approx(1e-6)
    assert provisioned["dynamodb_writes"] == pytest.approx(5 * 2e-6)  # the table's share
    assert provisioned["dynamodb_index_writes"] == pytest.approx(1 * 2e-6)
    assert provisioned["dynamodb_reads"] == pytest.approx(4 * 1e-6)
    # and nothing else changes
    others = {
        k: v for k, v in provisioned.items() if not k.startswith("dynamodb_") or k == "dynamodb_storage"
    }
    assert others == {k: v for k, v in on_demand.items() if k in others}
    assert list(on_demand) == ON_DEMAND_COST_ROWS


def test_provisioned_at_seventy_percent_is_cheaper_per_unit_than_on_demand() -> None:
    p = capacity.PRICES
    assert capacity.provisioned_write_unit_price(0.7) * 1e6 < p.dynamodb_write_units_per_million
    assert capacity.provisioned_read_unit_price(0.7) * 1e6 < p.dynamodb_read_units_per_million
    assert capacity.provisioned_read_unit_price(0.7) == pytest.approx(p.dynamodb_rcu_hour / 3600 / 0.7)


def test_ten_thousand_a_second_provisioned_bounds() -> None:
    # Given 10,000 one-time executions a second on 40 shards, provisioned 70 % busy
    p = capacity.plan(10_000, utilisation_percent=70, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    c = p.provisioned.context
    # Then the table takes all but the index's write unit, plus the scanner's 3 a shard a minute
    table = 10_000 * TABLE_WRITES + BOOKKEEPING * 40 / 60
    assert p.provisioned.table_write_units == pytest.approx(table)
    assert c["table_min_write_units"] == math.ceil(table / 0.7)
    assert c["table_min_read_units"] == math.ceil(10_000 * READS / 0.7)
    # and each index what by_owner takes, the most written: 1 a one-time execution, 10,000 / 0.7
    assert p.provisioned.index_write_units == 10_000
    assert c["index_min_write_units"] == 14_286
    # and with no busier minute, the maximums are the minimums
    assert c["table_max_write_units"] == c["table_min_write_units"]
    assert c["table_max_read_units"] == c["table_min_read_units"]
    assert c["index_max_write_units"] == c["index_min_write_units"]
    # and list requests, not modelled, get the floor and room to grow
    assert (c["index_min_read_units"], c["index_max_read_units"]) == (10, 1_000)
    assert (c["table_capacity"], c["table_target_utilisation"]) == ("provisioned", 70)
    assert list(c) == CONTEXT_KEYS
    assert not any("busiest minute" in w for w in p.warnings)


def test_a_hundred_a_second_half_busy_bounds() -> None:
    # Given 100 one-time executions a second (one shard), provisioned 50 % busy
    p = capacity.plan(100, utilisation_percent=50, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    c = p.provisioned.context
    # Then each figure is the load over a half: (100 x table units + 3/60) / 0.5, 100 x read units / 0.5,
    # 100 / 0.5
    assert p.shard_count == 1
    assert (c["table_min_write_units"], c["table_min_read_units"], c["index_min_write_units"]) == (
        math.ceil((100 * TABLE_WRITES + BOOKKEEPING / 60) / 0.5),
        math.ceil(100 * READS / 0.5),
        200,
    )
    assert c["table_target_utilisation"] == 50


def test_a_busier_minute_sets_the_maximums() -> None:
    # Given 10,000 a second and 1,000,000 due in the busiest minute (67 shards)
    p = capacity.plan(10_000, burst_minute=1_000_000, utilisation_percent=70, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    c = p.provisioned.context
    peak = 1_000_000 / 60
    bookkeeping = BOOKKEEPING * p.shard_count / 60
    # Then the minimums follow the sustained rate, the maximums the busiest minute's
    assert c["table_min_write_units"] == capacity.provisioned.capacity_units(
        10_000 * TABLE_WRITES + bookkeeping, 0.7
    )
    assert c["table_max_write_units"] == capacity.provisioned.capacity_units(
        peak * TABLE_WRITES + bookkeeping, 0.7
    )
    assert c["table_max_read_units"] == math.ceil(peak * READS / 0.7)
    assert c["index_max_write_units"] == math.ceil(peak * 1 / 0.7) == 23_810


def test_capacity_is_rounded_up_from_the_exact_quotient() -> None:
    # 21 / 0.7 is 30.000000000000004 in floating point: not a reason to provision 31
    assert capacity.provisioned.capacity_units(21, 0.7) == 30
    assert capacity.provisioned.capacity_units(21.01, 0.7) == 31


def test_small_loads_get_the_floor_and_pay_for_it() -> None:
    # Given one recurring occurrence a second: the index is written by none of them
    p = capacity.plan(1, recurring_share=1.0, utilisation_percent=70, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    c = p.provisioned.context
    # Then no minimum is below the floor of 10
    assert min(v for k, v in c.items() if k.endswith("_units")) == 10
    assert c["index_min_write_units"] == c["index_min_read_units"] == 10
    # and the floor's capacity the load does not keep busy is a fixed cost: the index's 10 and 10,
    # the table's reads 10 - (an occurrence's read units) / 0.7, its writes 10 - (6 + 4 / 60) / 0.7 (6
    # an occurrence, and the scanner's bookkeeping: 4 writes a shard a tick)
    prices = capacity.PRICES
    idle_writes = 10 + (10 - (6 + capacity.BOOKKEEPING_WRITES_PER_SHARD / 60) / 0.7)
    idle_reads = 10 + (10 - capacity.RECURRING.read_units / 0.7)
    expected = (idle_writes * prices.dynamodb_wcu_hour + idle_reads * prices.dynamodb_rcu_hour) * HOURS
    assert p.monthly_cost["fixed_capacity_floor"] == pytest.approx(expected, abs=0.01)
    # and the minimums alone, whatever the load, are each a month of capacity
    minimums = (c["table_min_write_units"] + 10) * prices.dynamodb_wcu_hour + (
        10 + 10
    ) * prices.dynamodb_rcu_hour
    assert p.provisioned.minimums_monthly == pytest.approx(minimums * HOURS, abs=0.01)


def test_provisioned_monthly_cost_is_the_capacity_the_load_keeps_busy() -> None:
    # Given 1,000 one-time executions a second, 70 % busy
    p = capacity.plan(1_000, utilisation_percent=70, assumptions=FULL_VCPU)
    on_demand = capacity.plan(1_000, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    # Then a month of the table's writes is a month of the capacity they keep 70 % busy
    month = 730 * 3600
    wcu_hour, rcu_hour = capacity.PRICES.dynamodb_wcu_hour, capacity.PRICES.dynamodb_rcu_hour
    assert p.monthly_cost["dynamodb_writes"] == pytest.approx(
        1_000 * TABLE_WRITES / 0.7 * wcu_hour * HOURS, abs=0.01
    )
    assert p.monthly_cost["dynamodb_index_writes"] == pytest.approx(1_000 / 0.7 * wcu_hour * HOURS, abs=0.01)
    assert p.monthly_cost["dynamodb_reads"] == pytest.approx(1_000 * READS / 0.7 * rcu_hour * HOURS, abs=0.01)
    # and the scanner's bookkeeping is priced provisioned too
    bookkeeping = BOOKKEEPING * p.shard_count * month / 60
    assert p.monthly_cost["fixed_scanner_bookkeeping"] == pytest.approx(
        bookkeeping * capacity.provisioned_write_unit_price(0.7), abs=0.01
    )
    # and the rest of the bill is the on-demand plan's
    for row in ("api_gateway", "lambda_compute", "dynamodb_storage", "sqs", "fixed_dashboard"):
        assert p.monthly_cost[row] == on_demand.monthly_cost[row]
    parts = sum(v for k, v in p.monthly_cost.items() if k != "total")
    assert p.monthly_cost["total"] == pytest.approx(parts, abs=0.01)
    assert p.monthly_cost["total"] < on_demand.monthly_cost["total"]


def test_a_burst_over_the_minimums_is_warned_of() -> None:
    # Given a busiest minute of 1,000,000 at 10,000 a second
    burst = capacity.plan(10_000, burst_minute=1_000_000, utilisation_percent=70, assumptions=FULL_VCPU)
    # Then the table's writes and reads and the index's writes each need more than their minimum
    found = [w for w in burst.warnings if w.startswith("the busiest minute needs")]
    assert len(found) == 3
    for setting in ("table_min_write_units", "table_min_read_units", "index_min_write_units"):
        (warning,) = [w for w in found if f"raise {setting}" in w]
        assert "two minutes" in warning and "throttled" in warning and "on-demand" in warning
    # naming the minimum that covers the burst: its peak rate of units
    assert any(
        f"raise table_min_write_units to {math.ceil(1_000_000 / 60 * TABLE_WRITES + BOOKKEEPING * burst.shard_count / 60):,}"
        in w
        for w in found
    )
    # and none without a burst, nor on-demand
    steady = capacity.plan(10_000, utilisation_percent=70, assumptions=FULL_VCPU)
    assert not any(w.startswith("the busiest minute needs") for w in steady.warnings)
    on_demand = capacity.plan(10_000, burst_minute=1_000_000, assumptions=FULL_VCPU)
    assert not any(w.startswith("the busiest minute needs") for w in on_demand.warnings)


def test_provisioned_quotas_replace_the_on_demand_ones() -> None:
    p = capacity.plan(10_000, utilisation_percent=70, assumptions=FULL_VCPU)
    # the write units provisioned for the table: over the 40,000 a table, and with an index's 14,286
    # over the account's 80,000
    table = math.ceil((10_000 * TABLE_WRITES + BOOKKEEPING * 40 / 60) / 0.7)
    assert any(w.startswith(f"table_max_write_units {table:,}") for w in p.warnings)
    assert any(
        "account's quota for provisioned capacity" in w and f"{table + 14_286:,}" in w for w in p.warnings
    )
    assert not any("on-demand" in w for w in p.warnings)
    assert capacity.plan(5, utilisation_percent=70, assumptions=FULL_VCPU).warnings == []


@pytest.mark.parametrize("percent", [19, 91, 0, 100])
def test_plan_refuses_a_utilisation_auto_scaling_cannot_target(percent: int) -> None:
    with pytest.raises(ValueError, match="between 20 and 90"):
        capacity.plan(10, utilisation_percent=percent)


@pytest.mark.parametrize("percent", [20, 90])
def test_utilisation_bounds_are_inclusive(percent: int) -> None:
    p = capacity.plan(10, utilisation_percent=percent)
    assert p.provisioned is not None and p.provisioned.context["table_target_utilisation"] == percent


def test_the_plan_deploys_as_it_is_printed() -> None:
    # The CDK context the plan prints is what infra/settings.py reads, bound for bound
    p = capacity.plan(2_000, burst_minute=200_000, utilisation_percent=60, assumptions=FULL_VCPU)
    assert p.provisioned is not None
    c = p.provisioned.context
    deployed = DeploySettings.from_context({k: str(v) for k, v in c.items()}.get).provisioned_capacity()
    assert deployed is not None
    assert (deployed.min_write_units, deployed.max_write_units) == (
        c["table_min_write_units"],
        c["table_max_write_units"],
    )
    assert (deployed.index_min_write_units, deployed.index_max_read_units) == (
        c["index_min_write_units"],
        c["index_max_read_units"],
    )
    assert deployed.target_utilisation == 60


def test_on_demand_json_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["capacity", "--jobs-per-second", "10000", "--json"]) == common.EXIT_OK
    plan = json.loads(capsys.readouterr().out)
    assert set(plan) == ON_DEMAND_FIELDS
    assert list(plan["cost_per_million"]) == [*ON_DEMAND_COST_ROWS, "total"]
    assert "fixed_capacity_floor" not in plan["monthly_cost"]


def test_cli_provisioned_json(capsys: pytest.CaptureFixture[str]) -> None:
    # When asking for a provisioned plan, 60 % busy, as JSON
    args = ["capacity", "--jobs-per-second", "10000", "--provisioned", "--utilisation", "60", "--json"]
    assert cli.main(args) == common.EXIT_OK
    plan = json.loads(capsys.readouterr().out)
    # Then the on-demand fields are all there, and the provisioned ones besides
    assert set(plan) == ON_DEMAND_FIELDS | {"provisioned"}
    provisioned = plan["provisioned"]
    assert list(provisioned["context"]) == CONTEXT_KEYS
    assert provisioned["context"]["table_target_utilisation"] == provisioned["target_utilisation"] == 60
    assert provisioned["write_unit_price"] == pytest.approx(capacity.PRICES.dynamodb_wcu_hour / 3600 / 0.6)
    assert provisioned["read_unit_price"] == pytest.approx(capacity.PRICES.dynamodb_rcu_hour / 3600 / 0.6)
    for key in ("table_write_units_peak", "index_write_units", "index_read_units", "minimums_monthly"):
        assert key in provisioned
    assert {"dynamodb_index_writes", "fixed_capacity_floor"} <= set(plan["monthly_cost"])
    # and --utilisation defaults to 70
    assert cli.main(["capacity", "--jobs-per-second", "10", "--provisioned", "--json"]) == common.EXIT_OK
    assert json.loads(capsys.readouterr().out)["provisioned"]["target_utilisation"] == 70


def test_cli_prints_the_provisioned_context_and_its_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--jobs-per-second", "10000", "--burst", "1000000", "--provisioned"]
    assert cli.main(args) == common.EXIT_OK
    text = capsys.readouterr().out
    assert all(key in text for key in CONTEXT_KEYS)
    assert "steady load" in text and "minimums, busy or idle" in text
    assert "the busiest minute needs" in text
    # and the on-demand plan says nothing of it
    assert cli.main(["capacity", "--jobs-per-second", "10000"]) == common.EXIT_OK
    text = capsys.readouterr().out
    assert "table_capacity" not in text and "on-demand" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--provisioned", "--utilisation", "19"], "--utilisation is a percent between 20 and 90"),
        (["--provisioned", "--utilisation", "91"], "--utilisation is a percent between 20 and 90"),
        (["--utilisation", "60"], "add --provisioned"),
        (["--provisioned", "--utilisation", "seventy"], "invalid int value"),
    ],
)
def test_cli_refuses_a_bad_utilisation(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert cli.main(["capacity", "--jobs-per-second", "10", *extra]) == common.EXIT_USAGE
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
