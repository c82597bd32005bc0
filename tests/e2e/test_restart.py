"""Stopping the local stack: Ctrl-C is quick, and a restart loses nothing."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import pytest

from punctual_local import STOP_LIMIT_SECONDS
from tests.e2e.conftest import (
    Stacks,
    eventually,
    executions,
    in_seconds,
    parse_time,
    wait_for_executions,
    wait_for_job_status,
)

pytestmark = [pytest.mark.e2e, pytest.mark.long]

QUICK_EXIT_SECONDS = 5.0


def test_a_restart_keeps_jobs_and_history_and_runs_queued_executions_late(stacks: Stacks) -> None:
    # Given a stack with a finished job, and a job queued for 8 s ahead (its message released to a
    # worker, which claims it and waits for its instant, when the stack stops)
    first = stacks.start()
    alice = first.client()
    done = alice.create_job({"name": "done", "task": {"type": "noop"}, "schedule": {"type": "now"}})
    [finished] = wait_for_executions(first, done["id"])
    queued = alice.create_job(
        {"name": "queued", "task": {"type": "noop"}, "schedule": {"type": "at", "at": in_seconds(8)}}
    )
    # (not stored until a worker claims it, as on AWS: its message, journaled, says it is coming;
    # QUEUED once a worker has claimed it ahead of its instant)
    waiting = executions(alice, queued["id"])
    assert all(w["status"] in ("QUEUED", "RUNNING") and w.get("started_at") is None for w in waiting)
    assert len(waiting) <= 1

    # When the stack is stopped with Ctrl-C before that time, and started again after it
    assert first.interrupt() < QUICK_EXIT_SECONDS
    assert first.process is not None and first.process.returncode == 0, first.log()
    time.sleep(max(0.0, (parse_time(queued["next_run_at"]) - parse_time(in_seconds(0))).total_seconds()) + 1)
    second = stacks.start()
    alice = second.client()

    # Then the jobs and the history are there
    assert alice.get_job(done["id"])["status"] == "COMPLETED"
    assert executions(alice, done["id"]) == [finished]
    # And the queued execution ran after the restart, late, with its lateness recorded
    [late] = wait_for_executions(second, queued["id"])
    assert late["status"] == "SUCCEEDED"
    assert late["lateness_ms"] >= 1000
    assert parse_time(late["started_at"]) > parse_time(late["scheduled_at"])
    wait_for_job_status(alice, queued["id"], "COMPLETED", second)
    assert second.interrupt() < QUICK_EXIT_SECONDS


# A job due in an hour whose task takes a minute. A run by hand goes the claim path, which stores the
# execution RUNNING with its attempt; a scheduled first run under its pack's lease is stored only at its
# end (tests/e2e/test_crash.py kills a stack under those).
LONG_TASK = {
    "task": {"type": "sleep", "params": {"seconds": 60}},
    "schedule": {"type": "in", "seconds": 3600},
    "timeout_seconds": 90,
}


def test_ctrl_c_stops_quickly_during_a_long_task_which_runs_again_after_a_restart(stacks: Stacks) -> None:
    # Given a stack running a task that takes a minute, run by hand (its claim stores each attempt)
    first = stacks.start()
    alice = first.client()
    job = alice.create_job(LONG_TASK)
    alice.run_job(job["id"])

    def running(attempt: int) -> dict[str, Any] | None:
        found = executions(alice, job["id"])
        if found and found[0]["status"] == "RUNNING" and found[0]["attempts"] == attempt:
            return found[0]
        return None

    eventually(lambda: running(1), timeout=10, what="the task to start", stack=first)
    # When Ctrl-C is pressed, Then the stack exits within a few seconds, not a minute
    assert first.interrupt() < QUICK_EXIT_SECONDS, first.log()
    # And after a restart the interrupted execution is attempted again at once (its worker is gone)
    second = stacks.start()
    alice = second.client()
    eventually(lambda: running(2), timeout=10, what="the second attempt", stack=second)
    assert second.interrupt() < QUICK_EXIT_SECONDS, second.log()


# The stack as `punctual local` runs it, except that its start stays unfinished after the banner: the
# API and the pollers already run (they start just before it), and a Ctrl-C lands inside the start.
SLOW_TO_FINISH_STARTING = """
import sys, time
from punctual_local import stack
banner = stack.LocalStack.banner
def banner_then_wait(self, *args):
    banner(self, *args)
    time.sleep(120)
