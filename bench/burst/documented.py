"""What the model takes from AWS's pages (each with its title and address), what it assumes, and
how each input is labelled in the report: measured, documented or assumed.
"""

from __future__ import annotations

from typing import Any

from punctual.platform import aws_limits as sizing

# AWS's pages, by title (what docs/scaling.md cites), with their addresses.
SQS_SCALING_PAGE = (
    "Configuring scaling behavior for SQS event source mappings (AWS Lambda Developer Guide)",
    "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html",
)
SQS_SCALING_KC_PAGE = (
    "AWS re:Post Knowledge Center, lambda-sqs-scaling; AWS Compute Blog, Introducing faster polling "
    "scale-up for AWS Lambda functions configured with Amazon SQS",
    "https://repost.aws/knowledge-center/lambda-sqs-scaling",
)
SCALING_CONFIG_PAGE = (
    "ScalingConfig (AWS Lambda API Reference)",
    "https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html",
)
POLLER_CONFIG_PAGE = (
    "ProvisionedPollerConfig (AWS Lambda API Reference); AWS::Lambda::EventSourceMapping "
    "ProvisionedPollerConfig (AWS CloudFormation)",
    "https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html, "
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html",
)
PROVISIONED_BLOG_PAGE = (
    "AWS Lambda enhances event processing with provisioned mode for SQS event-source mapping (AWS News Blog)",
    "https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity",
)
LAMBDA_SCALING_PAGE = (
    "Lambda scaling behavior",
    "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html",
)
LAMBDA_QUOTA_PAGE = (
    "Lambda quotas",
    "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
)
SQS_QUOTA_PAGE = (
    "Amazon SQS standard queue quotas",
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html",
)
DDB_QUOTA_PAGE = (
    "Maximum throughput for on-demand tables; Understanding warm throughput (Amazon DynamoDB Developer Guide)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html",
)
# A job read by the scanner or its pack: eventually consistent, an item under 4 KB (bench-cost's item
# sizes): half a read unit ("Read/write capacity units", Amazon DynamoDB Developer Guide).
JOB_READ_UNITS = 0.5
# The table's read units a second, on-demand, by default (DDB_QUOTA_PAGE; adjustable).
TABLE_READ_UNITS = 40_000
DDB_PARTITION_PAGE = (
    "Best practices for designing and using partition keys effectively (Amazon DynamoDB Developer Guide)",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html",
)
LAMBDA_PRICING_PAGE = ("AWS Lambda pricing", "https://aws.amazon.com/lambda/pricing/")

# Documented by AWS.
STANDARD_START = 5  # concurrent batches when messages appear (SQS_SCALING_PAGE)
STANDARD_PER_MINUTE = 300  # concurrent invokes added a minute (SQS_SCALING_PAGE)
# Standard mode without MaximumConcurrency: 1,000 batches at once (SQS_SCALING_PAGE) or 1,250
# concurrent invokes (SQS_SCALING_KC_PAGE). What it can start: the stricter 1,000; what it may take of
# the account's concurrency: 1,250.
STANDARD_BATCHES = sizing.ESM_STANDARD_BATCHES
STANDARD_CONCURRENCY = sizing.ESM_STANDARD_CONCURRENCY
PROVISIONED_PER_MINUTE = 1000  # concurrent invokes added a minute in provisioned mode (SQS_SCALING_PAGE)
# MaximumPollers: 2-10,000 for SQS in the API reference (POLLER_CONFIG_PAGE), at most 2,000 in
# CloudFormation and the CDK: the stricter 2,000 (20,000 concurrent invokes, as PROVISIONED_BLOG_PAGE
# says), which is also what the stack can set.
MAX_POLLERS = sizing.MAX_POLLERS_RANGE[1]
# New execution environments a function may add: 1,000 every 10 s, refilled continuously and never
# carried over, so 1,000 at once and then 100 a second (LAMBDA_SCALING_PAGE).
ENVIRONMENTS_PER_10_SECONDS = sizing.LAMBDA_ENVIRONMENTS_PER_10_SECONDS
# An environment serves about 10 requests a second: it takes no new invoke sooner than 0.1 s after
# its last one started (LAMBDA_SCALING_PAGE, LAMBDA_QUOTA_PAGE).
MIN_INVOKE_SECONDS = 1 / sizing.LAMBDA_REQUESTS_PER_ENVIRONMENT
SQS_IN_FLIGHT = sizing.SQS_IN_FLIGHT  # messages received and not deleted, a standard queue (SQS_QUOTA_PAGE)
PARTITION_READ_UNITS = sizing.PARTITION_READ_UNITS  # a second, per partition (DDB_PARTITION_PAGE)

