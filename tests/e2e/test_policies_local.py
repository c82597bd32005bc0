"""Job policies on the local stack, end to end: a catch-up window across a restart (on stacks of its
own), overlap `skip` with a slow task (on the shared stack: it needs no restart)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import (
    Stack,
    Stacks,
    eventually,
    executions,
    in_seconds,
    parse_time,
    wait_for_executions,
    wait_for_job_status,
)

pytestmark = pytest.mark.e2e


def test_a_restart_past_the_catch_up_window_skips_the_missed_run(stacks: Stacks) -> None:
    # Given two jobs due in 6 s, one that may start at most 1 s late
    first = stacks.start()
    alice = first.client()
    due = in_seconds(6)
    strict = alice.create_job(
        {
            "task": {"type": "noop"},
            "schedule": {"type": "at", "at": due},
            "policy": {"max_lateness_seconds": 1},
        }
    )
    lenient = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "at", "at": due}})
    # When the stack is down from before that instant until well past the window
    first.interrupt()
    time.sleep(max(0.0, (parse_time(due) - parse_time(in_seconds(0))).total_seconds()) + 3)
    second = stacks.start()
    alice = second.client()
    # Then the strict job's run is SKIPPED with its reason, the other runs late
    [skipped] = wait_for_executions(second, strict["id"])
    assert skipped["status"] == "SKIPPED", skipped
    assert "max_lateness_seconds (1)" in skipped["error"]
    wait_for_job_status(alice, strict["id"], "COMPLETED", second)
    [late] = wait_for_executions(second, lenient["id"])
    assert late["status"] == "SUCCEEDED"
    assert late["lateness_ms"] > 1000


def test_overlap_skip_with_a_slow_task(stack: Stack) -> None:
    # Given a recurring job that must not overlap itself, whose task takes 8 s, first due in 4 s
    alice = stack.client()
    job = alice.create_job(
        {
            "task": {"type": "sleep", "params": {"seconds": 8}},
            "timeout_seconds": 30,
            "schedule": {"type": "rate", "every_seconds": 3600, "start_at": in_seconds(4)},
            "policy": {"overlap": "skip"},
        }
    )
    # When a run started by hand is still going at that time
    manual = alice.run_job(job["id"])

    def skipped() -> list[dict] | None:
        return [e for e in executions(alice, job["id"]) if e["status"] == "SKIPPED"] or None

    [skip] = eventually(skipped, timeout=20, what="the scheduled run skipped", stack=stack)
    # Then the scheduled run is SKIPPED, naming the run under way, which goes on to succeed
    assert "overlap: skip" in skip["error"] and manual["id"] in skip["error"]
    finished = wait_for_executions(stack, job["id"], count=2, timeout=20)
    by_id = {e["id"]: e for e in finished}
    assert by_id[manual["id"]]["status"] == "SUCCEEDED"
    assert parse_time(by_id[manual["id"]]["finished_at"]) > parse_time(skip["scheduled_at"])
    alice.cancel_job(job["id"])  # (its next run, an hour on, is no business of the stack's other tests)
