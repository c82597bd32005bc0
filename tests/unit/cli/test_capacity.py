"""The capacity plan and cost model on demand: arithmetic that can be checked by hand (docs/scaling.md)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from punctual_cli import capacity, common
from punctual_cli import main as cli
from punctual_cli.capacity.figures import Assumptions
from tests.unit.cli.capacity_inputs import FULL_VCPU, SIMPLE, USAGE


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
    indexes = 1 * months  # the job in by_owner (priced as projection ALL here; the others are sparse)
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
    # Then the API sees a hundredth of the requests, each longer, and DynamoDB fewer writes (a group
    # marker an instant and one list entry a batch, not a marker and a by_owner entry a job)
    assert capacity.BATCH_JOBS == 100
    assert batched.api_requests_per_second == pytest.approx(single.api_requests_per_second / 100)
    assert batched.api_concurrency == pytest.approx(10 * capacity.batch_api_seconds(100), abs=0.1)
    assert batched.cost_per_million["api_gateway"] == pytest.approx(
        single.cost_per_million["api_gateway"] / 100
    )
    assert batched.dynamodb_write_units_per_second < single.dynamodb_write_units_per_second / 1.5
    assert batched.cost_per_million["total"] < single.cost_per_million["total"]