stack.LocalStack.banner = banner_then_wait
from punctual_cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_stack_is_still_starting_and_a_task_already_runs_stops_quickly(
    stacks: Stacks,
) -> None:
    # Given a stack whose API and workers run while its start has not returned yet
    stack = stacks.start(launcher=[sys.executable, "-c", SLOW_TO_FINISH_STARTING])
    alice = stack.client()
    # And a task of a minute running in a worker (its thread would hold a normal interpreter exit),
    # run by hand (its claim stores each attempt)
    job = alice.create_job(LONG_TASK)
    alice.run_job(job["id"])
    eventually(
        lambda: [e for e in executions(alice, job["id"]) if e["status"] == "RUNNING"],
        timeout=10,
        what="the task to start",
        stack=stack,
    )
    # When Ctrl-C is pressed, Then the stack exits within a few seconds, as interrupted
    assert stack.interrupt() < QUICK_EXIT_SECONDS, stack.log()
    assert stack.process is not None and stack.process.returncode == 130, stack.log()
    # And the execution is attempted again after a restart
    second = stacks.start()
    eventually(
        lambda: [e for e in executions(second.client(), job["id"]) if e["attempts"] == 2],
        timeout=10,
        what="the second attempt",
        stack=second,
    )
    assert second.interrupt() < QUICK_EXIT_SECONDS, second.log()


# The watchdog reads the limit when it starts waiting: a stack whose limit is shorter than the
# shipped one shows the same mechanism without waiting the shipped limit out (it is idle time).
SHORT_STOP_LIMIT_SECONDS = 3.0
assert SHORT_STOP_LIMIT_SECONDS < STOP_LIMIT_SECONDS
STUCK_WHILE_STOPPING = f"""
import sys, time
import punctual_local
from punctual_local import stack
punctual_local.STOP_LIMIT_SECONDS = {SHORT_STOP_LIMIT_SECONDS}
stack.LocalStack.stop = lambda self: time.sleep(120)
from punctual_cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_stack_whose_stop_hangs_still_exits_within_the_stop_limit(stacks: Stacks) -> None:
    # Given a stack whose stop never finishes (a handler or moto that will not let go)
    stack = stacks.start(launcher=[sys.executable, "-c", STUCK_WHILE_STOPPING])
    # When Ctrl-C is pressed, Then it leaves once the stop limit has passed, and says why
    took = stack.interrupt(timeout=SHORT_STOP_LIMIT_SECONDS + 5)
    assert SHORT_STOP_LIMIT_SECONDS <= took < SHORT_STOP_LIMIT_SECONDS + 3, stack.log()
    assert f"still stopping after {SHORT_STOP_LIMIT_SECONDS:.0f} s" in stack.log(), stack.log()


def children_of(pid: int) -> list[int]:
    try:
        return [int(child) for child in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        pytest.skip("needs Linux's /proc")


def command_line(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    except OSError:
        return ""


def module_of(pid: int) -> str:
    """The module a `python -m <module> ...` process runs."""
    return command_line(pid).split()[2]


def exited(pid: int) -> bool:
    try:  # a zombie (state Z) has exited and waits to be reaped
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_a_killed_stack_leaves_no_moto_or_api_process_behind(stacks: Stacks) -> None:
    # Given a stack, whose moto server and API run in child processes
    first = stacks.start()
    assert first.process is not None
    children = children_of(first.process.pid)
    assert sorted(module_of(child) for child in children) == [
        "punctual_local.api_process",
        "punctual_local.moto.process",
    ]

    # When the stack is killed outright
    first.kill()

    # Then both exit too, and a new stack starts on the same data directory and the same port
    for child in children:
        eventually(lambda child=child: exited(child), timeout=10, what=f"{command_line(child)} to exit")
    second = stacks.start(port=first.port)
    assert second.client().health()


def test_a_stack_whose_api_process_dies_stops_with_an_error(stacks: Stacks) -> None:
    # Given a stack
    stack = stacks.start()
    assert stack.process is not None
    [api] = [c for c in children_of(stack.process.pid) if module_of(c) == "punctual_local.api_process"]

    # When its API's process dies
    os.kill(api, signal.SIGKILL)

    # Then the stack stops by itself, saying why, with a failing exit status
    assert stack.process.wait(STOP_LIMIT_SECONDS + 5) == 1
    assert "the API's process stopped unexpectedly" in stack.log(), stack.log()
