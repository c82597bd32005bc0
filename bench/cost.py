"""Benchmark 3: AWS calls and cost per execution, counted from a real run on moto. Prints JSON.

Four workloads of webhook jobs (calling a receiver on loopback: nothing leaves the machine), each
in its own moto world driven minute by minute as AWS drives Punctual (tests/world.py):
- one-time jobs created one a request (POST /jobs) a few minutes ahead (filed as markers, picked up
  by the scanner);
- one-time jobs due within the hand-off window (enqueued by the API itself);
- one-time jobs created a hundred a request (POST /jobs/batch) a few minutes ahead;
- every-minute cron jobs, per occurrence once in their rhythm.
Each figure is the difference between a busy stretch and an idle one of the same length, so the
scanner's fixed cost per tick is left out (and reported on its own). Every AWS call is counted by
operation; DynamoDB request units are computed from the items' sizes by DynamoDB's rules (old and
new images read back from moto; punctual_testing/units.py), index writes included, for the indexes as deployed
(projection ALL) and as KEYS_ONLY. SQS ReceiveMessage is the event source mapping's polling, billed
per poll and left out (the emulation polls only when a message is visible; Lambda's long polls are
priced in `punctual capacity`). Dollars use the one price table, `punctual_cli.capacity`.

`per_million_usd` gives a million executions' cost as deployed by default (infra/settings.py: the HTTP
API, execution events "all"), in cents, beside its targets, its breakdown by service and its inputs
labelled measured, documented (with each price's page) or assumed.

    .venv/bin/python -m bench.cost                      # 50 + 50 + 100 one-time and 10 cron jobs
    .venv/bin/python -m bench.cost --scenarios handed_off,recurring --one-time 3 --cron 2 --minutes 1
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from bench import offline  # noqa: F401  (first: it sets up the environment)
from bench.common import WEBHOOK, emit, environment, logs_to
from infra.settings import DeploySettings
from punctual.platform import aws_limits as sizing
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_rfc3339
from punctual.store import keys
from punctual_cli import capacity
from punctual_cli.capacity.figures import Assumptions, ExecutionUsage, Prices
from punctual_testing.units import index_write_units, item_size, read_units, write_units
from tests.receiver import receiver
from tests.world import World, mocked_world

START = datetime(2026, 12, 1, 8, 59, 30, tzinfo=UTC)
# One-time jobs due this far ahead go through the scanner (the API hands off those due within
# lookahead + tick + 30 s = 180 s); the others are due within the hand-off window.
SCANNED_LEAD_SECONDS = 200
HANDED_OFF_LEAD_SECONDS = 20
POLLING = "sqs.ReceiveMessage"
TARGET_PER_MILLION = 2.00
# The owner of the jobs, as API Gateway's IAM authorization names a caller signing with a role's
# credentials (a service on Lambda or ECS): its assumed-role ARN. A job item stores it twice (its
# owner and its by_owner key), so its length decides whether an item crosses 1 KB, where every
# write of it costs two units.
CALLER = "arn:aws:sts::123456789012:assumed-role/punctual-client/orders-service"
# The stored overhead DynamoDB adds to every item (and index entry) for storage billing.
STORAGE_OVERHEAD_BYTES = 100


@dataclass
class Tally:
    """What a stretch of time cost."""

    calls: Counter[str] = field(default_factory=Counter)
    sqs_billed: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    write_units_keys_only: float = 0.0
    index_write_units_keys_only: float = 0.0  # of write_units_keys_only, the indexes'
    read_units: float = 0.0
    log_bytes: int = 0
    emf_bytes: int = 0
    worker_invocations: int = 0
    worker_messages: int = 0
    # Writes that changed an execution's status: each one an event on the stack's bus (as deployed)
    status_changes: int = 0

    def minus(self, other: Tally) -> Tally:
        return Tally(
            calls=self.calls - other.calls,
            sqs_billed=self.sqs_billed - other.sqs_billed,
            write_units=self.write_units - other.write_units,
            write_units_keys_only=self.write_units_keys_only - other.write_units_keys_only,
            index_write_units_keys_only=self.index_write_units_keys_only - other.index_write_units_keys_only,
            read_units=self.read_units - other.read_units,
            log_bytes=self.log_bytes - other.log_bytes,
            emf_bytes=self.emf_bytes - other.emf_bytes,
            worker_invocations=self.worker_invocations - other.worker_invocations,
            worker_messages=self.worker_messages - other.worker_messages,
            status_changes=self.status_changes - other.status_changes,
        )

    def per(self, count: int) -> dict[str, Any]:
        def each(value: float) -> float:
            return round(value / count, 3)

        return {
            "calls": {k: each(v) for k, v in sorted(self.calls.items()) if k != POLLING and v},
            "sqs_billed_requests": each(sum(self.sqs_billed.values())),
            "dynamodb_write_units": each(self.write_units),
            "dynamodb_write_units_if_indexes_keys_only": each(self.write_units_keys_only),
            "dynamodb_read_units": each(self.read_units),
            "log_bytes": each(self.log_bytes),
            "emf_metric_bytes": each(self.emf_bytes),
            "worker_invocations": each(self.worker_invocations),
            "execution_status_changes": each(self.status_changes),
        }


class _CountingStream(io.StringIO):
    """Counts the bytes written to it, and keeps none of them."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


