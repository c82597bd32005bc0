"""The burst model's packed path (bench.burst.packed): packs cut as the scanner cuts them, members
started by the worker's CPU share, and the JSON blocks `make bench-burst` prints."""

from __future__ import annotations

from bench.burst import main, packed, scenarios
from punctual.execution.hooks import PERSIST_SECONDS
from punctual.scheduling.prescaling import LeadPolicy, lead_seconds

COSTS = packed.Costs(webhook_ms=0.87, dynamodb_call_ms=1.9, batch_read_ms=8.0, decode_ms_per_entry=0.005)


def test_a_million_at_one_instant_makes_2048_packs_over_64_shards() -> None:
    sizes = packed.pack_sizes(1_000_000, 64, 500)
    assert sum(len(shard) for shard in sizes) == 2048
    assert sum(map(sum, sizes)) == 1_000_000


def test_members_beyond_the_threads_start_after_a_thread_frees() -> None:
    # Given a pack of 500 received well ahead, 400 threads, at 512 MB
    d = packed.PackedDeployment(lead_seconds=15, fire_threads=400, table_write_units=10**9)
    table = packed._Table(10**9)
    starts, end = packed.run_pack(500, -14.0, 0.0, d, COSTS, table, packed._Table(10**9))
    # Then none starts early, the 401st after the first's answer, and the invocation ends last
    assert min(starts) >= 0.0
    assert starts[400] >= starts[0] + COSTS.task_seconds
    assert end > max(starts)


def test_the_burst_benchmark_prints_the_packed_blocks() -> None:
    args = main.parser().parse_args(
        ["--burst", "20000", "--steady-seconds", "2", "--only", "one_instant_million", "steady_10k_per_s"]
    )
    result = main.run(args)
    instant = result["one_instant_million"]
    assert {"p50_s", "p99_s", "max_s", "environments", "burst_cost_usd", "quota_raises", "depends_on"} <= (
        instant.keys()
    )
    assert instant["p50_s"] <= instant["p99_s"] <= instant["max_s"]
    assert instant["packs"] == 64  # 20,000 over 64 shards: a pack each
    assert {"p99_s", "max_s"} <= result["steady_10k_per_s"].keys()
    assert result["inputs"]["lead_seconds"]["label"] == "derived"


def test_the_model_takes_each_instants_lead_from_the_code() -> None:
    # Given the default deployment pre-scaled, as the benchmark builds it
    args = main.parser().parse_args([])
    d = scenarios.packed_prescaled(4098.0, args, 1_000_000)
    functions = scenarios.PRESCALED.function_settings()
    # Then its lead is the functions' own, for a million at one instant and for a quiet second
    assert d.lead == LeadPolicy.from_settings(functions)
    assert d.ahead(1_000_000) == lead_seconds(1_000_000, d.lead) == 12
    assert d.ahead(10_000) == 0
    # and the pollers the pre-scaling raises ahead, within the deployment's maximum
    assert (d.min_pollers, d.max_pollers) == (200, 210)


def test_a_pack_is_taken_under_one_lease_and_fires_at_its_instant() -> None:
    # Given a pack of 500 received 5 s ahead at 512 MB, its threads as many as its members
    d = packed.PackedDeployment(lead_seconds=5, table_write_units=10**9)
    leases = packed._Table(10**9)
    starts, _ = packed.run_pack(500, -5.0, 0.0, d, COSTS, leases, packed._Table(10**9))
    # Then one write is asked ahead (its lease), none starts early, and the last starts once the
    # worker's share of a vCPU has started the 500 (0.87 ms each at 0.289 of a vCPU: 1.5 s)
    assert sum(leases.by_second.values()) == 1
    assert min(starts) >= 0.0
    assert 1.5 < max(starts) < 1.7


def test_the_quota_raises_store_every_end_within_the_persist_budget_and_cover_the_reads() -> None:
    # Given a million due at one instant on the default deployment, as the benchmark models it
    args = main.parser().parse_args(["--only", "one_instant_million"])
    instant = main.run(args)["one_instant_million"]
    raised = {r["quota"].split(" (")[0]: r["raise_to"] for r in instant["quota_raises"]}
    # Then with the raises every end is stored within the worker's persist budget (past it, a
    # throttled end would give its message back and the run be made again); at the default write
    # units it would not be
    assert instant["last_end_written_s"] <= PERSIST_SECONDS
    assert not instant["at_default_quotas"]["ends_within_persist_budget"]
    assert raised["DynamoDB table write throughput"] > 40_000
    # and the reads of the scanner's drain are asked for too
    assert raised["DynamoDB table read throughput"] >= 1_000_000 * 0.5 / 10
