"""A million executions' cost as deployed by default, in cents, beside its targets, its breakdown
by service and its inputs labelled measured, documented or assumed.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from infra.settings import DeploySettings
from punctual_cli import capacity
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage

TARGET_PER_MILLION = 2.00


# The cost targets: a million one-time jobs created in batches at most what EventBridge Scheduler
# invoking a Lambda function costs, and created one a request at most $3.50 (API Gateway's $1.00 in).
ONE_TIME_TARGET_USD = 3.50
# The figures of `per_million_usd` and the measured workload each comes from (one_time falls back to
# the handed-off workload when only that one ran: both create one job a request).
PER_MILLION_SOURCES = {
    "one_time": ("one_time", "handed_off"),
    "one_time_batched": ("batched",),
    "cron_every_minute": ("recurring",),
}
# Each price's page (documented), by the cost row it makes.
PRICE_PAGES = {
    "api_gateway": "Amazon API Gateway pricing",
    "lambda_requests": "AWS Lambda pricing",
    "lambda_compute": "AWS Lambda pricing",
    "dynamodb_writes": "Amazon DynamoDB pricing",
    "dynamodb_reads": "Amazon DynamoDB pricing",
    "dynamodb_storage": "Amazon DynamoDB pricing",
    "sqs": "Amazon SQS pricing",
    "eventbridge_events": "Amazon EventBridge pricing",
    "cloudwatch_logs": "Amazon CloudWatch pricing",
    "xray": "AWS X-Ray pricing",
    "scheduler": "Amazon EventBridge pricing",
}
_PRICE_FIELDS = {
    "api_gateway": ("api_http_per_million", "api_rest_per_million"),
    "lambda_requests": ("lambda_requests_per_million",),
    "lambda_compute": ("lambda_arm64_gb_second",),
    "dynamodb_writes": ("dynamodb_write_units_per_million",),
    "dynamodb_reads": ("dynamodb_read_units_per_million",),
    "dynamodb_storage": ("dynamodb_storage_gb_month", "dynamodb_pitr_gb_month"),
    "sqs": ("sqs_per_million",),
    "eventbridge_events": ("eventbridge_events_per_million",),
    "cloudwatch_logs": ("logs_ingested_gb",),
    "xray": ("xray_traces_per_million",),
    "scheduler": ("eventbridge_scheduler_per_million",),
}


def deployed_assumptions(task_seconds: float) -> Assumptions:
    """The assumptions, with what the default deployment decides taken from infra/settings.py: its
    API type and its execution events."""
    return Assumptions(
        task_seconds=task_seconds,
        http_api=DeploySettings.api_type == "http",
        execution_events=DeploySettings.execution_events,
    )


def _cents(value: float) -> float:
    # Cents: the measured log bytes move by a few bytes between runs; the figures must not.
    return round(value, 2)


def per_million_usd(
    usages: dict[str, ExecutionUsage], assumptions: Assumptions, batch_size: int
) -> dict[str, Any]:
    """What a million executions cost as deployed by default, each figure labelled, against the
    targets, and where the money goes.

    Returns the `per_million_usd` block (the four figures, None for a workload not run) and beside it
    its targets, its breakdown by service and its inputs."""
    costs: dict[str, dict[str, float]] = {}
    sources: dict[str, str] = {}
    for figure, candidates in PER_MILLION_SOURCES.items():
        found = next((name for name in candidates if name in usages), None)
        if found is None:
            continue
        scenario = assumptions
        if found == "batched":
            scenario = replace(assumptions, api_seconds=capacity.batch_api_seconds(batch_size))
        costs[figure] = capacity.per_million(capacity.cost_per_execution(usages[found], scenario))
        sources[figure] = found
    scheduler = capacity.eventbridge_scheduler_per_million(assumptions)
    block: dict[str, Any] = {figure: None for figure in PER_MILLION_SOURCES}
    block.update({figure: _cents(rows["total"]) for figure, rows in costs.items()})
    block["eventbridge_scheduler_lambda"] = _cents(scheduler["total"])

    def target(figure: str, limit: float, against: str) -> dict[str, Any]:
        value = block[figure]
        return {
            "figure": figure,
            "at_most": against,
            "limit": limit,
            "value": value,
            "met": None if value is None else value <= limit,
            "over_by": None if value is None else _cents(max(0.0, value - limit)),
        }

    targets = [
        target("one_time_batched", block["eventbridge_scheduler_lambda"], "eventbridge_scheduler_lambda"),
        target("one_time", ONE_TIME_TARGET_USD, f"${ONE_TIME_TARGET_USD:.2f}"),
    ]
    breakdown: dict[str, Any] = {
        figure: {
            name: _cents(value)
            for name, value in sorted(rows.items(), key=lambda pair: -pair[1])
            if name != "total" and _cents(value)
        }
        for figure, rows in costs.items()
    }
    breakdown["eventbridge_scheduler_lambda"] = {k: _cents(v) for k, v in scheduler.items() if k != "total"}
    breakdown["drivers_per_execution"] = {
        figure: {
            "dynamodb_write_units": round(
                usages[sources[figure]].write_units_keys_only
                if assumptions.keys_only_indexes
                else usages[sources[figure]].write_units,
                2,
            ),
            "dynamodb_read_units": round(usages[sources[figure]].read_units, 2),
            # the changes put on the stack's bus, and the billed events they make, grouped
            "execution_status_changes": capacity.status_changes_put(usages[sources[figure]], assumptions),
            "execution_changes_per_event": round(
                capacity.changes_per_event(usages[sources[figure]], assumptions), 1
            ),
            "execution_events": round(capacity.events_per_execution(usages[sources[figure]], assumptions), 4),
            "api_requests": round(usages[sources[figure]].api_requests, 3),
            "worker_invocations": round(1 / assumptions.batch_fill, 3),
        }
        for figure in costs
    }
    prices = asdict(capacity.PRICES)
    inputs = {
        "measured": {
            "what": "each execution's DynamoDB request units (from item sizes, DynamoDB's rules), API "
            "requests, status changes and the bytes each adds to its execution event, log bytes and "
            "stored bytes, counted in this run on moto",
            "workloads": sources,
            "per_execution": {figure: asdict(usages[found]) for figure, found in sources.items()},
        },
        "documented": {
            **{
                row: {"prices": {f: prices[f] for f in fields}, "page": PRICE_PAGES[row]}
                for row, fields in _PRICE_FIELDS.items()
            },
            "eventbridge_event_bytes": {
                "value": capacity.EVENTBRIDGE_EVENT_BYTES,
                "what": "each 64 KB chunk of an event is billed as one event (read as 64,000 bytes)",
                "page": PRICE_PAGES["eventbridge_events"],
            },
        },
        "deployment_default": {
            "execution_events": DeploySettings.execution_events,
            "api_type": DeploySettings.api_type,
            "indexes_keys_only": assumptions.keys_only_indexes,
            "source": "infra/settings.py, punctual/platform/resources.py",
        },
        "assumed": {
            **asdict(assumptions),
            "sqs_requests_per_execution": "0.3: full batches of ten (a send, a receive, a delete)",
            "change_records_reads": "one a pack: the packs of a quiet instant start in environments "
            "of their own, none sharing its read (the benchmark's one process would share it)",
            "execution_changes_per_event": f"full stream batches of {assumptions.events_batch:g} "
            "records, each one owner's changes to one status: one event a batch, cut where the "
            "measured bytes of its changes' details and the entry's own "
            f"{capacity.EVENTS_ENTRY_OVERHEAD_BYTES} B would pass "
            f"{capacity.EVENTBRIDGE_EVENT_BYTES:,} B; each further owner or status in a batch is "
            "one event more",
            "eventbridge_scheduler_lambda": "one schedule invocation and one Lambda request an execution, "
            "the task's seconds at the worker's memory; its own writes of the outcome not counted",
        },
    }
    return {
        "per_million_usd": block,
        "per_million_usd_targets": targets,
        "per_million_usd_breakdown": breakdown,
        "per_million_usd_inputs": inputs,
    }