class Meter:
    """Counts the world's AWS calls, their request units and its log bytes."""

    def __init__(self, world: World) -> None:
        self.tally = Tally()
        self._lock = threading.Lock()
        self._reader = boto3.client("dynamodb", region_name="us-east-1")  # not counted
        self._table_keys = (resources.TABLE.partition_key, resources.TABLE.sort_key)
        self._indexes = [i.key_attributes for i in resources.TABLE.indexes]
        self._logs = _CountingStream()
        self._emf = _CountingStream()
        for dynamodb in world.punctual.store.clients:
            dynamodb.meta.events.register("before-call.dynamodb", self._before_dynamodb)
            dynamodb.meta.events.register("after-call.dynamodb", self._after_dynamodb)
        world.sqs.meta.events.register("before-call.sqs", self._before_sqs)
        handler = world.work._handler

        def counted_handler(event: dict[str, Any], context: Any) -> Any:
            with self._lock:
                self.tally.worker_invocations += 1
                self.tally.worker_messages += len(event.get("Records", []))
            # On Lambda the worker has its own process: no keys another function's handler appended
            # to the shared logger (the API's and scanner's Lambda context) reach its lines.
            logger.clear_state()
            return handler(event, context)

        world.work._handler = counted_handler

    @contextmanager
    def logging(self) -> Iterator[None]:
        """Capture Punctual's logs at the deployed level (INFO) and the EMF metrics it prints."""
        level = logger.log_level
        logger.setLevel("INFO")
        try:
            with logs_to(self._logs), redirect_stdout(self._emf):
                yield
        finally:
            logger.setLevel(level)

    def snapshot(self) -> Tally:
        with self._lock:
            copy = replace(
                self.tally, calls=Counter(self.tally.calls), sqs_billed=Counter(self.tally.sqs_billed)
            )
        copy.log_bytes, copy.emf_bytes = self._logs.bytes, self._emf.bytes
        return copy

    def during(self, action: Callable[[], Any]) -> Tally:
        before = self.snapshot()
        action()
        return self.snapshot().minus(before)

    # ---------------------------------------------------------------- hooks
    def _read(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item = self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return None if item is None else dict(item)

    def _key(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self._table_keys}

    def _before_dynamodb(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        operation, body = model.name, json.loads(params["body"])
        with self._lock:
            self.tally.calls[f"dynamodb.{operation}"] += 1
        writes: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = []
        if operation == "PutItem":
            writes.append((body["TableName"], self._key(body["Item"]), body["Item"], "put"))
        elif operation in {"UpdateItem", "DeleteItem"}:
            writes.append((body["TableName"], body["Key"], None, operation))
        elif operation == "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for r in requests:
                    if "PutRequest" in r:
                        item = r["PutRequest"]["Item"]
                        writes.append((table, self._key(item), item, "put"))
                    else:
                        writes.append((table, r["DeleteRequest"]["Key"], None, "DeleteItem"))
        # The images before the write; the ones after are read back once it is done.
        context["bench_call"] = (
            operation,
            body,
            [(t, k, self._read(t, k), new, kind) for t, k, new, kind in writes],
        )

    def _after_dynamodb(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        operation, body, writes = context.pop("bench_call")
        failed = http_response.status_code >= 300
        write = write_keys_only = index_keys_only = changes = 0
        for table, key, old, new, kind in writes:
            if failed:  # a failed condition still costs the existing item's size (or one unit)
                write += write_units(item_size(old))
                write_keys_only += write_units(item_size(old))
                continue
            if kind == "UpdateItem":
                new = self._read(table, key)
            if keys.is_execution_sk(str(key["sk"].get("S", ""))) and new is not None:
                changes += (old or {}).get("status") != new.get("status")
            table_units = write_units(item_size(old), item_size(new))
            write += table_units + sum(
                index_write_units(old, new, ix, self._table_keys, keys_only=False) for ix in self._indexes
            )
            index_units = sum(
                index_write_units(old, new, ix, self._table_keys, keys_only=True) for ix in self._indexes
            )
            write_keys_only += table_units + index_units
            index_keys_only += index_units
        reads = 0.0 if failed else self._read_units(operation, body)
        with self._lock:
            self.tally.write_units += write
            self.tally.write_units_keys_only += write_keys_only
            self.tally.index_write_units_keys_only += index_keys_only
            self.tally.read_units += reads
            self.tally.status_changes += changes

    def _read_units(self, operation: str, body: dict[str, Any]) -> float:
        """Reads cost the whole items' sizes, whatever the projection: read them again, whole."""
        if operation == "GetItem":
            item = self._read(body["TableName"], body["Key"])
            return read_units(item_size(item), consistent=bool(body.get("ConsistentRead")))
        if operation == "BatchGetItem":
            return sum(
                read_units(item_size(self._read(table, key)), consistent=bool(spec.get("ConsistentRead")))
                for table, spec in body["RequestItems"].items()
                for key in spec["Keys"]
            )
        if operation == "Query":
            if "ProjectionExpression" in body:
                raise NotImplementedError("a projected Query: count its whole items before relying on this")
            items = self._reader.query(**body).get("Items", [])
            # A Query rounds up the total it read, not each item; an index is read eventually consistent.
            return read_units(sum(item_size(i) for i in items), consistent=bool(body.get("ConsistentRead")))
        return 0.0

    def _before_sqs(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        operation, body = model.name, json.loads(params["body"] or b"{}")
        billed = 1
        if operation == "SendMessageBatch":
            payload = sum(len(e["MessageBody"].encode()) for e in body["Entries"])
            billed = max(1, math.ceil(payload / sizing.SQS_BILLING_CHUNK_BYTES))
        with self._lock:
            self.tally.calls[f"sqs.{operation}"] += 1
            if operation != "ReceiveMessage":
                self.tally.sqs_billed[operation] += billed


# ------------------------------------------------------------------------------- workloads


@contextmanager
def _webhook() -> Iterator[dict[str, Any]]:
    """The representative webhook task, calling a receiver on loopback (nothing leaves the machine)."""
    with receiver() as hook:
        yield {"type": "http", "params": {**WEBHOOK["params"], "url": f"{hook.url}/punctual/reminders"}}


def _executions(world: World, job_ids: list[str]) -> list[dict[str, Any]]:
    return [e for job_id in job_ids for e in world.executions(job_id, owner=CALLER)]


def _create(world: World, body: dict[str, Any]) -> str:
    answer = world.api("POST", "/jobs", body, owner=CALLER)
    assert answer.status == 201, answer.body
    return str(answer.body["id"])


def one_time(jobs: int, minutes: int, *, lead_seconds: int, batch_size: int = 1) -> dict[str, Any]:
    """`jobs` one-time jobs due `lead_seconds` ahead and after, in groups of ten at the same second;
    created one a request (POST /jobs), or `batch_size` a request (POST /jobs/batch) when above 1."""
    clock = ManualClock(START)
    with _webhook() as task, mocked_world(clock) as world:
        meter = Meter(world)
        with meter.logging():
            world.run_for(90)  # to 09:01:00: the scanner's positions in their rhythm
            idle = meter.during(lambda: world.run_for(60 * minutes))
            now = clock.now()
            bodies = [
                {"task": task, "schedule": {"type": "at", "at": to_rfc3339(at)}}
                for at in (now + timedelta(seconds=lead_seconds + 10 * (i // 10)) for i in range(jobs))
            ]
            ids: list[str] = []
            requests = 0

            def create() -> None:
                nonlocal requests
                for start in range(0, jobs, batch_size):
                    requests += 1
                    if batch_size == 1:
                        ids.append(_create(world, bodies[start]))
                        continue
                    batch = {"jobs": bodies[start : start + batch_size]}
                    answer = world.api("POST", "/jobs/batch", batch, owner=CALLER)
                    assert answer.status == 201, answer.body
                    ids.extend(job["id"] for job in answer.body["items"])

            created = meter.during(create)
            busy = meter.during(lambda: world.run_for(60 * minutes))
        executions = _executions(world, ids)
        result = _result(
            world, idle, created, busy, jobs, executions, minutes, recurring=False, api_requests=requests
        )
        result["jobs_per_request"] = round(jobs / requests, 2)
        return result


def recurring(jobs: int, minutes: int) -> dict[str, Any]:
    """`jobs` every-minute cron jobs, measured per occurrence once they are in their rhythm."""
    clock = ManualClock(START)
    with _webhook() as task, mocked_world(clock) as world:
        meter = Meter(world)
        with meter.logging():
            world.run_for(90)  # the scanner's positions in their rhythm
            idle = meter.during(lambda: world.run_for(60 * minutes))
            cron = {"task": task, "schedule": {"type": "cron", "expression": "* * * * *"}}
            ids = [_create(world, cron) for _ in range(jobs)]
            world.run_for(120)  # into the rhythm: a marker filed ahead, an occurrence each minute
            before = len(_executions(world, ids))
            busy = meter.during(lambda: world.run_for(60 * minutes))
        executions = _executions(world, ids)
        occurrences = len(executions) - before
        return _result(world, idle, Tally(), busy, occurrences, executions, minutes, recurring=True)


def _result(
    world: World,
    idle: Tally,
    created: Tally,
    busy: Tally,
    count: int,
    executions: list[dict[str, Any]],
    minutes: int,
    *,
    recurring: bool,
    api_requests: int = 0,
) -> dict[str, Any]:
    statuses = Counter(e["status"] for e in executions)
    if count <= 0 or set(statuses) != {"SUCCEEDED"}:
        raise AssertionError(
            f"the workload did not run cleanly: {count} executions, statuses {dict(statuses)}"
        )
    run = busy.minus(idle)
    scan = world.dynamodb_client.get_paginator("scan").paginate(TableName=world.punctual.settings.table_name)
    items = [i for page in scan for i in page["Items"]]
    execution_bytes = _mean(item_size(i) for i in items if keys.is_execution_sk(i["sk"]["S"]))
    job_bytes = _mean(item_size(i) for i in items if i["sk"]["S"] == keys.JOB_SK)
    usage = _usage(
        created if not recurring else Tally(),
        run,
        count,
        execution_bytes,
        job_bytes,
        api_requests=api_requests,
        recurring=recurring,
    )
    return {
        "executions": count,
        "per_job_creation": None if recurring else created.per(count),
        "per_execution_scan_and_run": run.per(count),
        "worker_batch_fill": round(run.worker_messages / max(run.worker_invocations, 1), 2),
        "idle_per_minute": {k: round(v / minutes, 2) for k, v in sorted(idle.calls.items()) if k != POLLING},
        "execution_item_bytes": round(execution_bytes, 1),
        "job_item_bytes": round(job_bytes, 1),
        "usage_per_execution": {k: round(v, 3) for k, v in asdict(usage).items()},
    }


def _mean(values: Iterator[int] | list[int]) -> float:
    found = list(values)
    return sum(found) / len(found) if found else 0.0


def _usage(
    created: Tally,
    run: Tally,
    count: int,
    execution_bytes: float,
    job_bytes: float,
    *,
    api_requests: int,
    recurring: bool,
) -> ExecutionUsage:
    """One execution's use of each service, its job's creation included (one-time jobs)."""
    return ExecutionUsage(
        api_requests=0.0 if recurring else api_requests / count,
        write_units=(created.write_units + run.write_units) / count,
        read_units=(created.read_units + run.read_units) / count,
        write_units_keys_only=(created.write_units_keys_only + run.write_units_keys_only) / count,
        index_write_units_keys_only=(created.index_write_units_keys_only + run.index_write_units_keys_only)
        / count,
        # Under load every batch is full: a send per ten executions, and a receive and a delete per
        # worker batch of ten. (The run's own batches are reported beside.)
        sqs_requests=3 / sizing.SQS_BATCH,
        log_bytes=(created.log_bytes + created.emf_bytes + run.log_bytes + run.emf_bytes) / count,
        metric_bytes=(created.emf_bytes + run.emf_bytes) / count,
        item_bytes=execution_bytes + STORAGE_OVERHEAD_BYTES,
        job_bytes=0.0 if recurring else job_bytes + STORAGE_OVERHEAD_BYTES,
        status_changes=(created.status_changes + run.status_changes) / count,
    )


# ----------------------------------------------------------------------------------- dollars


# The two rows `target` reports, by id (their labels say what they combine).
ALL_SAVINGS = "all_savings"
ALL_SAVINGS_RESERVED = "all_savings_reserved"


def levers(
    usage: ExecutionUsage,
    assumptions: Assumptions,
    batched: ExecutionUsage | None,
    batch_size: int = capacity.BATCH_JOBS,
) -> list[dict[str, Any]]:
    """What each change would make a million one-time executions cost, alone and together.

    The batch-create row is the measured `batched` workload (POST /jobs/batch, `batch_size` jobs a
    request), when it ran; the rows together include it only then."""
    prices = capacity.PRICES
    provisioned = capacity.provisioned_prices(0.7, prices)
    reserved = capacity.provisioned_prices(0.7, capacity.reserved_prices(prices))
    batched_assumptions = replace(assumptions, api_seconds=capacity.batch_api_seconds(batch_size))
    quiet = replace(usage, log_bytes=usage.metric_bytes)

    def total(u: ExecutionUsage, a: Assumptions, p: Prices = prices) -> float:
        return capacity.per_million(capacity.cost_per_execution(u, a, p))["total"]

    rows: list[tuple[str, ExecutionUsage, Assumptions, Prices]] = [
        ("as deployed: HTTP API, indexes projecting KEYS_ONLY, on-demand", usage, assumptions, prices),
        (
            "REST API instead (-c api_type=rest, $3.50/M requests)",
            usage,
            replace(assumptions, http_api=False),
            prices,
        ),
    ]
    if batched is not None:
        rows.append(
            (
                f"batch-create endpoint, {batch_size} jobs a request (measured)",
                batched,
                batched_assumptions,
                prices,
            )
        )
    rows += [
        ("provisioned capacity at 70 % utilisation (steady load)", usage, assumptions, provisioned),
        (
            "provisioned at 70 %, bought as one-year reserved capacity (a commitment)",
            usage,
            assumptions,
            reserved,
        ),
        ("log level WARNING: no INFO lines per execution (EMF metrics kept)", quiet, assumptions, prices),
        (
            "history kept 7 days instead of 30 (-c retention_days=7): storage",
            usage,
            replace(assumptions, retention_days=7),
            prices,
        ),
        (
            "X-Ray tracing off on the API and worker functions",
            usage,
            replace(assumptions, xray_sampled=0.0),
            prices,
        ),
        (
            "execution events only at the end (-c execution_events=final)",
            usage,
            replace(assumptions, execution_events="final"),
            prices,
        ),
        (
            "no execution events on the stack's bus (-c execution_events=off)",
            usage,
            replace(assumptions, execution_events="off"),
            prices,
        ),
    ]
    best, best_assumptions = (batched, batched_assumptions) if batched is not None else (usage, assumptions)
    cheapest = replace(best, log_bytes=best.metric_bytes)
    cheapest_assumptions = replace(
        best_assumptions, http_api=True, keys_only_indexes=True, xray_sampled=0.0, execution_events="off"
    )
    together = ", ".join(
        [
            *(["batch create"] if batched is not None else []),
            "provisioned capacity",
            "WARNING logs",
            "no X-Ray",
            "no execution events",
        ]
    )
    found = [{"change": name, "per_million": total(u, a, p)} for name, u, a, p in rows]
    found += [
        {
            "id": ALL_SAVINGS,
            "change": f"together: {together} (capacity not reserved; 30 days kept)",
            "per_million": total(cheapest, cheapest_assumptions, provisioned),
        },
        {
            "id": ALL_SAVINGS_RESERVED,
            "change": f"together: {together}, the capacity reserved for a year",
            "per_million": total(cheapest, cheapest_assumptions, reserved),
        },
    ]
    return found


# ------------------------------------------------------------------ per million, as deployed

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
            "execution_events": capacity.events_per_execution(usages[sources[figure]], assumptions),
            "api_requests": round(usages[sources[figure]].api_requests, 3),
            "worker_invocations": round(1 / assumptions.batch_fill, 3),
        }
        for figure in costs
    }
    prices = asdict(capacity.PRICES)
    inputs = {
        "measured": {
            "what": "each execution's DynamoDB request units (from item sizes, DynamoDB's rules), API "
            "requests, status changes, log bytes and stored bytes, counted in this run on moto",
            "workloads": sources,
            "per_execution": {figure: asdict(usages[found]) for figure, found in sources.items()},
        },
        "documented": {
            row: {"prices": {f: prices[f] for f in fields}, "page": PRICE_PAGES[row]}
            for row, fields in _PRICE_FIELDS.items()
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


SCENARIOS = ("one_time", "handed_off", "batched", "recurring")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with logs_to(sys.stderr), warnings.catch_warnings():
        # Handlers flush their (sometimes empty) EMF metrics each invocation, as on Lambda.
        warnings.filterwarnings("ignore", "No application metrics to publish")
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    assumptions = deployed_assumptions(args.task_seconds)
    workloads: dict[str, Callable[[], dict[str, Any]]] = {
        "one_time": lambda: one_time(args.one_time, args.minutes, lead_seconds=SCANNED_LEAD_SECONDS),
        "handed_off": lambda: one_time(args.one_time, args.minutes, lead_seconds=HANDED_OFF_LEAD_SECONDS),
        "batched": lambda: one_time(
            args.batch_jobs, args.minutes, lead_seconds=args.batch_lead_seconds, batch_size=args.batch_size
        ),
        "recurring": lambda: recurring(args.cron, args.minutes),
    }
    scenarios = {name: workloads[name]() for name in args.scenarios}
    usages = {name: ExecutionUsage(**s["usage_per_execution"]) for name, s in scenarios.items()}
    # The jobs a batch request carried, as measured (fewer than --batch-size with fewer --batch-jobs)
    batch_size = (
        round(scenarios["batched"]["jobs_per_request"]) if "batched" in scenarios else args.batch_size
    )
    # A batch request runs longer than a single create (assumed: capacity.batch_api_seconds).
    per_scenario = {
        name: replace(assumptions, api_seconds=capacity.batch_api_seconds(batch_size))
        if name == "batched"
        else assumptions
        for name in usages
    }
    costs = {
        name: {
            "rest_api": capacity.per_million(
                capacity.cost_per_execution(u, replace(per_scenario[name], http_api=False))
            ),
            "http_api": capacity.per_million(
                capacity.cost_per_execution(u, replace(per_scenario[name], http_api=True))
            ),
        }
        for name, u in usages.items()
    }
    one_time_usage = usages.get("one_time") or usages.get("handed_off")
    result: dict[str, Any] = {
        "benchmark": "cost",
        "command": "python -m bench.cost " + " ".join(sys.argv[1:]),
        "environment": environment(),
        "workload": {
            "one_time_jobs": args.one_time,
            "batched_jobs": args.batch_jobs,
            "batch_size": args.batch_size,
            "batched_lead_seconds": args.batch_lead_seconds,
            "cron_jobs": args.cron,
            "minutes_measured": args.minutes,
            "task": "http webhook (POST, a header, a JSON body) to a receiver on loopback",
        },
        **per_million_usd(usages, assumptions, batch_size),
        "measured": scenarios,
        "prices": {**asdict(capacity.PRICES), "as_of": "AWS us-east-1 list prices published in 2025"},
        "assumptions": asdict(assumptions),
        "assumed_api_seconds_per_batch_request": capacity.batch_api_seconds(batch_size),
        "cost_per_million_executions": costs,
        "fixed_monthly": {
            k: round(v, 2)
            for k, v in capacity.fixed_monthly(
                fanout=DeploySettings.scanner_fanout, shard_count=DeploySettings.shard_count
            ).items()
        },
        "eventbridge_scheduler_per_million": capacity.eventbridge_scheduler_per_million(assumptions),
    }
    found = []
    if one_time_usage is not None:
        found = levers(one_time_usage, assumptions, usages.get("batched"), batch_size)
        result["levers_one_time_per_million"] = found
    if one_time_usage is not None or "batched" in usages:
        result["target"] = _target(costs, {row["id"]: row["per_million"] for row in found if "id" in row})
    return result


def _target(costs: dict[str, dict[str, dict[str, float]]], levers: dict[str, float]) -> dict[str, Any]:
    """The one-time cost against the target: `met` as deployed (on-demand), one job a request and, if
    measured, a batch a request; then with all the savings (`levers`), provisioned and reserved."""
    single = costs.get("one_time") or costs.get("handed_off")
    rows = {
        # as deployed (an HTTP API), then with the REST API (-c api_type=rest)
        "one_time_per_million": None if single is None else single["http_api"]["total"],
        "one_time_per_million_rest_api": None if single is None else single["rest_api"]["total"],
        "batched_per_million": costs["batched"]["http_api"]["total"] if "batched" in costs else None,
        "batched_per_million_rest_api": costs["batched"]["rest_api"]["total"] if "batched" in costs else None,
    }
    best = min(v for v in rows.values() if v is not None)
    found: dict[str, Any] = {
        "one_time_per_million_at_most": TARGET_PER_MILLION,
        **rows,
        "met": best <= TARGET_PER_MILLION,
        "missed_by": round(max(0.0, best - TARGET_PER_MILLION), 4),
    }
    for key in (ALL_SAVINGS, ALL_SAVINGS_RESERVED):
        if key in levers:
            found[f"{key}_per_million"] = levers[key]
            found[f"met_with_{key}"] = levers[key] <= TARGET_PER_MILLION
    return found


def _within(text: str, low: int, high: int, flag: str) -> int:
    value = int(text)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{flag} is between {low} and {high}, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__.split("\n")[0])
    p.add_argument("--one-time", type=int, default=50, help="one-time jobs in each one-time workload")
    p.add_argument("--batch-jobs", type=int, default=100, help="one-time jobs in the batched workload")
    p.add_argument(
        "--batch-size",
        type=lambda text: _within(text, 2, 100, "--batch-size"),
        default=capacity.BATCH_JOBS,
        help="jobs a POST /jobs/batch request (2-100)",
    )
    p.add_argument(
        "--batch-lead-seconds",
        type=int,
        default=SCANNED_LEAD_SECONDS,
        help=f"batched jobs are due this far ahead (default {SCANNED_LEAD_SECONDS}: through the scanner)",
    )
    p.add_argument("--cron", type=int, default=10, help="every-minute cron jobs")
    p.add_argument("--minutes", type=int, default=5, help="length of each measured stretch")
    p.add_argument(
        "--scenarios",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=list(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default: all)",
    )
    p.add_argument(
        "--task-seconds", type=float, default=Assumptions().task_seconds, help="assumed task duration"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    emit(run(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