# Assumed.
# Seconds, uniform: a Python function with boto3 and Powertools (the lead plans with the longest).
COLD_START = (0.25, sizing.COLD_START_SECONDS)
RECEIVE_SECONDS = 0.02  # a poller's ReceiveMessage returning messages, and the invoke
PRE_START_SECONDS = 0.02  # the worker's reads and its claim of the execution before the task
# Table write units an execution in the worker: its claim, its end and the job's outcome (bench-cost;
# the list indexes' entries are written to the indexes, whose throughput is their own).
WORKER_WRITE_UNITS = 3.0
INVOCATION_START_SECONDS = 1.0  # the tick starting the fan-out's invocations (as bench-scanner)
TICK_LEAD_SECONDS = 30.0  # the latest a tick can read a minute's bucket before it falls due (lookahead 90 s)
MARKER_READ_UNITS = 900 / 15_625  # strongly consistent read units a marker (docs/scaling.md section 4)
# The pre-scaling raises MinimumPollers as soon as the forecast sees the minute and lowers it once the
# minute has passed: the extra pollers are paid for about this long a burst.
PRESCALE_MINUTES = 7.0
# The pre-scaling's settings on top of the defaults (infra/settings.py needs all three).
PRESCALE_CONTEXT = "-c worker_min_pollers=2 -c burst_forecast_minutes=5 -c worker_prescale=true"


# The packed path (bench.burst.packed). Measured by `python -m bench.pack_fire` on a shared 2-vCPU
# x86_64 machine, a pack of 500 on 400 threads: a webhook's start, a boto3 UpdateItem, a pack body's read.
PACK_WEBHOOK_CPU_MS = 0.87
DYNAMODB_CALL_CPU_MS = 1.9
PACK_DECODE_MS_PER_ENTRY = 0.005
BATCH_READ_CPU_MS = 8.0  # assumed: a BatchGetItem of a hundred items parsed
# The end of a leased member: one write (ExecutionRepository.put_end); the pack's lease: one.
END_WRITE_UNITS = 1.0


