"""The workloads, each in its own moto world driven minute by minute: one-time jobs (scanned,
handed off, batched) and every-minute cron jobs; each figure a busy stretch minus an idle one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from bench.common import WEBHOOK
from bench.cost.meter import CALLER, POLLING, STORAGE_OVERHEAD_BYTES, Meter, Tally
from punctual.execution.firing import InstantChanges
from punctual.platform import aws_limits as sizing
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.store import keys
from punctual_cli.capacity.figures import ExecutionUsage
from punctual_testing.units import item_size
from tests.receiver import receiver
from tests.world import World, mocked_world

START = datetime(2026, 12, 1, 8, 59, 30, tzinfo=UTC)
# One-time jobs due this far ahead go through the scanner (the API hands off those due within
# lookahead + tick + 30 s = 180 s); the others are due within the hand-off window.
SCANNED_LEAD_SECONDS = 200
HANDED_OFF_LEAD_SECONDS = 20


@contextmanager
def _packs_apart() -> Iterator[None]:
    """Each pack reads its instant's change records itself. In this one process the packs of an
    instant would share that read (InstantChanges); on AWS a quiet instant's packs start side by side
    in environments of their own, each reading its own: what is priced."""
    with mock.patch.object(InstantChanges, "changed", lambda changes, instant: changes.read(instant)):
        yield


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
    with _packs_apart(), _webhook() as task, mocked_world(clock) as world:
        with Meter(world) as meter, meter.logging():
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
    with _packs_apart(), _webhook() as task, mocked_world(clock) as world:
        with Meter(world) as meter, meter.logging():
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
    execution_items = [item_size(i) for i in items if keys.is_execution_sk(i["sk"]["S"])]
    execution_bytes = _mean(execution_items)
    job_bytes = _mean(item_size(i) for i in items if i["sk"]["S"] == keys.JOB_SK)
    # An execution's item as stored (with DynamoDB's overhead), shared by all the executions: a
    # one-time job's run stored on its job's item has none; a batch's runs' ends item, shared by them.
    ends_items = [item_size(i) for i in items if i["pk"]["S"].startswith(keys.ENDS_PK_PREFIX)]
    stored_bytes = sum(size + STORAGE_OVERHEAD_BYTES for size in execution_items + ends_items) / max(
        1, len(executions)
    )
    usage = _usage(
        created if not recurring else Tally(),
        run,
        count,
        stored_bytes,
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
    stored_bytes: float,
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
        item_bytes=stored_bytes,
        job_bytes=0.0 if recurring else job_bytes + STORAGE_OVERHEAD_BYTES,
        status_changes=(created.status_changes + run.status_changes) / count,
        event_detail_bytes=(created.event_detail_bytes + run.event_detail_bytes)
        / max(1, created.event_details + run.event_details),
    )
