"""The capacity plan and cost model: arithmetic that can be checked by hand (docs/scaling.md)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from bench.cost import levers
from infra.settings import DeploySettings
from punctual_cli import capacity, common
from punctual_cli import main as cli
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage, Prices

# A full vCPU: the scanner's rate is then capped by the bucket partition (500 deletes/s, half of
# 1,000 write units), not by the measured CPU figures, so the plan's numbers are round.
FULL_VCPU = Assumptions(scanner_memory_mb=1769)
# Write units of a one-time execution on the table (the rest is the by_owner index's entry)
TABLE_WRITES = capacity.ONE_TIME.write_units_keys_only - capacity.ONE_TIME.index_write_units_keys_only
BOOKKEEPING = capacity.BOOKKEEPING_WRITES_PER_SHARD  # the scanner's writes a shard a tick


def test_ten_thousand_a_second_sustained() -> None:
    # Given 10,000 one-time executions a second, tasks of 0.2 s
    # When planning
    p = capacity.plan(10_000, assumptions=FULL_VCPU)
    # Then a minute holds 600,000; one scanner drains at its measured rate (it reads one-time jobs'
    # buckets and deletes nothing there, so no partition caps it), so 30 s needs
    # 600,000 / (30 x rate) invocations
    rate = capacity.SCANNER_RATE_FULL_CORE
    assert p.busiest_minute == 600_000
    assert p.scanner_rate_per_invocation == rate
    assert p.scanner_fanout == math.ceil(600_000 / (30 * rate)) == 5
    assert p.scanner_drain_seconds == round(120_000 / rate, 1)
    assert p.scanner_drain_seconds <= 30
    # and 40 shards for filing: 10,000 markers/s is 250 writes/s a bucket; a multiple of the fan-out
    assert p.shard_count == 40
    assert p.markers_per_shard == 15_000
    assert p.bucket_filing_write_units == 250
    # and Little's law: 10,000/s x (0.2 s task + 0.05 s batch overhead) = 2,500 in flight, 250 batches
    assert p.worker_executions_in_flight == 2_500
    assert p.worker_concurrency == 250
    assert p.worker_max_concurrency == 375
    # and the API: 10,000 requests/s x 0.05 s = 500 busy functions, but an environment serves about
    # 10 requests a second, so 1,000; 1,000 + 250 + 5 in all
    assert p.api_requests_per_second == 10_000
    assert p.api_concurrency == 1_000
    assert p.lambda_concurrency == 1_255
    # and the table and queue load per execution, times 10,000
    assert p.dynamodb_write_units_per_second == pytest.approx(
        10_000 * capacity.ONE_TIME.write_units_keys_only
    )
    assert p.dynamodb_read_units_per_second == pytest.approx(10_000 * capacity.ONE_TIME.read_units)
    assert p.sqs_requests_per_second == pytest.approx(3_000)  # send, receive, delete: each 1 per 10


def test_a_million_execution_minute() -> None:
    # Given a burst of 1,000,000 executions due in one minute
    p = capacity.plan(10_000, burst_minute=1_000_000, assumptions=FULL_VCPU)
    # Then 1,000,000 / (30 s x the measured rate) = 8.1, so 9 scanners, over 45 shards (40 for
    # filing, rounded up to whole groups)
    rate = capacity.SCANNER_RATE_FULL_CORE
    assert p.scanner_fanout == math.ceil(1_000_000 / (30 * rate)) == 9
    assert p.shard_count == 45
    assert p.scanner_drain_seconds == pytest.approx(math.ceil(1_000_000 / 9) / rate, abs=0.05)
    assert p.scanner_drain_seconds <= 30
    assert not any("drains" in w for w in p.warnings)
    # and the load is that minute's: 1,000,000 / 60 s x 0.25 s / 10 a batch = 417 workers busy
    assert p.peak_per_second == pytest.approx(16_666.7)
    assert p.worker_concurrency == pytest.approx(416.7)
    assert p.worker_max_concurrency == 625


def test_shards_come_in_whole_groups() -> None:
    # Given a load of short-period recurring jobs (each occurrence's marker deleted from a soon
    # partition: draining takes at most 500 of its 1,000 writes a second), whose filing needs more
    # shards than there are scanners
    p = capacity.plan(600, recurring_share=1.0, drain_seconds=55, assumptions=FULL_VCPU)
    # Then 36,000 a minute / (55 x 500) = 1.3 -> 2 scanners; filing 600/s needs 600 / 250 = 3 shards,
    # rounded up to a multiple of 2
    assert p.scanner_rate_per_invocation == 500
    assert p.scanner_fanout == 2
    assert p.shard_count == 4


def test_scanner_rate_follows_the_cpu_share_up_to_one_vcpu() -> None:
    # Lambda's CPU grows with memory up to one vCPU at 1,769 MB; the GIL keeps the scanner on one
    share = 512 / 1769
    expected = min(capacity.SCANNER_RATE_FULL_CORE, share * 1e6 / capacity.SCANNER_CPU_MS_PER_1000)
    assert capacity.scanner_rate(512) == pytest.approx(expected)
    assert capacity.scanner_rate(3538) == capacity.scanner_rate(1769)
    assert capacity.scanner_rate(256) < capacity.scanner_rate(512)


USAGE = ExecutionUsage(
    api_requests=1.0,
    write_units=10.0,
    read_units=4.0,
    write_units_keys_only=6.0,
    index_write_units_keys_only=1.0,
    sqs_requests=0.3,
    log_bytes=2**30 / 1e6,  # a GiB per million executions
    metric_bytes=0.0,
    item_bytes=0.0,
    job_bytes=0.0,
)
SIMPLE = Assumptions(
    http_api=False,
    api_memory_mb=1024,
    api_seconds=0.1,
    worker_memory_mb=1024,
    task_seconds=0.2,
    worker_overhead_seconds=0.05,
    batch_fill=10,
    platform_log_bytes=0.0,
    keys_only_indexes=False,
)


def test_cost_per_million_by_service() -> None:
    # When pricing a million executions of USAGE at list prices
    rows = capacity.per_million(capacity.cost_per_execution(USAGE, SIMPLE))
    # Then each service's share is its units times its price
    assert rows["api_gateway"] == 3.50  # a REST API request each
    assert rows["lambda_requests"] == pytest.approx(1.1 * 0.20)  # API, plus a worker batch per ten
    assert rows["dynamodb_writes"] == pytest.approx(10 * 0.625)
    assert rows["dynamodb_reads"] == pytest.approx(4 * 0.125)
    assert rows["sqs"] == pytest.approx(0.3 * 0.40)
    assert rows["cloudwatch_logs"] == pytest.approx(0.50)  # a GiB
    assert rows["xray"] == pytest.approx(1.1 * 0.05 * 5.00)
    # API: 1 GB x 0.1 s; worker: 1 GB x 0.25 s a batch of ten; scanner: 1,769 MB (the deployed
    # full vCPU, the default) for 1/rate s
    assert SIMPLE.scanner_memory_mb == 1769
    gb_seconds = 0.1 + 0.025 + 1769 / 1024 / capacity.scanner_rate(1769)
    assert rows["lambda_compute"] == pytest.approx(gb_seconds * 0.0000133334 * 1e6, abs=1e-4)
    assert rows["total"] == pytest.approx(sum(v for k, v in rows.items() if k != "total"), abs=1e-3)


def test_levers_change_only_their_service() -> None:
    base = capacity.per_million(capacity.cost_per_execution(USAGE, SIMPLE))
    http = capacity.per_million(capacity.cost_per_execution(USAGE, replace(SIMPLE, http_api=True)))
    keys_only = capacity.per_million(
        capacity.cost_per_execution(USAGE, replace(SIMPLE, keys_only_indexes=True))
    )
    assert http["api_gateway"] == 1.00
    assert http["total"] == pytest.approx(base["total"] - 2.50)
    assert keys_only["dynamodb_writes"] == pytest.approx(6 * 0.625)
    # Provisioned capacity kept 70 % busy: $0.00065 a WCU-hour / 3,600 s / 0.7 = $0.258 a million
    assert capacity.provisioned_write_unit_price(0.7) * 1e6 == pytest.approx(0.2579, abs=1e-4)


def test_storage_counts_the_retention_of_the_execution_and_its_job() -> None:
    # An execution item of 1 GiB per million and a job item of 1 GiB per million, both kept 30 days
    # (a finished job expires with its history)
    usage = replace(USAGE, item_bytes=2**30 / 1e6, job_bytes=2**30 / 1e6)
    rows = capacity.per_million(capacity.cost_per_execution(usage, SIMPLE))
    months = 30 / (730 / 24)
    table = 2 * months  # GiB-months in the table (PITR backs these up)
    indexes = 3 * months  # the job in by_owner, by_status and by_name (priced as projection ALL here)
    assert rows["dynamodb_storage"] == pytest.approx((table + indexes) * 0.25 + table * 0.20, abs=1e-4)


def test_monthly_cost_is_a_month_of_the_rate() -> None:
    p = capacity.plan(1, assumptions=FULL_VCPU)
    expected = capacity.ONE_TIME.write_units_keys_only * 0.625 / 1e6 * 730 * 3600
    assert p.monthly_cost["dynamodb_writes"] == pytest.approx(expected, abs=0.01)
    assert p.monthly_cost["fixed_dashboard"] == 3.00
    parts = sum(v for k, v in p.monthly_cost.items() if k != "total")
    assert p.monthly_cost["total"] == pytest.approx(parts, abs=0.01)


def test_eventbridge_scheduler_for_comparison() -> None:
    # $1.00 a million schedules run, plus a Lambda invocation of 0.5 GB x 0.2 s each
    rows = capacity.eventbridge_scheduler_per_million(Assumptions(worker_memory_mb=512, task_seconds=0.2))
    assert rows["total"] == pytest.approx(1.00 + 0.20 + 0.5 * 0.2 * 0.0000133334 * 1e6, abs=1e-3)


def test_warnings_name_the_limits_reached() -> None:
    busy = capacity.plan(10_000, assumptions=FULL_VCPU)
    assert any("40,000" in w and "write units" in w for w in busy.warnings)
    assert any("API Gateway" in w for w in busy.warnings)
    assert capacity.plan(5, assumptions=FULL_VCPU).warnings == []


def test_plan_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        capacity.plan(0)
    with pytest.raises(ValueError):
        capacity.plan(10, recurring_share=1.5)


def test_cli_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    # When asking the CLI for 10,000 a second, as JSON
    code = cli.main(["capacity", "--jobs-per-second", "10000", "--scanner-memory", "1769", "--json"])
    # Then it prints the plan, calling nothing
    assert code == common.EXIT_OK
    plan = json.loads(capsys.readouterr().out)
    assert (plan["shard_count"], plan["scanner_fanout"], plan["worker_max_concurrency"]) == (40, 5, 375)
    # and for people, a table naming the CDK settings
    assert cli.main(["capacity", "--jobs-per-second", "10000"]) == common.EXIT_OK
    text = capsys.readouterr().out
    assert "shard_count" in text and "scanner_fanout" in text and "per million executions" in text


def test_cli_prices_the_api_type_deployed(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the plan priced as deployed by default (an HTTP API) and with -c api_type=rest
    def per_million(*extra: str) -> tuple[str, float]:
        assert cli.main(["capacity", "--jobs-per-second", "100", "--json", *extra]) == common.EXIT_OK
        plan = json.loads(capsys.readouterr().out)
        return plan["api_type"], plan["cost_per_million"]["api_gateway"]

    # Then each request is priced at its type's list price
    assert per_million() == ("http", pytest.approx(1.00))
    assert per_million("--api", "rest") == ("rest", pytest.approx(3.50))
    assert cli.main(["capacity", "--jobs-per-second", "100", "--api", "rest"]) == common.EXIT_OK
    assert "REST API" in capsys.readouterr().out


def test_cli_refuses_a_share_over_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["capacity", "--jobs-per-second", "10", "--recurring-share", "2"]) == common.EXIT_USAGE
    assert "--recurring-share" in capsys.readouterr().err


def test_batched_creation_divides_the_api_requests_and_keeps_the_rest() -> None:
    # Given the same load with one-time jobs created one a request, and a hundred a request
    single = capacity.plan(1_000, assumptions=FULL_VCPU)
    batched = capacity.plan(1_000, batched=True, assumptions=FULL_VCPU)
    # Then the API sees a hundredth of the requests, each longer, and DynamoDB the same writes
    assert capacity.BATCH_JOBS == 100
    assert batched.api_requests_per_second == pytest.approx(single.api_requests_per_second / 100)
    assert batched.api_concurrency == pytest.approx(10 * capacity.batch_api_seconds(100), abs=0.1)
    assert batched.cost_per_million["api_gateway"] == pytest.approx(
        single.cost_per_million["api_gateway"] / 100
    )
    assert batched.dynamodb_write_units_per_second == single.dynamodb_write_units_per_second
    assert batched.cost_per_million["total"] < single.cost_per_million["total"]


# ------------------------------------------------------------------------ provisioned capacity

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


def test_the_indexes_take_six_writes_of_a_one_time_execution_and_none_of_an_occurrence() -> None:
    # KEYS_ONLY: by_owner, by_status and by_name entries put at creation; at completion by_status's
    # moved (a delete and a put) and by_outcome's put; an occurrence whose outcome holds writes none
    assert capacity.index_write_units(capacity.ONE_TIME) == 6
    assert capacity.index_write_units(capacity.ONE_TIME_BATCHED) == 6
    assert capacity.index_write_units(capacity.RECURRING) == 0
    assert capacity.index_write_units(capacity.blended(0.25)) == pytest.approx(4.5)
    # Projecting ALL, every rewrite of the job rewrites its entries: what ALL adds is the indexes'
    assert capacity.index_write_units(capacity.ONE_TIME, keys_only=False) == 6 + (13 - 11)
    assert capacity.index_write_units(capacity.RECURRING, keys_only=False) == 0 + (14 - 6)


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
    assert c["table_min_read_units"] == math.ceil(40_000 / 0.7) == 57_143
    # and each index what by_status takes, the most written: 3 a one-time execution, 30,000 / 0.7
    assert p.provisioned.index_write_units == 30_000
    assert c["index_min_write_units"] == 42_858
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
    # Then each figure is the load over a half: (100 x table units + 3/60) / 0.5, 400 / 0.5, 300 / 0.5
    assert p.shard_count == 1
    assert (c["table_min_write_units"], c["table_min_read_units"], c["index_min_write_units"]) == (
        math.ceil((100 * TABLE_WRITES + BOOKKEEPING / 60) / 0.5),
        800,
        600,
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
    assert c["table_max_read_units"] == math.ceil(peak * 4 / 0.7)
    assert c["index_max_write_units"] == math.ceil(peak * 3 / 0.7) == 71_429


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
    # the table's reads 10 - 4 / 0.7, its writes 10 - (6 + 4 / 60) / 0.7 (6 an occurrence, and the
    # scanner's bookkeeping: 4 writes a shard a tick)
    prices = capacity.PRICES
    idle_writes = 10 + (10 - (6 + capacity.BOOKKEEPING_WRITES_PER_SHARD / 60) / 0.7)
    idle_reads = 10 + (10 - 4 / 0.7)
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
    assert p.monthly_cost["dynamodb_index_writes"] == pytest.approx(6_000 / 0.7 * wcu_hour * HOURS, abs=0.01)
    assert p.monthly_cost["dynamodb_reads"] == pytest.approx(1_000 * 4 / 0.7 * rcu_hour * HOURS, abs=0.01)
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
    # the write units provisioned for the table: over the 40,000 a table, and with an index's 42,858
    # over the account's 80,000
    table = math.ceil((10_000 * TABLE_WRITES + BOOKKEEPING * 40 / 60) / 0.7)
    assert any(w.startswith(f"table_max_write_units {table:,}") for w in p.warnings)
    assert any(
        "account's quota for provisioned capacity" in w and f"{table + 42_858:,}" in w for w in p.warnings
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


# ------------------------------------------------------------------------ reserved capacity


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