def documented(value: Any, *pages: tuple[str, str], note: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {
        "value": value,
        "label": "documented",
        "pages": [title for title, _ in pages],
        "source": ", ".join(url for _, url in pages),
    }
    if note:
        found["note"] = note
    return found


INPUTS: dict[str, dict[str, Any]] = {
    "scanner_rate_per_invocation": {
        "label": "measured",
        "source": "make bench-scanner (capacity.SCANNER_RATE_FULL_CORE, or --measure-scanner)",
    },
    "scanner_fanout": {"value": 64, "label": "deployment default", "source": "infra/settings.py"},
    "tick_lead_seconds": {
        "value": TICK_LEAD_SECONDS,
        "label": "derived",
        "source": "lookahead 90 s, tick 60 s: a minute's bucket is read at least 30 s ahead",
    },
    "invocation_start_seconds": {"value": INVOCATION_START_SECONDS, "label": "assumed"},
    "standard_mapping": documented(
        f"{STANDARD_START} concurrent batches, +{STANDARD_PER_MINUTE} a minute",
        SQS_SCALING_PAGE,
    ),
    "standard_mapping_ceiling": documented(
        f"without MaximumConcurrency: {STANDARD_BATCHES:,} batches at once (Developer Guide) or "
        f"{STANDARD_CONCURRENCY:,} concurrent invokes (Knowledge Center, Compute Blog)",
        SQS_SCALING_PAGE,
        SQS_SCALING_KC_PAGE,
        note=f"the pages disagree: lateness is modelled with the stricter {STANDARD_BATCHES:,}, the "
        f"account's concurrency with {STANDARD_CONCURRENCY:,}",
    ),
    "maximum_concurrency_setting": documented("MaximumConcurrency 2-1,000", SCALING_CONFIG_PAGE),
    "provisioned_mapping": documented(
        f"each poller 10 concurrent invokes, 10 receives/s, 1 MB/s; MinimumPollers 2-200; "
        f"+{PROVISIONED_PER_MINUTE} concurrent invokes a minute",
        SQS_SCALING_PAGE,
        PROVISIONED_BLOG_PAGE,
    ),
    "maximum_pollers_ceiling": documented(
        f"{MAX_POLLERS:,}",
        POLLER_CONFIG_PAGE,
        PROVISIONED_BLOG_PAGE,
        note="the pages disagree: the API reference accepts 2-10,000 for SQS, CloudFormation and the CDK "
        "at most 2,000; the stricter 2,000 (20,000 concurrent invokes, as the News Blog says)",
    ),
    "warming": {
        "value": "MinimumPollers raised before the minute to what it needs all at one instant, at most "
        "200 (punctual.scheduling.prescaling.desired_min_pollers, minutes ahead)",
        "label": "assumed: the update takes effect within the forecast's minutes",
    },
    "lambda_environment_scaling": documented(
        f"{ENVIRONMENTS_PER_10_SECONDS:,} new execution environments every 10 s per function, "
        "refilled continuously (1,000 at once, then 100 a second), unused rate not carried over",
        LAMBDA_SCALING_PAGE,
    ),
    "requests_per_environment": documented(
        f"about {sizing.LAMBDA_REQUESTS_PER_ENVIRONMENT} a second: an environment takes no new invoke "
        f"within {MIN_INVOKE_SECONDS:g} s of its last",
        LAMBDA_SCALING_PAGE,
        LAMBDA_QUOTA_PAGE,
    ),
    "lambda_concurrency_quota": documented(
        "1,000 (default, adjustable to tens of thousands); new accounts start lower",
        LAMBDA_QUOTA_PAGE,
    ),
    "sqs_in_flight": documented(
        f"about {SQS_IN_FLIGHT:,} messages received and not deleted, a standard queue",
        SQS_QUOTA_PAGE,
        note="one execution a message: at most 12,000 batches of ten at once on one queue",
    ),
    "cold_start_seconds": {"value": list(COLD_START), "label": "assumed (uniform)"},
    "receive_and_invoke_seconds": {"value": RECEIVE_SECONDS, "label": "assumed"},
    "worker_pre_start_seconds": {"value": PRE_START_SECONDS, "label": "assumed"},
    "worker_batch_seconds": {
        "label": "assumed",
        "source": "capacity.Assumptions: task 0.2 s + the worker's own calls 0.05 s",
    },
    "worker_write_units_per_execution": {
        "value": WORKER_WRITE_UNITS,
        "label": "measured",
        "source": "bench-cost: the worker's table writes (claim, end, the job's outcome); the list "
        "indexes' entries go to the indexes' own throughput",
    },
    "table_write_units_per_second": documented(
        40_000,
        DDB_QUOTA_PAGE,
        note="on-demand table quota (default, adjustable); the table assumed warmed to it (a new "
        "on-demand table serves 4,000 at first)",
    ),
    "partition_limits": {
        **documented("1,000 write / 3,000 read units a second a partition", DDB_PARTITION_PAGE),
        "note": "bucket partitions are only read by the scanner (~230 read units/s an invocation); "
        "executions are written under their own job's partition: neither binds",
    },
    "burst_cost": {
        "label": "measured and documented",
        "source": "each execution at bench-cost's measured usage (capacity.figures.ONE_TIME, creation "
        f"included) and list prices; pollers at the EPU-hour price ({LAMBDA_PRICING_PAGE[0]}) for "
        f"{PRESCALE_MINUTES:g} minutes (assumed); cold starts' initialisation billed",
    },
    "sqs_ordering": {"value": "oldest visible first", "label": "assumed (standard queues order best-effort)"},
    "pack_webhook_cpu_ms": {
        "value": PACK_WEBHOOK_CPU_MS,
        "label": "measured",
        "source": "python -m bench.pack_fire: 500 webhooks on the PackRunner's 400 threads, loopback, no TLS",
    },
    "dynamodb_call_cpu_ms": {
        "value": DYNAMODB_CALL_CPU_MS,
        "label": "measured",
        "source": "python -m bench.pack_fire: a boto3 UpdateItem (a claim, an outcome write) on 400 threads "
        "to a stand-in answering at once",
    },
    "pack_decode_ms_per_entry": {
        "value": PACK_DECODE_MS_PER_ENTRY,
        "label": "measured",
        "source": "python -m bench.pack_fire: domain.work.read_body of 500 entries",
    },
    "batch_read_cpu_ms": {"value": BATCH_READ_CPU_MS, "label": "assumed"},
    "lead_seconds": {
        "label": "derived",
        "source": "punctual.scheduling.prescaling.lead_seconds on the deployment's settings "
        "(LeadPolicy.from_settings): the mapping's and Lambda's documented scaling, the assumed cold "
        "start and pack preparation, bounded by lead_max_seconds (15)",
    },
    "pack_prepare_seconds": {
        "value": sizing.PACK_PREPARE_SECONDS,
        "label": "assumed",
        "source": "what the lead allows for a pack's body, jobs and lease before it can hold "
        "(punctual.platform.aws_limits)",
    },
    "end_write_units": {
        "value": END_WRITE_UNITS,
        "label": "assumed",
        "source": "a leased member's end, one put (execution.packs); the pack's lease, one",
    },
    "worker_memory_mb": {
        "value": 512,
        "label": "deployment default",
        "source": "infra/components/functions.py",
    },
    "worker_cpu_ms_per_webhook": {
        "label": "measured",
        "source": "python -m bench.webhook_cpu (capacity.WORKER_CPU_MS_PER_WEBHOOK, "
        "or --measure-worker); plain HTTP on loopback, no TLS",
    },
}
