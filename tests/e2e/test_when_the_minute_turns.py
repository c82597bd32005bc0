"""Jobs whose time comes later: created when the session's stack starts, checked last.

(This module's name sorts after the others so that their tests pass the time.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual_client.transport import PunctualClient
from tests.e2e.conftest import (
    FINAL,
    HANDOFF_SECONDS,
    Stack,
    assert_on_time,
    eventually,
    parse_time,
    wait_for_executions,
)

pytestmark = pytest.mark.e2e


def test_a_cron_job_runs_when_the_minute_turns(
    stack: Stack, alice: PunctualClient, early_jobs: dict[str, dict[str, Any]]
) -> None:
    # Given a job for every minute
    job = early_jobs["cron"]
    preview = alice.preview(job["schedule"], count=2)["next_runs"]
    assert [parse_time(run).second for run in preview] == [0, 0]
    # When the next minute boundary has passed
    found = wait_for_executions(stack, job["id"], timeout=75)
    # (the newest to have ended: the next minute's may already be listed, enqueued ahead of its instant)
    execution = next(e for e in found if e["status"] in FINAL)
    # Then it ran at the boundary, on time, and the job stays active for the following minutes
    assert execution["status"] == "SUCCEEDED"
    assert parse_time(execution["scheduled_at"]).second == 0
    assert_on_time(execution)
    again = alice.get_job(job["id"])
    assert again["status"] == "ACTIVE"
    assert parse_time(again["next_run_at"]) - parse_time(execution["scheduled_at"]) >= timedelta(seconds=60)
    alice.cancel_job(job["id"])
    assert eventually(lambda: alice.get_job(job["id"])["status"] == "CANCELLED", timeout=5)


def test_a_job_beyond_the_hand_off_window_is_enqueued_by_a_scanner_tick(
    stack: Stack, alice: PunctualClient, early_jobs: dict[str, dict[str, Any]]
) -> None:
    # Given a job created for later than the API hands to the queue itself
    job = early_jobs["scanned"]
    assert parse_time(job["next_run_at"]) - parse_time(job["created_at"]) > timedelta(seconds=HANDOFF_SECONDS)
    # When its time comes, Then a tick has enqueued it and it ran on time
    [execution] = wait_for_executions(stack, job["id"], timeout=HANDOFF_SECONDS + 20)
    assert execution["status"] == "SUCCEEDED"
    assert_on_time(execution)
