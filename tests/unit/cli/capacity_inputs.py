"""The assumptions and usage the capacity tests plan with, chosen so that the figures are round."""

from __future__ import annotations

from punctual_cli import capacity
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage

# A full vCPU: the scanner's rate is then capped by the bucket partition (500 deletes/s, half of
# 1,000 write units), not by the measured CPU figures, so the plan's numbers are round.
FULL_VCPU = Assumptions(scanner_memory_mb=1769)
# Write units of a one-time execution on the table (the rest is the by_owner index's entry)
TABLE_WRITES = capacity.ONE_TIME.write_units_keys_only - capacity.ONE_TIME.index_write_units_keys_only
BOOKKEEPING = capacity.BOOKKEEPING_WRITES_PER_SHARD  # the scanner's writes a shard a tick


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
