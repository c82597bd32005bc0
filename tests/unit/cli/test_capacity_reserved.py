"""Reserved capacity in the plan, and the levers combined (docs/scaling.md)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bench.cost import levers
from punctual_cli import capacity, common
from punctual_cli import main as cli
from punctual_cli.capacity.figures import Assumptions, Prices
from tests.unit.cli.capacity_inputs import FULL_VCPU


def test_reserved_capacity_spreads_its_fee_over_the_year() -> None:
    # Given a one-year reservation of 100 write units: $876 upfront and $0.10 an hour for the block
    prices = Prices(
        dynamodb_reserved_100_wcu_upfront=876.0,
        dynamodb_reserved_100_wcu_hour=0.10,
        dynamodb_reserved_100_rcu_upfront=0.0,
        dynamodb_reserved_100_rcu_hour=0.01,
    )
    reserved = capacity.reserved_prices(prices)
    # Then a unit-hour costs ($876 / 8,760 h + $0.10) / 100 units = $0.002, a read unit-hour $0.0001
    assert reserved.dynamodb_wcu_hour == pytest.approx(0.002)
    assert reserved.dynamodb_rcu_hour == pytest.approx(0.0001)
    # and nothing else is repriced (on-demand request units are never reserved)
    assert (
        replace(
            reserved, dynamodb_wcu_hour=prices.dynamodb_wcu_hour, dynamodb_rcu_hour=prices.dynamodb_rcu_hour
        )
        == prices
    )


def test_list_price_reservation_is_about_54_percent_under_provisioned() -> None:
    # AWS: "up to 54 %" for a one-year term, on both write and read units
    reserved = capacity.reserved_prices()
    assert reserved.dynamodb_wcu_hour / capacity.PRICES.dynamodb_wcu_hour == pytest.approx(0.46, abs=0.01)
    assert reserved.dynamodb_rcu_hour / capacity.PRICES.dynamodb_rcu_hour == pytest.approx(0.46, abs=0.01)


def test_a_reserved_plan_prices_the_provisioned_capacity_at_the_reserved_rates() -> None:
    provisioned = capacity.plan(10_000, utilisation_percent=70, assumptions=FULL_VCPU)
    reserved = capacity.plan(10_000, utilisation_percent=70, reserved=True, assumptions=FULL_VCPU)
    assert reserved.provisioned is not None and reserved.provisioned.reserved
    assert provisioned.provisioned is not None and not provisioned.provisioned.reserved
    # the same deployment, priced lower: only DynamoDB's capacity changes
    assert reserved.provisioned.context == provisioned.provisioned.context
    assert reserved.provisioned.write_unit_price == pytest.approx(
        capacity.reserved_prices().dynamodb_wcu_hour / 3600 / 0.7
    )
    for row, value in reserved.cost_per_million.items():
        if row in ("dynamodb_writes", "dynamodb_index_writes", "dynamodb_reads", "total"):
            assert value < provisioned.cost_per_million[row]
        else:
            assert value == provisioned.cost_per_million[row]
    assert reserved.monthly_cost["total"] < provisioned.monthly_cost["total"]
    # and it is a plan of a provisioned table only
    with pytest.raises(ValueError, match="provisioned"):
        capacity.plan(10, reserved=True)


def test_a_reservation_under_one_block_is_warned_of() -> None:
    # 5 executions a second keep the floors (10 units each): under the 100 units a reservation holds
    small = capacity.plan(5, utilisation_percent=70, reserved=True, assumptions=FULL_VCPU)
    assert sum("100 units at a time" in w for w in small.warnings) == 2
    assert not any(
        "100 units at a time" in w
        for w in capacity.plan(10_000, utilisation_percent=70, reserved=True, assumptions=FULL_VCPU).warnings
    )


def test_cli_reserved(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--jobs-per-second", "10000", "--provisioned", "--reserved"]
    assert cli.main([*args, "--json"]) == common.EXIT_OK
    assert json.loads(capsys.readouterr().out)["provisioned"]["reserved"] is True
    assert cli.main(args) == common.EXIT_OK
    assert "one-year reserved capacity" in capsys.readouterr().out
    assert cli.main(["capacity", "--jobs-per-second", "10", "--reserved"]) == common.EXIT_USAGE
    captured = capsys.readouterr()
    assert "add --provisioned" in captured.err and captured.out == ""


def test_the_combined_levers_name_only_what_they_combine() -> None:
    without_batches = levers.levers(capacity.ONE_TIME, Assumptions(), None)
    with_batches = levers.levers(capacity.ONE_TIME, Assumptions(), capacity.ONE_TIME_BATCHED, batch_size=50)
    combined = [row for row in without_batches if "id" in row]
    assert [row["id"] for row in combined] == [levers.ALL_SAVINGS, levers.ALL_SAVINGS_RESERVED]
    assert not any("batch" in row["change"] for row in without_batches)
    assert all("batch create" in row["change"] for row in with_batches if "id" in row)
    assert any(row["change"] == "batch-create endpoint, 50 jobs a request (measured)" for row in with_batches)
    # and the reserved capacity is the cheaper of the two
    assert combined[0]["per_million"] > combined[1]["per_million"]
