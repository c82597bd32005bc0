"""Benchmark 2: scanner throughput under modelled AWS latency. Prints JSON.

The real Scanner, Dispatcher, Store and WorkQueue, on real boto3 clients whose HTTP round trips are
answered in memory after a modelled latency (default 10 ms per DynamoDB call, 20 ms per SQS batch;
see shared/punctual_testing/fake_aws.py). The in-memory DynamoDB enforces the per-partition limit (1,000 write units a
second per partition key), as AWS does, unless --no-partition-limits.

Two measurements, then arithmetic:
1. one invocation scanning every shard, N one-time executions due in the next minute (default 20,000);
2. one shard group of the deployment's layout (fan-out 64 over 64 shards) at its share of a
   1,000,000-execution minute (15,625 markers on one shard) — what each of the fan-out's invocations
   does in parallel on AWS, so its time is the burst minute's drain time, measured;
3. extrapolated drain times for other fan-outs, at 512 MB and at a full vCPU, from the measured rates.

    .venv/bin/python -m bench.scanner_throughput            # the defaults (takes a few minutes)
    .venv/bin/python -m bench.scanner_throughput --markers 2000 --group-markers 0   # quick look
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from bench import offline  # noqa: F401  (first: it sets up the environment)
from bench.common import emit, environment, logs_to, webhook_job
from infra.settings import DeploySettings
from punctual import wiring
from punctual.domain.executions import execution_id_for
from punctual.domain.models import DueMarker
from punctual.platform import aws_limits as sizing
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.platform.timefmt import to_rfc3339
from punctual.scheduling.scanner import shard_groups
from punctual.store import keys
from punctual.store.codec.jobs import job_item
from punctual.store.codec.markers import marker_item
from punctual.wiring import Punctual
from punctual_testing.fake_aws import FakeAws, Latency, clients
from punctual_testing.fake_dynamodb import Table

# The tick runs at :30; every marker is due in the following minute, inside the 90 s lookahead.
NOW = datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC)
DUE_MINUTE = datetime(2026, 12, 1, 9, 1, tzinfo=UTC)
# The deployment's defaults (infra/settings.py, cdk.json).
DEPLOYED_SHARDS = DeploySettings.shard_count
DEPLOYED_FANOUT = DeploySettings.scanner_fanout
BURST = 1_000_000
TARGET_RATE = 2_000  # executions a second, one invocation (docs/benchmarks.md)
TARGET_DRAIN_SECONDS = 30.0
# Time for the tick to start the fan-out's invocations (an asynchronous Invoke each, then a start):
# an assumption, not measured here; cold starts of the Python function are about this long.
INVOCATION_START_SECONDS = 1.0

_SERIALIZER = TypeSerializer()


def _wire(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _SERIALIZER.serialize(value) for name, value in item.items()}


@dataclass
class Stack:
    fake: FakeAws
    punctual: Punctual
    table: Table
    queue_url: str


def build_stack(latency: Latency, *, shard_count: int, partition_limits: bool, page_items: int) -> Stack:
    fake = FakeAws(latency, partition_limits=partition_limits, page_items=page_items)
    definition = resources.TABLE
    table = fake.dynamodb.create_table(definition.name, definition.partition_key, definition.sort_key)
    queue_url = fake.sqs.create_queue(resources.WORK_QUEUE.name)
    dlq_url = fake.sqs.create_queue(resources.DEAD_LETTER_QUEUE.name)
    settings = Settings(
        table_name=definition.name, queue_url=queue_url, dlq_url=dlq_url, shard_count=shard_count
    )
    dynamodb, dynamodb_client, sqs = clients(settings)
    for client in (dynamodb.meta.client, dynamodb_client, sqs):
        fake.attach(client)
    punctual = wiring.build(
        settings, clock=ManualClock(NOW), dynamodb=dynamodb, dynamodb_client=dynamodb_client, sqs=sqs
    )
    return Stack(fake, punctual, table, queue_url)


def populate(stack: Stack, count: int, shards: list[int]) -> None:
    """`count` one-time webhook jobs and their markers, due across DUE_MINUTE, even over `shards`.

    Written straight into the in-memory table (no latency), in the store's own item formats.
    """
    store = stack.punctual.store
    created = NOW - timedelta(hours=1)
    template = _wire(job_item(webhook_job("job_" + "0" * 20, DUE_MINUTE, created)))
    step_ms = 60_000 / max(count, 1)
    for i in range(count):
        job_id = f"job_{i:020x}"
        at = DUE_MINUTE + timedelta(milliseconds=int(i * step_ms))
        job = dict(template)
        job.update(
            pk={"S": keys.job_pk(job_id)},
            id={"S": job_id},
            owner_sk={"S": keys.owner_sk(created, job_id)},
            next_run_at={"S": to_rfc3339(at)},
        )
        stack.table.put(job)
        marker = DueMarker(job_id, execution_id_for(job_id, at, 1), at, 1, shard=shards[i % len(shards)])
        stack.table.put(_wire(marker_item(marker, store.shard_count)))


def measure(stack: Stack, shards: list[int], count: int) -> dict[str, Any]:
    """One scanner invocation over `shards`; its time, rate, calls and CPU."""
    stack.fake.reset_counters()
    scanner = stack.punctual.scanner(shards=shards)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    # The Lambda stops itself after 50 s; here the whole drain is timed, and compared with that.
    report = scanner.tick(budget=timedelta(hours=1))
    seconds = time.perf_counter() - wall_before
    cpu = time.process_time() - cpu_before - stack.fake.backend_cpu_seconds
    sent = len(stack.fake.sqs.queues[stack.queue_url])
    throttled = stack.fake.dynamodb.throughput.throttled if stack.fake.dynamodb.throughput else 0
    calls = dict(sorted(stack.fake.calls.items()))
    # Then nothing is left: another tick (not timed) finds no marker to send.
    again = scanner.tick(budget=timedelta(hours=1)).enqueued
    if not (report.enqueued == count == sent and again == 0 and report.failed == 0 and report.complete):
        raise AssertionError(
            f"scan incomplete: populated {count}, enqueued {report.enqueued}, sent {sent}, "
            f"failed {report.failed}, complete {report.complete}, sent again by the next tick {again}"
        )
    return {
        "markers": count,
        "shards": shards,
        "enqueued": report.enqueued,
        "seconds": round(seconds, 3),
        "enqueued_per_second": round(report.enqueued / seconds, 1),
        "buckets_read": report.buckets_read,
        "within_lambda_budget_50s": seconds <= 50,
        "calls": calls,
        "max_calls_in_flight": stack.fake.max_in_flight,
        "throttled_partition_requests": throttled,
        # CPU of the scanner process itself (boto3, Punctual, threads), without the fake AWS's own.
        "client_cpu_seconds": round(cpu, 3),
        # The fake AWS runs in this process and takes its share of the GIL: the wall time measured
        # here is slower than a Lambda's with the same CPU, by up to this much.
        "fake_aws_cpu_seconds": round(stack.fake.backend_cpu_seconds, 3),
        "client_cpu_ms_per_1000_executions": round(cpu / max(report.enqueued, 1) * 1e6, 1),
    }


def scan(count: int, shards: list[int], args: argparse.Namespace) -> dict[str, Any]:
    stack = build_stack(
        Latency(dynamodb=args.dynamodb_latency_ms / 1000, sqs=args.sqs_latency_ms / 1000),
        shard_count=args.shard_count,
        partition_limits=args.partition_limits,
        page_items=args.page_items,
    )
    populate(stack, count, shards)
    return measure(stack, shards, count)


def cpu_ceiling(cpu_ms_per_1000: float, memory_mb: int) -> float:
    """Executions a second one invocation could do on the CPU share Lambda gives `memory_mb`.

    Lambda allocates CPU in proportion to memory, one vCPU at 1,769 MB; the GIL keeps the scanner's
    Python on one core, so more memory than that does not help. This machine's core is taken as
    equal to a Lambda vCPU (Graviton arm64): an assumption.
    """
    share = min(1.0, memory_mb / sizing.LAMBDA_MB_PER_VCPU)
    return share * 1e6 / max(cpu_ms_per_1000, 1e-9)


def drain_table(rate: float, cpu_ms_per_1000: float) -> list[dict[str, Any]]:
    """Extrapolated: the 1M minute's drain time by fan-out, at the default and at a full vCPU.

    The scanner is CPU-bound once its calls overlap, so one invocation's rate does not grow with its
    shard count. It is the rate measured here, capped by the CPU share of the function's memory. The
    bucket's partition does not bind: the scanner only reads it (a 1,000,000 minute's 15,625 markers a
    shard are ~900 strongly consistent read units, of the partition's 3,000 a second) and deletes
    nothing from it.
    """
    rows = []
    for fanout in (4, 8, 16, 32, 64, 128):
        row: dict[str, Any] = {
            "fanout": fanout,
            "shard_count": max(DEPLOYED_SHARDS, fanout),
            "markers_per_invocation": math.ceil(BURST / fanout),
        }
        for memory in (512, sizing.LAMBDA_MB_PER_VCPU):
            per_invocation = min(rate, cpu_ceiling(cpu_ms_per_1000, memory))
            seconds = INVOCATION_START_SECONDS + row["markers_per_invocation"] / per_invocation
            row[f"seconds_at_{memory}_mb"] = round(seconds, 1)
            row[f"under_30s_at_{memory}_mb"] = seconds < TARGET_DRAIN_SECONDS
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    with logs_to(sys.stderr):
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    all_shards = list(range(args.shard_count))
    measured: dict[str, Any] = {"all_shards": scan(args.markers, all_shards, args)}
    if args.group_markers:
        group = shard_groups(args.shard_count, args.fanout)[0]
        measured["burst_group"] = scan(args.group_markers, group, args)
    single = measured["all_shards"]
    rate = single["enqueued_per_second"]
    cpu_ms = single["client_cpu_ms_per_1000_executions"]
    group_result = measured.get("burst_group")
    burst_seconds = None if group_result is None else group_result["seconds"] + INVOCATION_START_SECONDS
    return {
        "benchmark": "scanner_throughput",
        "command": "python -m bench.scanner_throughput " + " ".join(sys.argv[1:]),
        "environment": environment(),
        "config": {
            "dynamodb_latency_ms": args.dynamodb_latency_ms,
            "sqs_latency_ms": args.sqs_latency_ms,
            "shard_count": args.shard_count,
            "fanout": args.fanout,
            "query_page_items": args.page_items,
            "partition_limits": args.partition_limits,
            "scanner_memory_mb": args.memory_mb,
        },
        "measured": measured,
        "projected_at_lambda_memory": {
            "memory_mb": args.memory_mb,
            "vcpu_share": round(min(1.0, args.memory_mb / sizing.LAMBDA_MB_PER_VCPU), 3),
            "cpu_bound_executions_per_second": round(cpu_ceiling(cpu_ms, args.memory_mb), 1),
            "executions_per_second": round(min(rate, cpu_ceiling(cpu_ms, args.memory_mb)), 1),
        },
        "extrapolated": {
            "note": "drain time of a 1,000,000-execution minute = invocation start (assumed "
            f"{INVOCATION_START_SECONDS} s) + markers per invocation / per-invocation rate, that rate being "
            "the one measured here (all_shards), capped by the CPU share of the function's memory (the "
            "scanner only reads a minute's bucket: its partition does not bind)",
            "burst_minute": drain_table(rate, cpu_ms),
        },
        "targets": {
            "one_invocation_at_least_2000_per_second": rate >= TARGET_RATE,
            "burst_minute_drained_under_30s_at_default_fanout": (
                None if burst_seconds is None else burst_seconds < TARGET_DRAIN_SECONDS
            ),
            "burst_minute_seconds_at_default_fanout_measured": (
                None if burst_seconds is None else round(burst_seconds, 1)
            ),
        },
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scanner_throughput", description=__doc__.split("\n")[0])
    p.add_argument("--markers", type=int, default=20_000, help="due executions for the all-shards run")
    p.add_argument(
        "--group-markers",
        type=int,
        default=BURST // DEPLOYED_FANOUT,
        help="markers for the one-shard-group run (default: its share of a 1M minute; 0 skips it)",
    )
    p.add_argument("--shard-count", type=int, default=DEPLOYED_SHARDS)
    p.add_argument("--fanout", type=int, default=DEPLOYED_FANOUT)
    p.add_argument("--dynamodb-latency-ms", type=float, default=10.0)
    p.add_argument("--sqs-latency-ms", type=float, default=20.0)
    p.add_argument(
        "--page-items", type=int, default=1000, help="items per Query page (1 MB holds ~7,000 markers)"
    )
    p.add_argument(
        "--memory-mb",
        type=int,
        default=resources.SCANNER_MEMORY_MB,
        help="the scanner function's memory (CDK default)",
    )
    p.add_argument(
        "--no-partition-limits",
        dest="partition_limits",
        action="store_false",
        help="do not enforce 1,000 WCU / 3,000 RCU a second per partition key",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
