"""Monitoring on the local stack, end to end over HTTP and through the CLI: a failing job found by
its outcome, told of with signed webhooks (retried after a 503) and paused after its failures; a
dead-lettered execution listed and redriven from the CLI, and run."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from punctual.platform import signing
from punctual.platform.timefmt import to_epoch_ms
from tests.e2e.conftest import ROOT, Call, Stack, Webhooks, eventually, executions, in_seconds, parse_time

pytestmark = pytest.mark.e2e

SECRET = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="


def cli(stack: Stack, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "punctual_cli", "--endpoint", stack.url, "--token", "alice-token", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_a_failing_job_is_found_told_of_signed_and_paused(stack: Stack, webhooks: Webhooks) -> None:
    # Given a job that fails, telling a receiver of failures (which answers 503 once), signing, and
    # to be paused after two failures in a row; and a job that succeeds, with the same rule
    hook = webhooks.script("/monitoring/failed", 503, 200)
    alice = stack.client()
    rule = {"on": ["failed"], "to": hook}
    failing = alice.create_job(
        {
            "name": "e2e-failing",
            "task": {"type": "fail"},
            "retry": {"max_attempts": 1},
            "schedule": {"type": "at", "at": in_seconds(3600)},
            "policy": {"pause_after_failures": 2},
            "notify": [rule],
            "signing_secret": SECRET,
        }
    )
    fine = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}, "notify": [rule]})
    # When it runs twice by hand
    first = alice.run_job(failing["id"])
    eventually(
        lambda: alice.get_job(failing["id"])["outcome"], timeout=15, what="the first failure", stack=stack
    )
    alice.run_job(failing["id"])
    # Then the filter finds it, through the API and through the CLI
    eventually(
        lambda: alice.get_job(failing["id"])["status"] == "PAUSED", timeout=15, what="the pause", stack=stack
    )
    found = alice.list_jobs(outcome="failed", name_prefix="e2e-")["items"]
    assert [job["id"] for job in found] == [failing["id"]]
    assert cli(stack, "-q", "jobs", "list", "--status", "FAILED", "--name-prefix", "e2e-").split() == [
        failing["id"]
    ]
    paused = alice.get_job(failing["id"])
    assert paused["outcome"]["consecutive_failures"] == 2
    assert "2 consecutive failed executions" in paused["pause_note"]

    # and the receiver was told of each failure, signed, the first after a retry of its 503, and
    # of nothing else (the succeeded job made no call)
    def told() -> list[Call] | None:
        found = webhooks.calls_to("/monitoring/failed")
        return found if len(found) >= 3 else None

    calls = eventually(told, timeout=20, what="the notifications", stack=stack)
    assert len(calls) == 3
    ids = [call.headers["webhook-id"] for call in calls]
    # (the 503's retry is the same message; the second failure is another)
    assert ids.count(ids[0]) == 2 and len(set(ids)) == 2
    for call in calls:
        assert call.body["type"] == "execution.failed"
        sent = datetime.fromtimestamp(int(call.headers["webhook-timestamp"]), UTC)
        assert signing.verify(SECRET, call.headers, call.raw, sent) == call.body["id"]
    assert {call.body["data"]["job"]["id"] for call in calls} == {failing["id"]}
    [second] = [call for call in calls if ids.count(call.headers["webhook-id"]) == 1]
    assert second.body["data"]["job"]["status"] == "PAUSED"  # told after the pause it caused
    # and the history says what became of the first one
    first_run = next(e for e in executions(alice, failing["id"]) if e["id"] == first["id"])
    [delivery] = first_run["notifications"]
    assert (delivery["status"], delivery["attempts"]) == ("delivered", 2)
    assert [e["notifications"] for e in executions(alice, fine["id"])] == [[]]


def test_a_dead_lettered_execution_is_redriven_from_the_cli_and_runs(stack: Stack) -> None:
    # Given an execution whose message reached the dead-letter queue (put there as SQS does once a
    # message has exhausted its receives)
    alice = stack.client()
    job = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "at", "at": in_seconds(3600)}})
    now = datetime.now(UTC)
    execution_id = f"{job['id']}.{to_epoch_ms(now):x}.rdead0001"
    body = {
        "job_id": job["id"],
        "execution_id": execution_id,
        "scheduled_ms": to_epoch_ms(now),
        "manual": True,
    }
    sqs = stack.aws("sqs")
    dlq = sqs.get_queue_url(QueueName="punctual-dead-letter")["QueueUrl"]
    sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({**body, "schedule_version": 1}))
    # When the dead-letter handler has recorded it, and its owner lists and redrives it with the CLI
    listed = eventually(
        lambda: cli(stack, "-q", "dead-letters", "list").split() or None,
        timeout=15,
        what="the dead letter",
        stack=stack,
    )
    assert execution_id in listed
    [failed] = [e for e in executions(alice, job["id"]) if e["id"] == execution_id]
    assert (failed["status"], failed["dead_lettered"]) == ("FAILED", True)
    assert cli(stack, "dead-letters", "redrive", execution_id).split() == [execution_id, "redriven"]
    # Then the same execution runs again, and succeeds
    ran = eventually(
        lambda: [
            e for e in executions(alice, job["id"]) if e["id"] == execution_id and e["status"] == "SUCCEEDED"
        ],
        timeout=15,
        what="the redriven run",
        stack=stack,
    )
    assert ran[0]["dead_lettered"] is False and parse_time(ran[0]["finished_at"]) > parse_time(
        failed["finished_at"]
    )
    assert execution_id not in cli(stack, "-q", "dead-letters", "list").split()
