"""Jobs of every kind run on time, through scanner, queue and worker, with time moved by the test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from tests.receiver import receiver
from tests.world import World, mocked_world


def at(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def test_a_one_time_job_runs_at_its_instant_never_early(world: World) -> None:
    # Given a job for 5 minutes ahead: beyond the hand-off, so the scanner enqueues it
    job = world.create({"type": "at", "at": at(world, 300.4)})
    # When time passes
    world.run_for(330, step=0.25)
    # Then it ran once, not before its instant, and not late by more than a poll step
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["attempts"] == 1
    started = parse_rfc3339(execution["started_at"])
    scheduled = parse_rfc3339(execution["scheduled_at"])
    assert started >= scheduled
    assert 0 <= execution["lateness_ms"] < 250
    finished = world.job(job["id"])
    assert finished["status"] == "COMPLETED"
    assert finished["next_run_at"] is None
    assert finished["last_execution"]["id"] == execution["id"]


def test_a_failing_cron_job_keeps_its_chain(world: World) -> None:
    # Given an every-minute cron job whose task always fails, without retries
    job = world.create(
        {"type": "cron", "expression": "* * * * *"}, task={"type": "fail"}, retry={"max_attempts": 1}
    )
    # When three minutes pass
    world.run_for(180)
    # Then each minute ran, failed, and the next one was still scheduled
    executions = world.executions(job["id"])
    assert [e["scheduled_at"] for e in executions if e["status"] == "FAILED"] == [
        "2026-12-01T09:02:00.000Z",
        "2026-12-01T09:01:00.000Z",
        "2026-12-01T09:00:00.000Z",
    ]
    assert all(e["error"] == "failed on purpose" for e in executions if e["status"] == "FAILED")
    current = world.job(job["id"])
    assert current["status"] == "ACTIVE"
    assert current["next_run_at"] == "2026-12-01T09:03:00.000Z"


def test_cron_in_a_time_zone_runs_at_the_zones_wall_clock(world: World) -> None:
    # Given a cron at 10:00 Paris (09:00Z in winter)
    job = world.create({"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"})
    world.run_for(45)
    [execution] = world.executions(job["id"])
    assert execution["scheduled_at"] == "2026-12-01T09:00:00.000Z"
    assert execution["status"] == "SUCCEEDED"
    assert world.job(job["id"])["next_run_at"] == "2026-12-02T09:00:00.000Z"


def test_a_rate_job_runs_every_period_until_its_end(world: World) -> None:
    # Given a job every 60 s from 09:00:00 until 09:02:30
    job = world.create(
        {
            "type": "rate",
            "every_seconds": 60,
            "start_at": "2026-12-01T09:00:00Z",
            "end_at": "2026-12-01T09:02:30Z",
        }
    )
    # When four minutes pass
    world.run_for(240)
    # Then it ran three times and completed after the last
    runs = sorted(e["scheduled_at"] for e in world.executions(job["id"]))
    assert runs == ["2026-12-01T09:00:00.000Z", "2026-12-01T09:01:00.000Z", "2026-12-01T09:02:00.000Z"]
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_pause_stops_runs_and_resume_skips_what_was_missed(world: World) -> None:
    # Given an every-minute job that has run once
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.run_for(45)  # 09:00:15
    # (09:01 and 09:02 are already enqueued: a tick sends what its soon partition holds, up to the
    # hand-off window; an execution is stored when it starts)
    assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
    # and its next run is the first of them
    assert world.job(job["id"])["next_run_at"] == "2026-12-01T09:01:00.000Z"
    # When it is paused for three minutes, then resumed
    world.api("POST", f"/jobs/{job['id']}/pause")
    world.run_for(180)  # 09:03:15
    during = world.executions(job["id"])
    resumed = world.api("POST", f"/jobs/{job['id']}/resume").body
    world.run_for(60)  # 09:04:15
    # Then nothing ran while paused (an occurrence queued before the pause was cancelled, not run)
    assert [e["status"] for e in during if e["status"] != "CANCELLED"] == ["SUCCEEDED"]
    assert all(e["attempts"] == 0 for e in during if e["status"] == "CANCELLED")
    # and after resuming, it continued from now: 09:01-09:03 were not made up
    assert resumed["next_run_at"] == "2026-12-01T09:04:00.000Z"
    ran = sorted(e["scheduled_at"] for e in world.executions(job["id"]) if e["status"] == "SUCCEEDED")
    assert ran == ["2026-12-01T09:00:00.000Z", "2026-12-01T09:04:00.000Z"]


def test_pause_and_resume_after_an_extra_run_keep_the_scheduled_run(world: World) -> None:
    # Given a one-time job for 10 minutes ahead that was also run once by hand
    job = world.create({"type": "at", "at": at(world, 600)})
    world.api("POST", f"/jobs/{job['id']}/run")
    world.run_for(5)
    # When it is paused and resumed before its time
    world.api("POST", f"/jobs/{job['id']}/pause")
    resumed = world.api("POST", f"/jobs/{job['id']}/resume").body
    world.run_for(660)
    # Then its scheduled run still happened
    assert resumed["status"] == "ACTIVE"
    scheduled = [e for e in world.executions(job["id"]) if not e["manual"] and e["status"] == "SUCCEEDED"]
    assert [e["scheduled_at"] for e in scheduled] == [job["next_run_at"]]


def test_cancel_stops_an_execution_that_is_already_queued(world: World) -> None:
    with receiver() as hook:
        # Given a webhook job queued for 20 s ahead
        job = world.create(
            {"type": "at", "at": at(world, 20)}, task={"type": "http", "params": {"url": hook.url}}
        )
        assert world.executions(job["id"]) == []  # enqueued: stored when it starts
        # When it is cancelled before its time
        world.api("DELETE", f"/jobs/{job['id']}")
        world.run_for(40)
        # Then it never ran: its message was received, and the execution stored as CANCELLED
        [execution] = world.executions(job["id"])
        assert execution["status"] == "CANCELLED"
        assert execution["attempts"] == 0
        assert hook.deliveries == []


@pytest.mark.usefixtures("claim_path")
def test_a_cancel_between_the_workers_read_and_its_claim_still_stops_the_run(world: World) -> None:
    with receiver() as hook:
        # Given a webhook job due now, cancelled after the worker read it and before it claims it
        job = world.create({"type": "now"}, task={"type": "http", "params": {"url": hook.url}})
        real_claim = world.store.executions.claim

        def cancel_then_claim(*args: Any, **kwargs: Any) -> Any:
            world.api("DELETE", f"/jobs/{job['id']}")
            return real_claim(*args, **kwargs)

        world.store.executions.claim = cancel_then_claim
        # When the worker runs
        world.run_for(5)
        # Then the claim sees the cancel: nothing was delivered, the execution is CANCELLED
        assert hook.deliveries == []
        assert world.executions(job["id"])[0]["status"] == "CANCELLED"


def test_rescheduling_supersedes_the_queued_occurrence(world: World) -> None:
    # Given a one-time job queued for 100 s ahead
    job = world.create({"type": "at", "at": at(world, 100)})
    # When it is moved to 200 s ahead
    world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": at(world, 200)}})
    world.run_for(230)
    # Then only the new time ran
    by_status = {e["status"]: e for e in world.executions(job["id"])}
    assert set(by_status) == {"SUCCEEDED", "CANCELLED"}
    assert by_status["SUCCEEDED"]["scheduled_at"] == "2026-12-01T09:02:50.000Z"
    assert "superseded" in by_status["CANCELLED"]["error"]


@pytest.mark.usefixtures("claim_path")
def test_a_run_finishing_after_its_job_was_rescheduled_leaves_the_job_active(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose run is in progress
    job = world.create({"type": "now"}, task={"type": "sleep", "params": {"seconds": 30}})
    real_run = world.punctual.worker._run

    def reschedule_mid_run(*args: Any, **kwargs: Any) -> Any:
        world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": at(world, 3600)}})
        return real_run(*args, **kwargs)

    monkeypatch.setattr(world.punctual.worker, "_run", reschedule_mid_run)
    # When it is rescheduled while it runs, and the run then finishes
    world.run_for(60)
    # Then the job stays ACTIVE with its new run to come
    current = world.job(job["id"])
    assert current["status"] == "ACTIVE"
    assert current["next_run_at"] is not None


def test_failures_retry_with_backoff_then_fail(world: World) -> None:
    with receiver(script=[500, 500, 500, 500]) as hook:
        # Given a webhook that keeps failing, 3 attempts, 10 s backoff
        job = world.create(
            {"type": "now"},
            task={"type": "http", "params": {"url": hook.url}},
            retry={"max_attempts": 3, "backoff_seconds": 10, "max_backoff_seconds": 300},
        )
        world.run_for(120)
        # Then it was attempted three times, spaced by the backoff, and failed
        [execution] = world.executions(job["id"])
        assert execution["status"] == "FAILED"
        assert execution["attempts"] == 3
        assert execution["error"] == "HTTP 500 Internal Server Error"
        assert execution["result"]["status"] == 500
        assert [d.headers["X-Punctual-Attempt"] for d in hook.deliveries] == ["1", "2", "3"]
        assert len({d.headers["X-Punctual-Execution-Id"] for d in hook.deliveries}) == 1
        assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_webhook_that_fails_twice_then_succeeds(world: World) -> None:
    with receiver(script=[503, 429]) as hook:
        job = world.create(
            {"type": "now"},
            task={"type": "http", "params": {"url": hook.url, "body": {"hello": "world"}}},
            retry={"max_attempts": 3, "backoff_seconds": 1},
        )
        world.run_for(30)
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["attempts"] == 3
        assert execution["result"] == {"status": 200, "body": {"ok": True}}
        assert [d.body for d in hook.deliveries] == [{"hello": "world"}] * 3
        first = hook.deliveries[0].headers
        assert first["X-Punctual-Job-Id"] == job["id"]
        assert first["X-Punctual-Scheduled-At"] == execution["scheduled_at"]


def test_a_client_error_fails_at_once(world: World) -> None:
    with receiver(script=[404]) as hook:
        job = world.create({"type": "now"}, task={"type": "http", "params": {"url": hook.url}})
        world.run_for(20)
        [execution] = world.executions(job["id"])
        assert execution["status"] == "FAILED"
        assert execution["attempts"] == 1
        assert len(hook.deliveries) == 1


def test_dead_lettered_messages_fail_their_execution(world: World) -> None:
    # Given an execution queued for 30 s ahead whose message ends up in the dead-letter queue
    job = world.create({"type": "at", "at": at(world, 30)})
    world.clock.advance(31)
    queue, dlq = world.punctual.settings.queue_url, world.punctual.settings.dlq_url
    [message] = world.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    world.sqs.send_message(QueueUrl=dlq, MessageBody=message["Body"])
    world.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    # When the dead-letter handler runs
    world.drain()
    # Then the execution failed and the one-time job completed
    [execution] = world.executions(job["id"])
    assert execution["status"] == "FAILED"
    assert "dead-letter" in execution["error"]
    assert world.job(job["id"])["status"] == "COMPLETED"


@pytest.mark.usefixtures("claim_path")
def test_execution_history_expires_after_the_retention(world: World) -> None:
    # Given a finished execution
    job = world.create({"type": "now"})
    world.run_for(5)
    # Then its record carries a TTL of the retention (30 days) after its scheduled time
    [item] = [
        i
        for i in world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
        if i["sk"]["S"].startswith("EXEC#")
    ]
    scheduled = parse_rfc3339(world.executions(job["id"])[0]["scheduled_at"])
    retention = timedelta(days=world.punctual.settings.retention_days)
    assert int(item["expires_at"]["N"]) == int((scheduled + retention).timestamp())
    described = world.dynamodb_client.describe_time_to_live(TableName=world.punctual.settings.table_name)
    assert described["TimeToLiveDescription"]["AttributeName"] == "expires_at"


def test_early_visibility_never_starts_early(clock: ManualClock) -> None:
    # Given a deployment that makes messages visible 2 s ahead (the local stack's setting)
    with mocked_world(clock, early_visibility_seconds=2) as world:
        job = world.create({"type": "at", "at": at(world, 30.5)})
        # When time passes in small steps
        world.clock.advance(28.2)  # 2.3 s before its instant
        queue = world.punctual.settings.queue_url
        visible = world.sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0).get("Messages", [])
        world.run_for(10, step=0.25)
        # Then the message was there ahead of time, and the run still started at its instant
        assert len(visible) == 1
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert 0 <= execution["lateness_ms"] < 250


def test_a_jobs_next_run_is_its_first_run_in_the_queue_when_several_are(world: World) -> None:
    # Given an every-minute job created at 08:59:30: its 09:00:30 run is handed off at once, and the
    # scanner's next tick sends its 09:01:30 run too
    job = world.create({"type": "rate", "every_seconds": 60})
    seen = []
    for _ in range(30):
        world.run_for(5)
        seen.append((world.clock.now(), parse_rfc3339(world.job(job["id"])["next_run_at"])))
    # Then the job's next run, as the API shows it, is always the first still to come
    assert [next_run for now, next_run in seen if now < parse_rfc3339("2026-12-01T09:00:30Z")] == [
        parse_rfc3339("2026-12-01T09:00:30Z")
    ] * 11
    assert all(now < next_run <= now + timedelta(seconds=60) for now, next_run in seen)


@pytest.mark.parametrize("window", [0, 600])
def test_a_new_or_resumed_job_lists_no_run_from_before_it(world: World, window: int) -> None:
    # Given an every-minute job created at 08:59:30 (with a flexible window or without)
    world.run_for(5)
    policy = {"flexible_window_seconds": window} if window else {}
    job = world.create({"type": "cron", "expression": "* * * * *"}, policy=policy)
    # Then neither at once nor once paused and resumed does it list a run from before it began, and
    # its next run is the one its creation answered
    for _ in range(2):
        world.run_for(1)
        assert world.executions(job["id"]) == []
        assert world.job(job["id"])["next_run_at"] == job["next_run_at"]
        assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
        job = world.api("POST", f"/jobs/{job['id']}/resume").body
        assert world.store.jobs.get(job["id"]).runs_since == world.clock.now()  # (from then on)
    # (the pause superseded the run the creation queued: it ends CANCELLED, and only that is listed)
    world.run_for(1)
    assert {e["status"] for e in world.executions(job["id"])} <= {"CANCELLED"}
