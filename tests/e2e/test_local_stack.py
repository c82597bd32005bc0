"""The local stack end to end: jobs of every schedule run, retries, cancel, pause, owners, auth."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import timedelta

import boto3
import pytest

from punctual_client.transport import PunctualClient
from tests.e2e.conftest import (
    Stack,
    Webhooks,
    api_error,
    assert_on_time,
    eventually,
    executions,
    in_seconds,
    parse_time,
    wait_for_executions,
    wait_for_job_status,
)
from tests.lambdas import create_echo_function

pytestmark = pytest.mark.e2e


def test_a_job_for_now_runs_at_once_and_completes(stack: Stack, alice: PunctualClient) -> None:
    # Given a job to run now
    job = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}})
    # When the stack runs it
    [execution] = wait_for_executions(stack, job["id"])
    # Then it succeeded on time and the one-time job is complete
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1
    assert_on_time(execution)
    wait_for_job_status(alice, job["id"], "COMPLETED", stack)


def test_a_job_at_an_instant_runs_within_two_seconds_of_it(stack: Stack, alice: PunctualClient) -> None:
    # Given a job for 3 s from now
    job = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "at", "at": in_seconds(3)}})
    # When its time comes
    [execution] = wait_for_executions(stack, job["id"], timeout=15)
    # Then it ran at that instant, not before and at most 2 s after
    assert execution["status"] == "SUCCEEDED"
    assert execution["scheduled_at"] == job["next_run_at"]
    assert_on_time(execution)


def test_a_rate_job_runs_from_its_start_and_schedules_the_next_run(
    stack: Stack, alice: PunctualClient
) -> None:
    # Given a job every minute from 2 s from now
    job = alice.create_job(
        {
            "task": {"type": "noop"},
            "schedule": {"type": "rate", "every_seconds": 60, "start_at": in_seconds(2)},
        }
    )
    # When its first run comes
    [execution] = wait_for_executions(stack, job["id"])
    # Then it ran on time, and the next run is one period later
    assert execution["status"] == "SUCCEEDED"
    assert_on_time(execution)
    again = alice.get_job(job["id"])
    assert again["status"] == "ACTIVE"
    assert parse_time(again["next_run_at"]) - parse_time(execution["scheduled_at"]) == timedelta(seconds=60)
    alice.cancel_job(job["id"])


def test_a_webhook_failing_twice_succeeds_on_the_third_attempt(
    stack: Stack, alice: PunctualClient, webhooks: Webhooks
) -> None:
    # Given a webhook that answers 500 twice, then 200
    url = webhooks.script("/flaky", 500, 500, 200)
    job = alice.create_job(
        {
            "task": {"type": "http", "params": {"url": url, "body": {"hello": "world"}}},
            "schedule": {"type": "now"},
            "retry": {"max_attempts": 5, "backoff_seconds": 0.5},
        }
    )
    # When it runs
    [execution] = wait_for_executions(stack, job["id"], timeout=20)
    # Then it succeeded after 3 attempts, each carrying the execution's identity
    assert execution["status"] == "SUCCEEDED", execution
    assert execution["attempts"] == 3
    assert execution["result"]["status"] == 200
    calls = webhooks.calls_to("/flaky")
    assert [c.headers["X-Punctual-Attempt"] for c in calls] == ["1", "2", "3"]
    for call in calls:
        assert call.headers["X-Punctual-Job-Id"] == job["id"]
        assert call.headers["X-Punctual-Execution-Id"] == execution["id"]
        assert call.headers["X-Punctual-Scheduled-At"] == execution["scheduled_at"]
        assert call.body == {"hello": "world"}
    wait_for_job_status(alice, job["id"], "COMPLETED", stack)


def test_a_webhook_that_always_fails_ends_failed_after_max_attempts(
    stack: Stack, alice: PunctualClient, webhooks: Webhooks
) -> None:
    # Given a webhook that always answers 503
    url = webhooks.script("/down", 503)
    job = alice.create_job(
        {
            "task": {"type": "http", "params": {"url": url}},
            "schedule": {"type": "now"},
            "retry": {"max_attempts": 3, "backoff_seconds": 0.5},
        }
    )
    # When it runs
    [execution] = wait_for_executions(stack, job["id"], timeout=20)
    # Then it failed after exactly 3 attempts, saying why
    assert execution["status"] == "FAILED", execution
    assert execution["attempts"] == 3
    assert "503" in execution["error"]
    assert len(webhooks.calls_to("/down")) == 3
    assert alice.get_job(job["id"])["last_execution"]["status"] == "FAILED"


def test_a_lambda_job_invokes_a_function_in_the_local_aws(stack: Stack, alice: PunctualClient) -> None:
    # Given a function created in the stack's moto, which answers an invocation with its event
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    arn = create_echo_function("e2e-echo", session, stack.moto_url())

    # When a job invokes it in 2 s
    task = {"type": "lambda", "params": {"function_arn": arn, "payload": {"n": 1}}}
    job = alice.create_job({"task": task, "schedule": {"type": "at", "at": in_seconds(2)}})
    [execution] = wait_for_executions(stack, job["id"])

    # Then it ran on time, and the function was given the execution and the payload
    assert execution["status"] == "SUCCEEDED", execution
    assert_on_time(execution)
    assert execution["result"]["payload"] == {
        "job_id": job["id"],
        "execution_id": execution["id"],
        "scheduled_at": execution["scheduled_at"],
        "attempt": 1,
        "payload": {"n": 1},
    }


def test_cancel_and_pause_stop_runs_that_were_already_queued(
    stack: Stack, alice: PunctualClient, webhooks: Webhooks
) -> None:
    # Given two jobs due in 3 s, already handed to the queue, calling a webhook
    url = webhooks.script("/must-not-run", 200)
    spec = {"task": {"type": "http", "params": {"url": url}}, "schedule": {"type": "at", "at": in_seconds(3)}}
    cancelled, paused = alice.create_job(spec), alice.create_job(spec)
    # When one is cancelled and the other paused before their time
    assert alice.cancel_job(cancelled["id"])["status"] == "CANCELLED"
    assert alice.pause_job(paused["id"])["status"] == "PAUSED"
    # Then neither runs: their executions end CANCELLED and the webhook is never called
    for job in (cancelled, paused):
        [execution] = wait_for_executions(stack, job["id"], timeout=15)
        assert execution["status"] == "CANCELLED", execution
        assert execution["attempts"] == 0
    assert webhooks.calls_to("/must-not-run") == []
    # And resuming after the instant passed runs nothing either (missed runs are not made up)
    assert alice.resume_job(paused["id"])["status"] == "COMPLETED"
    time.sleep(1)
    assert webhooks.calls_to("/must-not-run") == []
    assert [e["status"] for e in executions(alice, paused["id"])] == ["CANCELLED"]


def test_another_owner_sees_404_and_changes_nothing(alice: PunctualClient, bob: PunctualClient) -> None:
    # Given alice's job
    job = alice.create_job({"task": {"type": "noop"}, "schedule": {"type": "at", "at": in_seconds(3600)}})
    # When bob reads, changes or runs it, Then every answer is 404, as for a job that does not exist
    attempts = [
        lambda: bob.get_job(job["id"]),
        lambda: bob.update_job(job["id"], {"name": "mine"}),
        lambda: bob.pause_job(job["id"]),
        lambda: bob.resume_job(job["id"]),
        lambda: bob.run_job(job["id"]),
        lambda: bob.list_executions(job["id"]),
        lambda: bob.cancel_job(job["id"]),
    ]
    for attempt in attempts:
        assert api_error(attempt).status == 404
    assert api_error(lambda: bob.get_job("job_does_not_exist")).status == 404
    assert job["id"] not in {j["id"] for j in bob.iter_jobs()}
    # And alice's job is untouched
    assert alice.get_job(job["id"])["status"] == "ACTIVE"
    assert alice.get_job(job["id"])["name"] == job["name"]
    alice.cancel_job(job["id"])


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic YWxpY2U6eA==", "Bearer"])
def test_requests_without_a_known_token_answer_401(stack: Stack, authorization: str | None) -> None:
    # Given a request with no token, an unknown one or another scheme
    headers = {"Authorization": authorization} if authorization else {}
    request = urllib.request.Request(f"{stack.url}/jobs", headers=headers)
    # When it is sent, Then it answers 401 with a JSON message
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=5)
    assert raised.value.code == 401
    assert "token" in json.loads(raised.value.read())["message"]


def test_health_and_the_openapi_document_need_no_token(stack: Stack) -> None:
    with urllib.request.urlopen(f"{stack.url}/health", timeout=5) as answer:
        assert answer.status == 200
    with urllib.request.urlopen(f"{stack.url}/openapi.json", timeout=5) as answer:
        document = json.loads(answer.read())
    assert document["openapi"].startswith("3.")
    assert "/jobs" in document["paths"]


def test_a_job_paused_and_resumed_while_its_run_is_under_way_runs_once(
    stack: Stack, alice: PunctualClient
) -> None:
    # Given two jobs to run now whose task takes 5 s, both under way
    spec = {"task": {"type": "sleep", "params": {"seconds": 5}}, "schedule": {"type": "now"}}
    resumed_early, resumed_late = alice.create_job(spec), alice.create_job(spec)
    for job in (resumed_early, resumed_late):
        assert eventually(
            lambda job=job: [e["status"] for e in executions(alice, job["id"])] == ["RUNNING"],
            timeout=10,
            what="the run under way",
            stack=stack,
        )
        assert alice.pause_job(job["id"])["status"] == "PAUSED"
    # When one is resumed while its run is still under way (the run's version given back, in a
    # transaction on the local stack's moto), the other once its run has ended
    assert alice.resume_job(resumed_early["id"])["status"] == "ACTIVE"
    [ended] = wait_for_executions(stack, resumed_late["id"], timeout=15)
    assert ended["status"] == "SUCCEEDED"
    assert alice.get_job(resumed_late["id"])["status"] == "PAUSED"
    assert alice.resume_job(resumed_late["id"])["status"] == "COMPLETED"
    # Then each ran once and is complete
    wait_for_job_status(alice, resumed_early["id"], "COMPLETED", stack)
    for job in (resumed_early, resumed_late):
        assert [e["status"] for e in executions(alice, job["id"])] == ["SUCCEEDED"]
