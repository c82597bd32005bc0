"""AWS's scaling rules as the capacity plan and the burst model apply them (docs/scaling.md, section 5),
and the cost figures `make bench-cost` prints for the default deployment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.burst import main, model, scenarios
from bench.cost import per_million
from infra.settings import DeploySettings
from punctual.notify import execution_events
from punctual.platform import aws_limits as sizing
from punctual_cli import capacity

# An owner as API Gateway's IAM authorization names a caller with a role's credentials.
CALLER = "arn:aws:sts::123456789012:assumed-role/punctual-client/orders-service"
SHORT_BATCH = 0.001  # seconds: a batch so short that only the per-environment request rate binds


def test_a_standard_mapping_without_maximum_concurrency_starts_1000_and_claims_1250() -> None:
    # Given a standard-mode mapping with no MaximumConcurrency, and one with it set to 20
    unset = model.Deployment("standard")
    capped = model.Deployment("standard", max_concurrency=20)
    # When each has scaled for an hour
    # Then the unset one starts at most 1,000 batches at once (the stricter of AWS's two pages) yet may
    # take 1,250 of the account's concurrency (the higher one), and the capped one 20 either way
    assert model.mapping_concurrency(unset, 3600) == sizing.ESM_STANDARD_BATCHES == 1000
    assert model.mapping_claim(unset) == sizing.ESM_STANDARD_CONCURRENCY == 1250
    assert model.mapping_concurrency(capped, 3600) == model.mapping_claim(capped) == 20
    # and it starts at 5 and adds 300 a minute
    assert model.mapping_concurrency(unset, 0) == 5
    assert model.mapping_concurrency(unset, 60) == 305


def test_maximum_concurrency_and_maximum_pollers_are_held_to_their_documented_ranges() -> None:
    # Given settings beyond what AWS accepts: MaximumConcurrency over 1,000, MaximumPollers over the
    # stricter page's 2,000 (CloudFormation's; the API reference says 10,000)
    # Then the model refuses them
    with pytest.raises(ValueError, match="MaximumConcurrency"):
        model.Deployment("standard", max_concurrency=1001)
    with pytest.raises(ValueError, match="MaximumPollers"):
        model.Deployment("provisioned", min_pollers=200, max_pollers=2001)
    # and 2,000 pollers reach 20,000 concurrent invokes, no more
    assert model.mapping_ceiling(model.Deployment("provisioned", max_pollers=2000)) == 20_000
    assert sizing.MAX_POLLERS_RANGE == (2, 2000)


def test_environments_are_added_continuously_1000_every_10_seconds() -> None:
    # Given an idle function (no warm environment) and one with 300 warm
    # Then it may have 1,000 at once, then 100 more a second (refilled continuously, not in steps)
    assert model.environment_ceiling(0, 0) == 1000
    assert model.environment_ceiling(0, 5) == 1500
    assert model.environment_ceiling(0, 10) == 2000
    assert model.environment_ceiling(300, 5) == 1800


def test_an_environment_serves_about_ten_requests_a_second() -> None:
    # Given one environment (the account's quota at 1), 20 batches of ten due at once, each batch
    # taking a millisecond
    load = model.Load(200, 0.0)
    deployment = model.Deployment("standard", lambda_quota=1, warm_environments=1)
    # When the model runs them
    result = model.simulate(load, deployment, batch_seconds=SHORT_BATCH)
    # Then the environment takes a batch a tenth of a second at most: the last starts ~1.9 s late,
    # not after 20 x (the receive and the worker's reads) as if it had no request rate
    assert result.max_seconds >= 1.8
    assert model.busy_until(0.0, 0.0, 0.04, SHORT_BATCH) == pytest.approx(0.1)


def test_a_standard_queue_holds_about_120000_messages_in_flight() -> None:
    # Given 200,000 executions due at once onto 2,000 pollers with every environment warm and no quota
    # binding, each batch running 30 s
    load = model.Load(200_000, 0.0)
    deployment = model.Deployment(
        "provisioned",
        min_pollers=200,
        max_pollers=2000,
        lambda_quota=10**6,
        table_write_units=10**9,
        warm_environments=20_000,
        scaled_to=20_000,
    )
    # When the model runs them
    result = model.simulate(load, deployment, batch_seconds=30.0)
    # Then no more than ~120,000 messages are received and not deleted at once (12,000 batches of
    # ten, not the 12,500 a million in 2 s would need), and the rest wait for deletions
    assert result.peak_in_flight_messages == sizing.SQS_IN_FLIGHT == 120_000
    assert result.peak_concurrency == 12_000
    assert "SQS messages in flight (~120,000 a standard queue)" in result.bound_by
    assert result.max_seconds > 30


def test_the_plan_gives_a_function_a_tenth_of_its_request_rate_in_environments() -> None:
    # Given 10,000 API requests a second of 0.05 s each (Little's law: 500 busy), and 100 a second of
    # 0.5 s (50 busy)
    # Then the first needs 1,000 environments (about 10 requests a second each), the second 50
    assert capacity.environments_for(10_000, 0.05) == 1000
    assert capacity.environments_for(100, 0.5) == 50
    # and the plan for 10,000 one-time jobs created a second says so
    assert capacity.plan(10_000).api_concurrency == 1000


def test_the_default_deployment_prescaled_is_what_infra_deploys() -> None:
    # Given the default settings with the pre-scaling on
    deployment = scenarios.default_prescaled(capacity.SCANNER_RATE_FULL_CORE)
    # Then the mapping is provisioned, warmed to the pre-scaling's ceiling within MaximumPollers, at
    # the account's default concurrency
    assert deployment.mode == "provisioned"
    assert deployment.min_pollers == DeploySettings.worker_prescale_max_pollers
    assert deployment.max_pollers == DeploySettings.worker_max_pollers
    assert deployment.lambda_quota == DeploySettings.lambda_concurrency_quota == 1000
    assert deployment.scanner_fanout == DeploySettings.scanner_fanout


def test_quota_raises_name_each_quota_its_default_and_its_page() -> None:
    # Given a standard mapping without MaximumConcurrency run with no quota binding
    deployment = model.Deployment("standard", lambda_quota=1000, table_write_units=40_000)
    unbounded = model.simulate(
        model.Load(20_000, 0.0),
        model.Deployment("standard", lambda_quota=10**6, table_write_units=10**9),
        batch_seconds=0.25,
    )
    # When the raises it needs are listed
    raises = scenarios.quota_raises(deployment, unbounded)
    # Then Lambda's concurrency is raised to the mapping's claim (1,250) and the scanners' 64,
    # rounded up, citing its page; the table is not raised: 20,000 executions stay under its quota
    assert [r["quota"] for r in raises] == ["Lambda concurrent executions (account, region)"]
    assert raises[0]["default"] == 1000
    assert raises[0]["raise_to"] == 1400
    assert raises[0]["page"] == "Lambda quotas"
    assert unbounded.peak_write_units_per_second <= 40_000


def test_per_million_usd_prices_the_default_deployment_in_cents() -> None:
    # Given the measured usage of each workload and the deployment's defaults
    usages = {
        "one_time": capacity.ONE_TIME,
        "batched": capacity.ONE_TIME_BATCHED,
        "recurring": capacity.RECURRING,
    }
    assumptions = per_million.deployed_assumptions(capacity.Assumptions().task_seconds)
    # When the figures are priced
    found = per_million.per_million_usd(usages, assumptions, capacity.BATCH_JOBS)
    block = found["per_million_usd"]
    # Then the block has the four figures, in cents, as deployed (execution events as infra sets them)
    assert assumptions.execution_events == DeploySettings.execution_events
    assert list(block) == [
        "one_time",
        "one_time_batched",
        "cron_every_minute",
        "eventbridge_scheduler_lambda",
    ]
    expected = capacity.per_million(capacity.cost_per_execution(capacity.RECURRING, assumptions))["total"]
    assert block["cron_every_minute"] == round(expected, 2)
    assert block["eventbridge_scheduler_lambda"] == 2.53
    # and each target compares the right figures
    targets = {t["figure"]: t for t in found["per_million_usd_targets"]}
    assert targets["one_time_batched"]["limit"] == block["eventbridge_scheduler_lambda"]
    assert targets["one_time"]["limit"] == 3.50
    for t in targets.values():
        assert t["met"] == (t["value"] <= t["limit"])
        assert t["over_by"] == round(max(0.0, t["value"] - t["limit"]), 2)
    # and the breakdown adds up to each figure, within rounding
    for figure in ("one_time", "one_time_batched", "cron_every_minute"):
        rows = found["per_million_usd_breakdown"][figure]
        assert sum(rows.values()) == pytest.approx(block[figure], abs=0.06)
    # and every price is labelled with its page
    assert all(row["page"] for row in found["per_million_usd_inputs"]["documented"].values())


def test_per_million_usd_leaves_a_workload_not_run_empty() -> None:
    # Given only the handed-off workload measured (one job a request, like one_time)
    found = per_million.per_million_usd(
        {"handed_off": capacity.ONE_TIME}, per_million.deployed_assumptions(0.2), capacity.BATCH_JOBS
    )
    # Then one_time is priced from it and the others are None, never a guess
    assert found["per_million_usd"]["one_time"] is not None
    assert found["per_million_usd"]["one_time_batched"] is None
    assert found["per_million_usd"]["cron_every_minute"] is None
    assert found["per_million_usd_inputs"]["measured"]["workloads"] == {"one_time": "handed_off"}


def test_the_burst_benchmark_prints_the_two_blocks() -> None:
    # Given a small burst and a short steady load (the real run: a million, two minutes)
    args = main.parser().parse_args(
        ["--burst", "20000", "--steady-seconds", "2", "--only", "one_instant_million", "steady_10k_per_s"]
    )
    # When the benchmark runs
    result = main.run(args)
    # Then it prints both blocks with their figures, the quotas it raised and the goal
    instant, steady = result["one_instant_million"], result["steady_10k_per_s"]
    assert {"p50_s", "p99_s", "max_s", "environments", "burst_cost_usd", "quota_raises"} <= instant.keys()
    assert instant["p50_s"] <= instant["p99_s"] <= instant["max_s"]
    assert instant["met"] == (instant["max_s"] <= 2.0)
    assert instant["burst_cost_usd"] > 0
    assert all({"quota", "default", "raise_to", "page"} <= r.keys() for r in instant["quota_raises"])
    assert {"p99_s", "max_s"} <= steady.keys()
    assert result["inputs"]["worker_cpu_ms_per_webhook"]["value"] == capacity.WORKER_CPU_MS_PER_WEBHOOK


def test_a_stream_batchs_changes_are_priced_as_the_events_their_bytes_fill() -> None:
    # Given an execution whose one change adds 500 B to its event, in full batches of 100 records
    usage = replace(capacity.ONE_TIME, status_changes=1.0, event_detail_bytes=500.0)
    everything = capacity.Assumptions(execution_events="all", events_batch=100)
    # Then a batch's changes are one event: a hundredth of an event an execution, $0.01 a million
    assert capacity.changes_per_event(usage, everything) == 100
    assert capacity.events_per_execution(usage, everything) == pytest.approx(0.01)
    costs = capacity.cost_per_execution(usage, everything)
    assert costs["eventbridge_events"] * 1e6 == pytest.approx(0.01)
    # and changes twice as large fill two events a batch
    large = replace(usage, event_detail_bytes=1000.0)
    assert capacity.changes_per_event(large, everything) == 50
    # and the events function still runs once a batch of records, whatever events they make
    retried = replace(usage, status_changes=3.0)
    invocations = capacity.cost_per_execution(retried, everything)["lambda_requests"]
    without = capacity.cost_per_execution(retried, replace(everything, execution_events="off"))
    assert (invocations - without["lambda_requests"]) * 1e6 == pytest.approx(3 / 100 * 0.20)
    # and `final` puts the end only, `off` nothing
    assert capacity.events_per_execution(retried, replace(everything, execution_events="final")) == (
        pytest.approx(0.01)
    )
    assert capacity.events_per_execution(retried, replace(everything, execution_events="off")) == 0


def test_the_plan_counts_no_fewer_events_than_the_function_puts() -> None:
    # Given the figure EventBridge bills by, as the function and the plan each hold it
    assert capacity.EVENTBRIDGE_EVENT_BYTES == execution_events.EVENT_BYTES
    # and a full stream batch of one owner's changes, of several sizes, on a stack's bus
    batch = int(capacity.Assumptions().events_batch)
    for error in ("", "x" * 300, "x" * 900):
        details = [{**_detail(n), "owner": CALLER, "error": error or None} for n in range(batch)]
        put = execution_events.entries(list(enumerate(details)), "Punctual-executions")
        measured = sum(execution_events.detail_bytes(d) for d in details) / batch
        usage = replace(capacity.ONE_TIME, status_changes=1.0, event_detail_bytes=measured)
        # Then the plan counts at least the events the function puts, and not many more
        planned = batch / capacity.changes_per_event(usage, capacity.Assumptions())
        assert len(put) <= planned <= len(put) + 1


def _detail(n: int) -> dict[str, object]:
    """A detail as the function makes it for a run that succeeded."""
    return {
        "version": 1,
        "job_id": f"job_01JF8Z3K4M5N6P7Q8R9S0T{n:04d}",
        "owner": "alice",
        "execution_id": f"job_01JF8Z3K4M5N6P7Q8R9S0T{n:04d}.19ad7e5d690.48213",
        "scheduled_at": "2026-12-01T09:00:00.000Z",
        "status": "SUCCEEDED",
        "previous_status": None,
        "attempts": 1,
        "manual": False,
        "retry_of": None,
        "dead_lettered": False,
        "started_at": "2026-12-01T09:00:00.004Z",
        "finished_at": "2026-12-01T09:00:00.204Z",
        "lateness_ms": 4,
        "error": None,
        "next_attempt_at": None,
    }


def test_the_plans_putevents_entries_a_second_drop_with_grouping() -> None:
    # Given a one-time load of 100,000 executions a second, every change put on the bus
    assumptions = capacity.Assumptions(execution_events="all")
    # When it is planned
    found = capacity.plan(100_000, assumptions=assumptions)
    # Then the bus takes a batch's changes as one entry: about a hundredth of the changes a second,
    # under PutEvents' quota, with no warning about it (one entry a change would be ten times over)
    per_execution = capacity.events_per_execution(capacity.ONE_TIME, assumptions)
    assert per_execution == pytest.approx(capacity.ONE_TIME.status_changes / 100)
    assert found.events_per_second == pytest.approx(found.peak_per_second * per_execution, rel=0.01)
    assert found.events_per_second < 0.8 * sizing.EVENTBRIDGE_PUT_EVENTS_PER_SECOND
    assert not [w for w in found.warnings if "execution event" in w]
