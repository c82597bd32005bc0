"""What the deployment is sized by: limits AWS documents for the services Punctual runs on, and the
few per-execution figures that the scanner's burst forecast (punctual.scheduling.prescaling) plans with.

Runtime code reads them here; so does the capacity planner (punctual_cli.capacity), which adds prices,
the rest of the measured figures and its assumptions.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------- AWS limits
# DynamoDB: per partition 1,000 write units and 3,000 read units a second (or a linear combination);
# adaptive capacity moves hot keys apart but never lifts a partition past this.
PARTITION_WRITE_UNITS = 1000.0
PARTITION_READ_UNITS = 3000.0
# On-demand table throughput quota (per table, adjustable), and what a new on-demand table serves
# before it has seen a higher peak (it then doubles within 30 minutes of a new peak). Provisioned,
# the same 40,000 caps the table and each of its indexes, and the account's tables and indexes
# together may provision 80,000 write and 80,000 read units (all adjustable).
TABLE_QUOTA_UNITS = 40_000
NEW_TABLE_WRITE_UNITS = 4_000
ACCOUNT_PROVISIONED_UNITS = 80_000
# Lambda: concurrent executions per account and region (adjustable; a new account starts lower and
# AWS raises it with use: "Lambda quotas"); an SQS event source mapping's MaximumConcurrency setting
# goes up to 1,000 ("ScalingConfig").
LAMBDA_ACCOUNT_CONCURRENCY = 1_000
ESM_MAX_CONCURRENCY = 1_000
# A standard-mode mapping without MaximumConcurrency: "Configuring scaling behavior for SQS event source
# mappings" says 1,000 batches at once, AWS's Knowledge Center and Compute Blog say 1,250 concurrent
# invokes. Lateness is planned with the stricter 1,000, the account's concurrency with 1,250.
ESM_STANDARD_BATCHES = 1_000
ESM_STANDARD_CONCURRENCY = 1_250
# An execution environment serves about 10 requests a second, so a function's request rate is capped
# near 10 x its concurrency; a function adds at most 1,000 environments every 10 s, refilled
# continuously, unused rate not carried over ("Lambda scaling behavior").
LAMBDA_REQUESTS_PER_ENVIRONMENT = 10
LAMBDA_ENVIRONMENTS_PER_10_SECONDS = 1_000
# Lambda gives CPU in proportion to memory: one vCPU at 1,769 MB.
LAMBDA_MB_PER_VCPU = 1769
# SQS standard queue: about 120,000 messages in flight (received, not yet deleted); delayed
# messages are not in flight. API Gateway: 10,000 requests a second per account and region.
SQS_IN_FLIGHT = 120_000
API_GATEWAY_RPS = 10_000
# EventBridge PutEvents: 10,000 entries a second per account in us-east-1 (adjustable; fewer in most
# other regions).
EVENTBRIDGE_PUT_EVENTS_PER_SECOND = 10_000
SQS_BATCH = 10
# SQS: a message's delay is at most 15 minutes, its visibility timeout under 12 hours, and
# SendMessageBatch takes at most 1 MiB of bodies a call.
SQS_MAX_DELAY_SECONDS = 900
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600 - 1
SQS_BATCH_MAX_BYTES = 1_000_000
# Messages a worker invocation takes (its event source mapping's BatchSize): one, a pack, which is
# the unit; packs spread over execution environments.
WORKER_BATCH = 1
# Executions a worker invocation starts, as the burst model counts them: the pack it takes. A crowded
# instant (what prescaling is for) packs at least this many executions a message, as many as the
# ten single-execution messages an invocation took before packs: a lower bound, so the pollers and
# concurrency the model asks for are not too few.
EXECUTIONS_PER_INVOKE = WORKER_BATCH * SQS_BATCH
# An SQS event source mapping in provisioned mode: each event poller takes up to 10 concurrent
# invokes, 10 receives a second or 1 MB/s; MinimumPollers is 2-200; scaling adds up to 1,000
# concurrent invokes a minute ("Configuring scaling behavior for SQS event source mappings").
# MaximumPollers: the API reference's "ProvisionedPollerConfig" accepts 2-10,000 for SQS (its earlier
# versions 2,000), CloudFormation's "AWS::Lambda::EventSourceMapping ProvisionedPollerConfig" and the
# CDK at most 2,000: designed for the stricter 2,000, which is also what a CloudFormation stack can set.
# Standard mode starts at 5 and adds up to 300 a minute.
POLLER_CONCURRENT_INVOKES = 10
POLLER_RECEIVES_PER_SECOND = 10
POLLER_BYTES_PER_SECOND = 1_000_000
MIN_POLLERS_RANGE = (2, 200)
MAX_POLLERS_RANGE = (2, 2000)
PROVISIONED_INVOKES_PER_MINUTE = 1_000
STANDARD_START_INVOKES = 5
STANDARD_INVOKES_PER_MINUTE = 300
SQS_BILLING_CHUNK_BYTES = 64 * 1024

# ------------------------------------------------------------------ worker batches, one-time jobs
# Assumed: a task's mean duration (a webhook round trip) and a worker batch's own DynamoDB calls.
TASK_SECONDS = 0.2
WORKER_OVERHEAD_SECONDS = 0.05
# Measured (`make bench-cost`, punctual_cli.capacity.figures.ONE_TIME): write units of one one-time
# execution, its creation included, with the indexes projecting KEYS_ONLY.
ONE_TIME_WRITE_UNITS = 5.0

# ------------------------------------------------------------------ a pack taken ahead of its instant
# Assumed: a new execution environment's initialisation (Python, boto3, Powertools), at its longest,
# and a pack's work before it can hold: its body read, its jobs read, its lease written.
COLD_START_SECONDS = 0.8
PACK_PREPARE_SECONDS = 0.5
