"""The capacity planner's inputs as data: AWS list prices, the figures the benchmarks measured (each
with the command that produced it), and the assumptions the caller may change.

AWS's documented limits, and the figures the runtime's burst forecast also uses, are in
punctual.platform.aws_limits; the arithmetic on all of them is punctual_cli.capacity.model and .cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual.platform import aws_limits as sizing
from punctual.platform import resources
from punctual.platform.aws_limits import LAMBDA_MB_PER_VCPU

# --------------------------------------------------------------------------------------- prices


@dataclass(frozen=True)
class Prices:
    """us-east-1 list prices in USD, without free tiers.

    As published by AWS in 2025: DynamoDB on-demand after its 1 November 2024 reduction, Lambda arm64
    at the first duration tier, API Gateway at the first request tier. Re-check before relying on them.
    """

    api_rest_per_million: float = 3.50  # REST API requests (first 333 M a month)
    api_http_per_million: float = 1.00  # HTTP API requests (first 300 M a month, 512 KB each)
    lambda_requests_per_million: float = 0.20
    lambda_arm64_gb_second: float = 0.0000133334
    dynamodb_write_units_per_million: float = 0.625  # on-demand write request units
    dynamodb_read_units_per_million: float = 0.125  # on-demand read request units
    dynamodb_storage_gb_month: float = 0.25
    dynamodb_pitr_gb_month: float = 0.20  # point-in-time recovery (on in the stack)
    dynamodb_wcu_hour: float = 0.00065  # provisioned capacity
    dynamodb_rcu_hour: float = 0.00013
    # Reserved capacity, one-year term (provisioned tables of the Standard class): a fee upfront and an
    # hourly rate, for each 100 units reserved.
    dynamodb_reserved_100_wcu_upfront: float = 150.0
    dynamodb_reserved_100_wcu_hour: float = 0.0128
    dynamodb_reserved_100_rcu_upfront: float = 30.0
    dynamodb_reserved_100_rcu_hour: float = 0.0025
    sqs_per_million: float = 0.40  # standard queue requests, each 64 KB of payload a request
    logs_ingested_gb: float = 0.50  # CloudWatch Logs (function logs and EMF metrics)
    metric_month: float = 0.30  # CloudWatch custom metric (EMF), first 10,000
    alarm_month: float = 0.10
    dashboard_month: float = 3.00
    xray_traces_per_million: float = 5.00
    secret_month: float = 0.40  # Secrets Manager: the cursor-signing key
    eventbridge_scheduler_per_million: float = 1.00  # for comparison; scheduled rules are free
    eventbridge_events_per_million: float = 1.00  # custom events put on a bus (each 64 KB chunk one)
    # Provisioned mode of an SQS event source mapping, per Event Poller Unit-hour: documented by AWS in
    # the Lambda pricing page's SQS example (https://aws.amazon.com/lambda/pricing/, "Pricing Example
    # 2", US East (N. Virginia)). One poller taken as one EPU (assumed: that example's 10 minimum
    # pollers bill about 8,000 EPU-hours a month).
    sqs_poller_epu_hour: float = 0.00925


PRICES = Prices()

SECONDS_PER_MONTH = 730 * 3600  # AWS bills a month as 730 hours
HOURS_PER_MONTH = SECONDS_PER_MONTH / 3600

# ------------------------------------------------------------------- measured (benchmark 2)
# The scanner's own CPU per execution, and one invocation's rate with a whole core, from
#   .venv/bin/python -m bench.scanner_throughput     (make bench-scanner)
# on a shared 2-vCPU x86_64 machine: one invocation over 64 shards, 20,000 executions, 10 ms per
# DynamoDB call, 20 ms per SQS batch (201 ms of CPU per 1,000 executions, 4,098 a second measured
# with the benchmark's in-process fake AWS taking its share of the GIL; every call batched, no
# execution stored, no marker deleted from a minute's bucket; 3,902-4,310 a second over eleven runs).
# On Lambda the CPU share of the memory caps the rate.
SCANNER_CPU_MS_PER_1000 = 201.0
SCANNER_RATE_FULL_CORE = 4098.0

# ------------------------------------------------------------- measured (webhook CPU benchmark)
# The worker's own CPU to start one webhook (the `http` task: guard, headers, a connection, the
# answer), 1,000 of them 50 at once on threads from one process, to a receiver in another process on
# loopback (plain HTTP: a TLS handshake would add to it), from
#   .venv/bin/python -m bench.webhook_cpu
# on a shared 2-vCPU x86_64 machine (0.46 ms; one after another, 0.39 ms).
WORKER_CPU_MS_PER_WEBHOOK = 0.46


# ------------------------------------------------------------------- measured (benchmark 3)


@dataclass(frozen=True)
class ExecutionUsage:
    """What one execution uses of each service, creation (if any) included."""

    api_requests: float  # API Gateway requests, and API function invocations
    write_units: float  # DynamoDB write request units, index writes included
    read_units: float  # DynamoDB read request units
    write_units_keys_only: float  # the same, if the indexes projected KEYS_ONLY
    index_write_units_keys_only: float  # of write_units_keys_only, those of the indexes' entries
    sqs_requests: float  # billed SQS requests: sends, receives and deletes, batches of 10
    log_bytes: float  # CloudWatch Logs ingested: Powertools lines and EMF metrics
    metric_bytes: float  # of which EMF metrics (kept when INFO lines are turned off)
    item_bytes: float  # stored bytes of the execution's item (kept for the retention period)
    job_bytes: float  # stored bytes of a one-time job's item (expires with its history)
    # Changes of the execution's status, each a record of the table's stream that the execution
    # events function puts on the stack's bus (execution_events "all"): on AWS, a first attempt under
    # its pack's lease only its end (a retry adds RETRYING, RUNNING and its end).
    status_changes: float = 0.0
    # Bytes a change adds to its event (its detail's JSON and a comma): a stream batch's changes of one
    # owner to one status share one event, up to EVENTBRIDGE_EVENT_BYTES.
    event_detail_bytes: float = 0.0
    # Of index_write_units_keys_only, those of the index that takes the most (its provisioned bounds,
    # which every index gets).
    busiest_index_write_units_keys_only: float = 0.0


# Per execution, from a run on moto of 50 one-time (one a request), 100 one-time (a batch of 100)
# and 10 every-minute cron webhook jobs:
#   .venv/bin/python -m bench.cost     (make bench-cost)
# Request units are computed from item sizes by DynamoDB's rules (punctual_testing/units.py); SQS requests
# assume full batches of ten (sends, receives, deletes), as under load.
# A one-time job due three minutes or more after its creation: the scanner sends it from its minute's
# bucket and leaves the marker to expire. One due sooner is handed off by the API through its shard's
# soon partition, whose marker is deleted once sent: one write unit more (the cost run's `handed_off`),
# and half a read unit less: the API dispatches the job it has just stored without reading it back.
HANDED_OFF_EXTRA_WRITE_UNITS = 1.0
HANDED_OFF_FEWER_READ_UNITS = 0.5
# The bytes a status change adds to its execution event, the owner an assumed-role ARN (the cost
# run's `event_detail_bytes`: the same for a one-time job's run and a recurring occurrence).
EVENT_DETAIL_BYTES = 471.0
ONE_TIME = ExecutionUsage(
    api_requests=1.0,
    write_units=6.0,  # as if the indexes projected ALL
    # the scanner's and the worker's reads of the job, eventually consistent (half a unit each), and
    # its pack's Query of the instant's change records (1), a pack of one; shared in a larger pack
    read_units=2.0,
    # creation 3 (marker, job, its by_owner entry: a job without a name of its own has no by_name
    # entry, an active one no by_flag entry); scan 0; worker 2, a pack of one (its lease, and its end
    # stored on its job's item in the write completing the job: a job that succeeded carries no
    # flag). Executions sharing an instant and a shard share a lease: a little less.
    write_units_keys_only=sizing.ONE_TIME_WRITE_UNITS,
    # its by_owner entry, put at creation
    index_write_units_keys_only=1.0,
    busiest_index_write_units_keys_only=1.0,  # by_owner
    sqs_requests=0.3,
    # the API's line and EMF metrics, and its share of its pack's line (the cost run: 419)
    log_bytes=419.0,
    metric_bytes=250.0,
    # Measured with an assumed-role ARN as the owner (bench.cost.meter.CALLER), as callers are named on AWS:
    # the job item, which stores it twice, is 1,050 B stored when completed with its run on it (950 B
    # of attributes, under the 1 KB of a write unit); the run has no item of its own.
    item_bytes=0.0,
    job_bytes=1050.0,
    # Its end only: nothing of a run under a lease is stored before it.
    status_changes=1.0,
    event_detail_bytes=EVENT_DETAIL_BYTES,
)
# One-time jobs created through POST /jobs/batch, BATCH_JOBS a request, ten due at each instant (the
# cost run's `batched`): a hundredth of the API requests and of their log lines; creation 1.14 write
# units (the job; a tenth of its instant's group marker item; a share of the batch's one list entry,
# and of its by_owner entry, instead of one each), the run 0.30 (a tenth of its pack's lease, and of
# the one write of the pack's ten ends to their batch's ends item, store/batch_ends.py: the group's ten
# share a shard, and so a pack); reads 1.1 (the scanner's and the worker's, eventually consistent); a
# tenth of its pack's log line. Stored: its job's item, which no end rewrites, and a tenth of the ends
# item. A batch of one is written as a single job is.
BATCH_JOBS = 100
ONE_TIME_BATCHED = ExecutionUsage(
    api_requests=0.01,
    write_units=1.46,
    read_units=1.1,
    write_units_keys_only=1.44,
    index_write_units_keys_only=0.01,
    busiest_index_write_units_keys_only=0.01,
    sqs_requests=0.3,
    log_bytes=133.0,
    metric_bytes=50.0,
    item_bytes=174.0,
    job_bytes=856.0,
    status_changes=1.0,
    event_detail_bytes=EVENT_DETAIL_BYTES,
)
RECURRING = ExecutionUsage(
    api_requests=0.0,
    write_units=8.0,  # with ALL, each of the occurrence's two job updates rewrites its by_owner entry
    read_units=2.0,  # as a one-time job's (a pack of one; the cost run, packs of a few: 1.4)
    # An every-minute job: scan 3 (next marker, filed under the soon partition since it is due within
    # the hand-off window, that marker's delete, the job's next_run_at); worker 3, a pack of one (its
    # lease, the run's end on an item of its own, and the job's outcome: what lists show and filter
    # by without reading executions). A job with a period of three minutes or more files into a
    # minute bucket and deletes nothing: 5. Occurrences sharing an instant and a shard share a lease.
    write_units_keys_only=6.0,
    # (its by_owner entry was put at its creation; by_flag's only when its outcome flips)
    index_write_units_keys_only=0.0,
    sqs_requests=0.3,
    log_bytes=215.0,
    metric_bytes=48.0,
    item_bytes=600.0,
    job_bytes=0.0,
    status_changes=1.0,
    event_detail_bytes=EVENT_DETAIL_BYTES,
)

# ----------------------------------------------------------------------------- assumptions


@dataclass(frozen=True)
class Assumptions:
    """What the benchmarks cannot measure here (`punctual capacity` has flags for the main ones)."""

    task_seconds: float = sizing.TASK_SECONDS  # mean task duration (a webhook round trip)
    worker_overhead_seconds: float = sizing.WORKER_OVERHEAD_SECONDS  # a worker batch's own DynamoDB calls
    batch_fill: float = 10.0  # messages per worker invocation under load (batch size 10)
    worker_memory_mb: int = 512
    api_seconds: float = 0.05  # one POST /jobs: validation and two PutItem (a batch: batch_api_seconds)
    api_memory_mb: int = 512
    scanner_memory_mb: int = 1769  # one vCPU, as deployed (infra/components/ticker.py)
    retention_days: int = 30
    # Share of invocations X-Ray records: its default rule samples the first request each second
    # and 5 % of the rest; under load, about 5 %.
    xray_sampled: float = 0.05
    # Lambda's START/END/REPORT lines per invocation, in bytes.
    platform_log_bytes: float = 260.0
    # API Gateway as deployed by default: an HTTP API ($1.00 a million requests); False prices the REST
    # API that `-c api_type=rest` deploys ($3.50).
    http_api: bool = True
    # Price the indexes as projected KEYS_ONLY (as resources.py defines them) rather than ALL.
    keys_only_indexes: bool = all(index.projection == "KEYS_ONLY" for index in resources.TABLE.indexes)
    # Execution status events on the stack's bus (the deployment's execution_events): "all" (each
    # status change), "final" (one an execution: its end) or "off". The stream's records reach their
    # function in batches (events_batch records, about events_seconds each), under load full ones of
    # one owner's changes to one status: one event a batch, while its changes' details fit in 64 KB.
    # (Each further owner or status in a batch is one event more.)
    execution_events: str = "all"
    events_batch: float = 100.0
    events_seconds: float = 0.25
    events_memory_mb: int = 256


def batch_api_seconds(jobs: int) -> float:
    """Assumed duration of one POST /jobs/batch of `jobs` jobs: a single create's, plus validating each
    job (a cron or time zone parse, a task check) and its share of the parallel BatchWriteItems."""
    return 0.05 + 0.005 * jobs


# 100 bytes DynamoDB adds to every stored item.
KEYS_ONLY_ENTRY_BYTES = 250
# EventBridge bills each 64 KB chunk of an event as one event ("Amazon EventBridge pricing"), and the
# execution events function cuts each entry to one (punctual.notify.execution_events.EVENT_BYTES).
EVENTBRIDGE_EVENT_BYTES = 64_000
# An execution events entry's bytes besides its changes' details: its source, detail-type and bus
# name, and its detail's version, owner and status (assumed: an owner's ARN of about 100 characters,
# a stack name of about 40).
EVENTS_ENTRY_OVERHEAD_BYTES = 300
# Indexes holding every job (by_owner); the sparse ones hold fewer (by_task: jobs using a named task;
# by_name: jobs named by their users; by_flag: paused, cancelled or failing jobs; priced as if they
# held none).
INDEXES = sum(not index.sparse for index in resources.TABLE.indexes)

# Fixed monthly cost, whatever the load: dashboard, 12 alarms, 12 EMF metrics, the cursor secret, the
# worker event source mapping's idle long polls (about 15 a minute), a tick a minute plus the
# fan-out's invocations, and each tick's lease on its shards (a put and a delete a shard, 1 write unit
# each) and its positions (a put a shard for each minute it reads: two a tick, the horizon's minute
# and the one before).
FIXED_ALARMS = 12
FIXED_METRICS = 12
IDLE_POLLS_PER_MINUTE = 15
BOOKKEEPING_WRITES_PER_SHARD = 4  # write units a shard a tick


def scanner_rate(memory_mb: int) -> float:
    """Executions a second one scanner invocation enqueues at `memory_mb` (GIL: one core at most)."""
    share = min(1.0, memory_mb / LAMBDA_MB_PER_VCPU)
    return min(SCANNER_RATE_FULL_CORE, share * 1e6 / SCANNER_CPU_MS_PER_1000)
