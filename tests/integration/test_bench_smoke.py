"""The benchmarks' entry points run, in a tiny configuration, and report what they should.

The real runs (`make bench-scanner`, `make bench-cost`) take minutes and are not part of the suite.
"""

from __future__ import annotations

import json

import pytest

from bench import scanner_throughput
from bench.cost import main as cost
from punctual_cli import capacity

# One batched job, and one cron job: each a pack of one under its own lease, what the capacity
# constants price (jobs sharing an instant and a shard share a lease, and write less: by how much
# depends on the shards of their random ids).
BATCH_JOBS = 1


def test_scanner_benchmark_enqueues_every_marker() -> None:
    # Given a few hundred due executions over the 16 shards, and 1 ms calls
    args = scanner_throughput.parser().parse_args(
        ["--markers", "300", "--group-markers", "0", "--dynamodb-latency-ms", "1", "--sqs-latency-ms", "1"]
    )
    # When the benchmark runs
    result = scanner_throughput.run(args)
    json.dumps(result)  # it prints this
    # Then one invocation enqueued them all, through the real scanner's calls
    measured = result["measured"]["all_shards"]
    assert measured["markers"] == measured["enqueued"] == 300
    assert measured["enqueued_per_second"] > 0
    assert measured["calls"]["sqs.SendMessageBatch"] >= 30  # at most ten a batch
    assert measured["calls"]["dynamodb.Query"] >= 16  # each shard's bucket read
    assert measured["client_cpu_ms_per_1000_executions"] > 0
    # and it says what is measured and what is extrapolated from it
    assert {"measured", "projected_at_lambda_memory", "extrapolated", "targets"} <= result.keys()
    assert result["extrapolated"]["burst_minute"]
    assert result["targets"]["burst_minute_drained_under_30s_at_default_fanout"] is None  # not run


def test_cost_benchmark_counts_units_and_prices_them() -> None:
    # Given a couple of jobs of each kind, over a minute
    args = cost.parser().parse_args(
        [
            "--scenarios",
            "handed_off,batched,recurring",
            "--one-time",
            "3",
            "--batch-jobs",
            str(BATCH_JOBS),
            "--batch-lead-seconds",
            "200",
            "--cron",
            "1",
            "--minutes",
            "4",
        ]
    )
    # When the benchmark runs on moto
    result = cost.run(args)
    json.dumps(result)
    # Then every execution ran and was counted
    one_time, recurring = result["measured"]["handed_off"], result["measured"]["recurring"]
    assert one_time["executions"] == 3
    assert recurring["executions"] >= 1
    # (marker and job, then the hand-off: due soon enough for the API to enqueue it itself)
    creation = one_time["per_job_creation"]["calls"]
    assert creation["dynamodb.PutItem"] == 2
    assert creation["dynamodb.BatchWriteItem"] == 1  # the marker's deletion (no execution is stored)
    assert "sqs.ReceiveMessage" not in one_time["per_execution_scan_and_run"]["calls"]  # polling, apart
    # (one batch, --batch-size left at 100; scanned)
    batched = result["measured"]["batched"]
    assert batched["executions"] == BATCH_JOBS
    assert batched["jobs_per_request"] == BATCH_JOBS
    # (its marker alone in a PutItem, its job in a BatchWriteItem)
    assert round(batched["per_job_creation"]["calls"]["dynamodb.BatchWriteItem"] * BATCH_JOBS) >= 1
    assert batched["usage_per_execution"]["api_requests"] == pytest.approx(1 / BATCH_JOBS, abs=1e-3)
    # priced and named as measured: the jobs a request, not the flag's 100
    assert result["assumed_api_seconds_per_batch_request"] == capacity.batch_api_seconds(BATCH_JOBS)
    assert f"batch-create endpoint, {BATCH_JOBS} jobs a request (measured)" in [
        lever["change"] for lever in result["levers_one_time_per_million"]
    ]
    # and priced above zero, with the comparison and the target
    for name, rows in result["cost_per_million_executions"].items():
        assert rows["rest_api"]["total"] > rows["http_api"]["total"] - 1e-9 > 0
        if name != "recurring":  # created through the API: $3.50 and $1.00 a million requests
            assert rows["rest_api"]["api_gateway"] == pytest.approx(3.5 * rows["http_api"]["api_gateway"])
    # (as deployed: the HTTP API)
    assert result["target"]["one_time_per_million"] < result["target"]["one_time_per_million_rest_api"]
    assert result["eventbridge_scheduler_per_million"]["total"] > 1.0
    assert result["target"]["one_time_per_million"] > result["target"]["batched_per_million"] > 0
    assert any("(measured)" in lever["change"] for lever in result["levers_one_time_per_million"])
    assert isinstance(result["target"]["met"], bool)
    # (all the savings together, then with the capacity reserved: each cheaper than the last)
    target = result["target"]
    assert (
        target["batched_per_million"]
        > target["all_savings_per_million"]
        > target["all_savings_reserved_per_million"]
    )
    assert target["met_with_all_savings_reserved"] == (target["all_savings_reserved_per_million"] <= 2.0)
    # and the request units match the constants the capacity plan uses: if this fails, the store
    # writes or reads differently; run `make bench-cost` and update punctual_cli/capacity/figures.py
    # (a job handed off by the API writes one unit more than one the scanner sends: its soon marker is
    # deleted, where a minute bucket's marker is left to expire; and it reads one unit less: the API
    # does not read back the job it has just stored, which the scanner reads eventually consistent)
    extra = capacity.HANDED_OFF_EXTRA_WRITE_UNITS
    fewer = capacity.HANDED_OFF_FEWER_READ_UNITS
    for name, constants, more, less in (
        ("handed_off", capacity.ONE_TIME, extra, fewer),
        # (a batch of one is written as a single job is: ONE_TIME_BATCHED is a hundred's, ten an instant)
        ("batched", capacity.ONE_TIME, 0.0, 0.0),
        ("recurring", capacity.RECURRING, 0.0, 0.0),
    ):
        usage = result["measured"][name]["usage_per_execution"]
        assert usage["write_units"] == constants.write_units + more, name
        assert usage["write_units_keys_only"] == constants.write_units_keys_only + more, name
        assert usage["index_write_units_keys_only"] == constants.index_write_units_keys_only, name
        assert usage["read_units"] == constants.read_units - less, name
