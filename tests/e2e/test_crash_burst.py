"""A local stack killed outright as a burst's executions start runs each of them at least once and
records its end: those sent alone, and those taken in packs under their leases."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import (
    Stack,
    Stacks,
    Webhooks,
    eventually,
    in_seconds,
    wait_for_executions,
    wait_for_job_status,
)
from tests.e2e.test_crash import Expected, Ledger, all_ran, check, webhook_job

pytestmark = [pytest.mark.e2e, pytest.mark.long]


BURST_JOBS = 40


def leased_packs(stack: Stack) -> int:
    """The packs' leases in the stack's table."""
    dynamodb = stack.aws("dynamodb")
    [table] = dynamodb.list_tables()["TableNames"]
    found = dynamodb.scan(
        TableName=table,
        FilterExpression="begins_with(pk, :pack)",
        ExpressionAttributeValues={":pack": {"S": "PACK#"}},
    )
    return len(found["Items"])


@pytest.mark.parametrize("together", [False, True], ids=["created one by one", "created in one request"])
def test_sigkill_as_a_bursts_executions_start_runs_each_at_least_once_and_records_its_end(
    stacks: Stacks, webhooks: Webhooks, together: bool
) -> None:
    ledger = Ledger()
    stack = stacks.start(own_group=True, timeout=60)
    client = stack.client()
    # Given a burst of one-time jobs due at one instant, each sent alone (a pack of one), or (created
    # in one request) sent in packs, each taken under its lease ahead of it
    instant = in_seconds(15)
    burst = [webhook_job(webhooks, at=instant) for _ in range(BURST_JOBS)]
    jobs = [job for job, _ in burst]
    created = client.create_jobs(jobs) if together else [client.create_job(job) for job in jobs]
    for made, (job, path) in zip(created, burst, strict=True):
        ledger.jobs[made["id"]] = Expected(path, {str(job["name"])}, must_run=True)
    paths = [e.path for e in ledger.jobs.values()]
    # When the stack is killed once half of them have called their webhook: the others are between
    # their instant and their start, and those that ran still wait to write their outcome (starts
    # first) or are writing it
    eventually(
        lambda: sum(1 for path in paths if webhooks.calls_to(path)) >= BURST_JOBS // 2,
        timeout=40,
        interval=0.005,
        what="half the burst's calls",
        stack=stack,
    )
    stack.kill_group()
    started_before_kill = sum(1 for path in paths if webhooks.calls_to(path))
    stack = stacks.start(own_group=True, timeout=60)
    # Then every one of them runs at least once, and each ends SUCCEEDED, its job COMPLETED
    check(stack, ledger)
    calls = all_ran(stack, ledger, webhooks)
    for job_id in ledger.jobs:
        [execution] = wait_for_executions(stack, job_id, timeout=60)
        assert execution["status"] == "SUCCEEDED", execution
        wait_for_job_status(stack.client(), job_id, "COMPLETED", stack, timeout=30)
    # (taken under their packs' leases: nothing of them was claimed)
    assert leased_packs(stack) > 0
    print(
        f"burst of {BURST_JOBS}: {started_before_kill} had called before the kill; all ran, "
        f"{sum(calls.values()) - len(calls)} twice"
    )
