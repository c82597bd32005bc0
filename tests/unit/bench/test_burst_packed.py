"""The burst model's packed path (bench.burst.packed): packs cut as the scanner cuts them, members
started by the worker's CPU share, and the JSON blocks `make bench-burst` prints."""

from __future__ import annotations

from bench.burst import main, packed

COSTS = packed.Costs(webhook_ms=0.87, dynamodb_call_ms=1.9, batch_read_ms=8.0, decode_ms_per_entry=0.005)


def test_a_million_at_one_instant_makes_2048_packs_over_64_shards() -> None:
    sizes = packed.pack_sizes(1_000_000, 64, 500)
    assert sum(len(shard) for shard in sizes) == 2048
    assert sum(map(sum, sizes)) == 1_000_000


def test_members_beyond_the_threads_start_after_a_thread_frees() -> None:
    # Given a pack of 500 received well ahead, 400 threads, at 512 MB
    d = packed.PackedDeployment(lead_seconds=15, table_write_units=10**9)
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
    assert result["inputs"]["lead_seconds"]["label"] == "assumed"
