"""Monitoring through the API on moto: outcomes to filter on, notifications, acting on failure.

Webhook receivers listen on 127.0.0.1 (tests/receiver.py); SNS and EventBridge are moto's.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.work import read_body
from punctual.platform import signing
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from tests.receiver import receiver
from tests.world import World

SECRET = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes
FAIL = {"type": "fail", "params": {"message": "the report service said no"}}
ONCE = {"max_attempts": 1}


def soon(world: World, seconds: float = 5) -> dict[str, str]:
    return {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=seconds))}


def listed(world: World, query: str, owner: str = "alice") -> list[dict[str, Any]]:
    """Every job the list answers for `query`, following its cursors."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = world.api("GET", "/jobs", owner=owner, query=query + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status == 200, answer.body
        found += answer.body["items"]
        cursor = answer.body["next_cursor"]
        if cursor is None:
            return found


# ------------------------------------------------------------------------------------------ outcomes
def test_a_failed_one_time_job_is_found_by_its_outcome(world: World) -> None:
    # Given a one-time job whose only run fails after its 3 attempts, and one that succeeds
    failing = world.create(
        soon(world), task=FAIL, retry={"max_attempts": 3, "backoff_seconds": 1}, name="bad"
    )
    fine = world.create(soon(world), name="good")
    world.run_for(60, step=3)
    # When the jobs are listed by outcome
    failed = listed(world, "outcome=failed")
    succeeded = listed(world, "outcome=succeeded")
    # Then the failed job is told apart from the one that succeeded, though both are COMPLETED
    assert [j["id"] for j in failed] == [failing["id"]]
    assert [j["id"] for j in succeeded] == [fine["id"]]
    [job] = failed
    assert job["status"] == "COMPLETED"
    assert job["outcome"]["status"] == "FAILED"
    assert job["outcome"]["consecutive_failures"] == 1
    assert job["last_execution"]["status"] == "FAILED" and job["last_execution"]["attempts"] == 3
    assert job["outcome"]["execution_id"] == job["last_execution"]["id"]
    # and the job read alone says the same
    assert world.job(failing["id"])["outcome"] == job["outcome"]
    # and filters combine (status and outcome must both match; a prefix of the name)
    assert listed(world, "status=ACTIVE&outcome=failed") == []
    assert [j["id"] for j in listed(world, "name_prefix=go")] == [fine["id"]]


def test_a_recurring_job_counts_its_consecutive_failures_until_a_success(world: World) -> None:
    # Given an every-minute job that has failed a few times
    job = world.create({"type": "cron", "expression": "* * * * *"}, task=FAIL, retry=ONCE)
    world.run_for(60 * 3, step=5)
    runs = world.executions(job["id"])
    assert len(runs) >= 3 and {e["status"] for e in runs} == {"FAILED"}
    shown = world.job(job["id"])
    assert (shown["status"], shown["outcome"]["status"]) == ("ACTIVE", "FAILED")
    assert shown["outcome"]["consecutive_failures"] == len(runs)
    assert shown["outcome"]["execution_id"] == runs[0]["id"]
    # When its task is fixed and it runs again
    world.api("PATCH", f"/jobs/{job['id']}", {"task": {"type": "noop"}})
    world.run_for(60, step=5)
    # Then its outcome says so, and the failures are over
    shown = world.job(job["id"])
    assert (shown["outcome"]["status"], shown["outcome"]["consecutive_failures"]) == ("SUCCEEDED", 0)
    assert [j["id"] for j in listed(world, "outcome=succeeded&status=ACTIVE")] == [job["id"]]


def test_a_filtered_list_pages_through_short_pages_with_its_cursor(world: World) -> None:
    # Given 9 jobs, every third of which fails, and lists that read at most 4 jobs a request
    ids = []
    for i in range(9):
        task = FAIL if i % 3 == 0 else {"type": "noop"}
        ids.append(world.create(soon(world), task=task, retry=ONCE, name=f"job-{i}")["id"])
        world.clock.advance(0.01)  # (newest first: by creation time)
    world.run_for(30)
    world.store.list_read_budget = 4
    # When the failed ones are listed two a page, read by name (the outcome checked on each job)
    pages = []
    cursor = None
    while True:
        query = "name_prefix=job-&outcome=failed&limit=2" + (f"&cursor={cursor}" if cursor else "")
        answer = world.api("GET", "/jobs", query=query)
        pages.append([j["name"] for j in answer.body["items"]])
        cursor = answer.body["next_cursor"]
        if cursor is None:
            break
    # Then every failed job comes once, by name, some pages short, none over the limit
    assert [name for page in pages for name in page] == ["job-0", "job-3", "job-6"]
    assert all(len(page) <= 2 for page in pages) and len(pages) >= 3
    # and a cursor of one filter is refused by another
    first = world.api("GET", "/jobs", query="outcome=failed&limit=1").body["next_cursor"]
    assert world.api("GET", "/jobs", query=f"outcome=succeeded&cursor={first}").status == 400


def test_executions_filter_by_status_and_time_range(world: World) -> None:
    # Given an every-minute job that fails from its third run on
    job = world.create({"type": "cron", "expression": "* * * * *"}, retry=ONCE)
    world.run_for(60 * 2 + 30, step=5)
    world.api("PATCH", f"/jobs/{job['id']}", {"task": FAIL})
    world.run_for(60 * 3, step=5)
    everything = world.executions(job["id"])
    failures = [e["id"] for e in everything if e["status"] == "FAILED"]
    assert len(everything) >= 5 and len(failures) >= 3
    path = f"/jobs/{job['id']}/executions"
    # When filtered by status, two a page
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = "status=FAILED&limit=2" + (f"&cursor={cursor}" if cursor else "")
        answer = world.api("GET", path, query=query)
        assert answer.status == 200, answer.body
        seen += answer.body["items"]
        cursor = answer.body["next_cursor"]
        if cursor is None:
            break
    # Then only the failures come, newest first
    assert [e["id"] for e in seen] == failures
    # and a time range keeps the executions scheduled in it (from inclusive, until exclusive)
    oldest = everything[::-1]
    second, fourth = oldest[1]["scheduled_at"], oldest[3]["scheduled_at"]
    ranged = world.api("GET", path, query=f"since={second}&until={fourth}").body["items"]
    assert [e["scheduled_at"] for e in ranged] == [oldest[2]["scheduled_at"], second]
    both = world.api("GET", path, query=f"since={second}&status=SUCCEEDED").body["items"]
    assert [e["id"] for e in both] == [e["id"] for e in oldest[1:] if e["status"] == "SUCCEEDED"][::-1]
    # and a bad range is refused, naming the field
    bad = world.api("GET", path, query="since=yesterday")
    assert (bad.status, bad.body["field"]) == (422, "since")
    backwards = world.api("GET", path, query=f"since={fourth}&until={second}")
    assert (backwards.status, backwards.body["field"]) == (422, "until")


# ------------------------------------------------------------------------------------- notifications
def test_a_failure_is_notified_to_a_webhook_signed_and_retried_after_a_503(world: World) -> None:
    # Given a receiver that first answers 503, and two jobs that tell it of failures only
    with receiver(script=[503]) as hook:
        rule = {"on": ["failed"], "to": hook.url}
        failing = world.create(
            soon(world), task=FAIL, retry=ONCE, notify=[rule], signing_secret=SECRET, name="nightly"
        )
        world.create(soon(world), notify=[rule], signing_secret=SECRET)  # succeeds: nothing to tell
        # When they run, and the retry's backoff passes
        world.run_for(6)
        first_attempt = [d for d in world.executions(failing["id"])[0]["notifications"]]
        world.run_for(30)
        # Then the receiver was told of the failure twice (the 503, then the retry), and of nothing else
        assert len(hook.deliveries) == 2, [d.body for d in hook.deliveries]
    [execution] = world.executions(failing["id"])
    first, second = hook.deliveries
    assert first.raw == second.raw and first.headers["webhook-id"] == second.headers["webhook-id"]
    # and the request is signed: verifiable with the job's secret, as Standard Webhooks says
    sent_at = parse_rfc3339(execution["finished_at"])
    message_id = signing.verify(SECRET, second.headers, second.raw, now=sent_at + timedelta(seconds=30))
    assert message_id == second.body["id"]
    assert second.body["type"] == "execution.failed"
    assert second.body["data"]["execution"]["id"] == execution["id"]
    assert second.body["data"]["execution"]["error"] == "the report service said no"
    assert second.body["data"]["job"]["name"] == "nightly"
    assert second.body["data"]["consecutive_failures"] == 1
    # and the history shows what became of it: retrying after the 503, then delivered
    assert [(d["status"], d["attempts"]) for d in first_attempt] == [("retrying", 1)]
    assert "503" in first_attempt[0]["error"] and first_attempt[0]["next_attempt_at"]
    [delivery] = execution["notifications"]
    assert (delivery["event"], delivery["status"], delivery["attempts"]) == ("failed", "delivered", 2)
    assert delivery["to"] == hook.url


def test_only_the_events_asked_for_are_told(world: World) -> None:
    # Given one job telling one receiver of everything, another of its lateness only
    with receiver() as everything, receiver() as lateness:
        job = world.create(
            soon(world, 10),
            retry=ONCE,
            notify=[
                {"on": ["succeeded", "failed", "skipped", "dead_lettered"], "to": everything.url},
                {"on": ["late"], "late_after_seconds": 30, "to": lateness.url},
            ],
        )
        quiet = world.create(
            soon(world, 10), notify=[{"on": ["late"], "late_after_seconds": 300, "to": lateness.url}]
        )
        # When they start 60 s late (no worker ran meanwhile) and succeed
        world.clock.advance(70)
        world.run_for(10)
        # Then the first receiver heard of the success, the second of the lateness over 30 s only
        assert [d.body["type"] for d in everything.deliveries] == ["execution.succeeded"]
        [late] = lateness.deliveries
    assert late.body["type"] == "execution.late"
    assert late.body["data"]["late_after_seconds"] == 30
    assert late.body["data"]["execution"]["lateness_ms"] > 30_000
    assert late.body["data"]["job"]["id"] == job["id"]
    assert "webhook-signature" not in late.headers  # the job has no signing secret
    assert world.executions(quiet["id"])[0]["notifications"] == []
    told = {d["event"]: d["status"] for d in world.executions(job["id"])[0]["notifications"]}
    assert told == {"succeeded": "delivered", "late": "delivered"}


def test_a_receiver_that_refuses_for_good_is_not_retried(world: World) -> None:
    with receiver(script=[410]) as hook:
        job = world.create(soon(world), notify=[{"on": ["succeeded"], "to": hook.url}])
        world.run_for(120, step=5)
        assert len(hook.deliveries) == 1
    [delivery] = world.executions(job["id"])[0]["notifications"]
    assert (delivery["status"], delivery["attempts"]) == ("failed", 1)
    assert "410" in delivery["error"]


def test_notifications_to_sns_and_eventbridge(world: World) -> None:
    # Given a topic and a bus (moto's), each with a queue that receives what they are sent
    sns = world.punctual.notifier._aws_clients("sns", "us-east-1", 10)  # type: ignore[misc]
    events = world.punctual.notifier._aws_clients("events", "us-east-1", 10)  # type: ignore[misc]
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    bus = events.create_event_bus(Name="ops")["EventBusArn"]
    topic_queue = world.sqs.create_queue(QueueName="from-topic")["QueueUrl"]
    bus_queue = world.sqs.create_queue(QueueName="from-bus")["QueueUrl"]

    def arn(url: str) -> str:
        return str(
            world.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
        )

    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn(topic_queue), Attributes={"RawMessageDelivery": "true"}
    )
    events.put_rule(Name="punctual", EventBusName="ops", EventPattern=json.dumps({"source": ["punctual"]}))
    events.put_targets(Rule="punctual", EventBusName="ops", Targets=[{"Id": "q", "Arn": arn(bus_queue)}])
    # When a failing job tells both
    job = world.create(
        soon(world),
        task=FAIL,
        retry=ONCE,
        notify=[{"on": ["failed"], "to": topic}, {"on": ["failed"], "to": bus}],
    )
    world.run_for(20)
    # Then each got the notification
    [from_topic] = world.sqs.receive_message(QueueUrl=topic_queue)["Messages"]
    assert json.loads(from_topic["Body"])["type"] == "execution.failed"
    [from_bus] = world.sqs.receive_message(QueueUrl=bus_queue)["Messages"]
    event = json.loads(from_bus["Body"])
    assert (event["source"], event["detail-type"]) == ("punctual", "Punctual execution.failed")
    assert event["detail"]["data"]["job"]["id"] == job["id"]
    statuses = {d["to"]: d["status"] for d in world.executions(job["id"])[0]["notifications"]}
    assert statuses == {topic: "delivered", bus: "delivered"}


@pytest.mark.parametrize(
    ("notify", "field"),
    [
        ([{"on": ["exploded"], "to": "https://hooks.example.com/x"}], "notify[0].on[0]"),
        ([{"on": [], "to": "https://hooks.example.com/x"}], "notify[0].on"),
        ([{"on": ["failed", "failed"], "to": "https://hooks.example.com/x"}], "notify[0].on"),
        ([{"on": ["late"], "to": "https://hooks.example.com/x"}], "notify[0]"),
        ([{"on": ["failed"], "to": "mailto:ops@example.com"}], "notify[0].to"),
        ([{"on": ["failed"], "to": "arn:aws:sns:us-east-1:999999999999:not-ours"}], "notify[0].to"),
        ([{"on": ["failed"], "to": "http://169.254.169.254/latest"}], "notify[0].to"),
        ([{"on": ["failed"], "to": "https://x.example.com", "late_after_seconds": 5}], "notify[0]"),
        ([{"on": ["failed"], "to": "https://x.example.com"}] * 11, "notify"),
    ],
)
def test_bad_notification_rules_are_refused_naming_the_field(world: World, notify: Any, field: str) -> None:
    answer = world.api(
        "POST", "/jobs", {"task": {"type": "noop"}, "schedule": {"type": "now"}, "notify": notify}
    )
    assert answer.status == 422, answer.body
    assert answer.body["field"] == field, answer.body
    assert world.api("GET", "/jobs").body["items"] == []  # nothing stored


@pytest.mark.parametrize(
    "secret", ["whsec_c2hvcnQ=", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "whsec_not base64!", ""]
)
def test_a_bad_signing_secret_is_refused_and_never_echoed(world: World, secret: str) -> None:
    body = {"task": {"type": "noop"}, "schedule": {"type": "now"}, "signing_secret": secret}
    answer = world.api("POST", "/jobs", body)
    assert (answer.status, answer.body["field"]) == (422, "signing_secret"), answer.body
    assert secret not in json.dumps(answer.body) or not secret
    assert world.api("GET", "/jobs").body["items"] == []


def test_the_signing_secret_is_write_only_and_rotates_with_two_valid_at_once(world: World) -> None:
    newer = "whsec_" + "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
    with receiver() as hook:
        # Given a webhook job with a signing secret, run by hand (POST /run, handed to the queue at once)
        task = {"type": "http", "params": {"url": hook.url}}
        job = world.create({"type": "cron", "expression": "0 3 * * *"}, task=task, signing_secret=SECRET)

        def request_now() -> Any:
            assert world.api("POST", f"/jobs/{job['id']}/run").status == 202
            world.drain()
            return hook.deliveries[-1]

        # Then no read shows the secret, only that the job signs
        for shown in (job, world.job(job["id"]), *world.api("GET", "/jobs").body["items"]):
            assert SECRET not in json.dumps(shown)
            assert shown["signing"] == {"enabled": True, "previous_valid_until": None}
        signing.verify(SECRET, (first := request_now()).headers, first.raw, now=world.clock.now())
        # When it is rotated
        rotated = world.api("PATCH", f"/jobs/{job['id']}", {"signing_secret": newer}).body
        assert newer not in json.dumps(rotated)
        assert rotated["signing"]["previous_valid_until"] == to_rfc3339(
            world.clock.now() + timedelta(hours=24)
        )
        # Then its requests carry both signatures, each valid with its secret
        request = request_now()
        assert len(request.headers["webhook-signature"].split()) == 2
        assert request.headers["webhook-id"] == request.headers["X-Punctual-Execution-Id"]
        for secret in (SECRET, newer):
            signing.verify(secret, request.headers, request.raw, now=world.clock.now())
        # and once the previous secret's day is over, only the new one signs
        world.clock.advance(24 * 3600)
        request = request_now()
        assert len(request.headers["webhook-signature"].split()) == 1
        signing.verify(newer, request.headers, request.raw, now=world.clock.now())
        with pytest.raises(signing.InvalidSignature):
            signing.verify(SECRET, request.headers, request.raw, now=world.clock.now())
        # and null stops the signing
        stopped = world.api("PATCH", f"/jobs/{job['id']}", {"signing_secret": None}).body
        assert stopped["signing"]["enabled"] is False
        assert "webhook-signature" not in request_now().headers


# ------------------------------------------------------------------------------------ act on failure
def test_a_job_pauses_itself_after_n_consecutive_failures_and_says_why(world: World) -> None:
    with receiver() as hook:
        # Given an every-minute job that fails, to be paused after its third failure in a row
        job = world.create(
            {"type": "cron", "expression": "* * * * *"},
            task=FAIL,
            retry=ONCE,
            policy={"pause_after_failures": 3},
            notify=[{"on": ["failed"], "to": hook.url}],
        )
        # When it has run five minutes
        world.run_for(60 * 5 + 30, step=5)
        paused = world.job(job["id"])
        # Then it stopped after three failures, paused, with a note that says why
        assert paused["status"] == "PAUSED"
        assert [e["status"] for e in world.executions(job["id"]) if e["status"] != "CANCELLED"] == [
            "FAILED"
        ] * 3
        assert "3 consecutive failed executions" in paused["pause_note"]
        assert "the report service said no" in paused["pause_note"]
        assert paused["paused_at"]
        # and the third failure's notification says the job is paused now
        assert [d.body["data"]["job"]["status"] for d in hook.deliveries] == ["ACTIVE", "ACTIVE", "PAUSED"]
    # and resuming clears the note
    resumed = world.api("POST", f"/jobs/{job['id']}/resume").body
    assert (resumed["status"], resumed["pause_note"], resumed["paused_at"]) == ("ACTIVE", None, None)


def test_a_pause_carries_its_owners_note(world: World) -> None:
    job = world.create({"type": "cron", "expression": "0 10 * * *"})
    paused = world.api("POST", f"/jobs/{job['id']}/pause", {"note": "the report service is being moved"})
    assert (paused.status, paused.body["pause_note"]) == (200, "the report service is being moved")
    again = world.api("POST", f"/jobs/{job['id']}/pause", {"note": "until Monday"}).body
    assert again["pause_note"] == "until Monday"
    bad = world.api("POST", f"/jobs/{job['id']}/pause", {"note": "x" * 501})
    assert (bad.status, bad.body["field"]) == (422, "note")
    assert world.job(job["id"])["pause_note"] == "until Monday"


def test_a_failed_execution_is_retried_as_a_new_one_naming_it(world: World) -> None:
    # Given a one-time job whose run failed
    job = world.create(soon(world), task=FAIL, retry=ONCE)
    world.run_for(20)
    [failed] = world.executions(job["id"])
    assert listed(world, "outcome=failed")[0]["id"] == job["id"]
    # When its task is fixed and the failed execution retried
    world.api("PATCH", f"/jobs/{job['id']}", {"task": {"type": "noop"}})
    answer = world.api("POST", f"/jobs/{job['id']}/executions/{failed['id']}/retry")
    assert answer.status == 202, answer.body
    retry = answer.body
    assert (retry["retry_of"], retry["manual"]) == (failed["id"], True)
    assert retry["id"] != failed["id"]
    world.run_for(10)
    # Then it ran and succeeded, and the job no longer counts as failed
    runs = {e["id"]: e for e in world.executions(job["id"])}
    assert runs[retry["id"]]["status"] == "SUCCEEDED" and runs[retry["id"]]["retry_of"] == failed["id"]
    assert world.job(job["id"])["outcome"]["status"] == "SUCCEEDED"
    assert listed(world, "outcome=failed") == []
    # and a succeeded execution, an unknown one, or another owner's are refused
    again = world.api("POST", f"/jobs/{job['id']}/executions/{retry['id']}/retry")
    assert again.status == 409
    assert world.api("POST", f"/jobs/{job['id']}/executions/{job['id']}.zz.1/retry").status == 404
    assert world.api("POST", f"/jobs/{job['id']}/executions/{failed['id']}/retry", owner="bob").status == 404


def test_an_execution_under_way_is_not_retried_but_told_so(world: World) -> None:
    # Given a one-time job whose instant has come, its run under way (listed RUNNING, stored at its end)
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=30))})
    world.clock.advance(31)
    [running] = world.executions(job["id"])
    assert running["status"] == "RUNNING"
    # When it is retried
    answer = world.api("POST", f"/jobs/{job['id']}/executions/{running['id']}/retry")
    # Then the answer says it is under way (409), as for one stored, not that it is missing (404)
    assert answer.status == 409, answer.body
    assert answer.body["message"].startswith("execution is RUNNING")


def _dead_letter_its_message(world: World, job_id: str) -> str:
    """Take the job's message off the work queue and put it on the dead-letter queue, as SQS does
    once a message has exhausted its receives."""
    queue = world.punctual.settings.queue_url
    [message] = world.sqs.receive_message(QueueUrl=queue)["Messages"]
    world.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    assert [item.job_id for item in read_body(message["Body"]).items] == [job_id]
    world.sqs.send_message(QueueUrl=world.punctual.settings.dlq_url, MessageBody=message["Body"])
    return str(message["Body"])


def test_a_dead_lettered_execution_is_listed_and_redriven_and_runs(world: World) -> None:
    with receiver() as hook:
        # Given a job whose message was dead-lettered, telling a receiver of that
        job = world.create({"type": "now"}, notify=[{"on": ["dead_lettered", "failed"], "to": hook.url}])
        _dead_letter_its_message(world, job["id"])
        world.run_for(5)
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["dead_lettered"]) == ("FAILED", True)
        assert [d.body["type"] for d in hook.deliveries] == ["execution.dead_lettered"]
    # When its owner lists the dead letters (another owner sees none)
    page = world.api("GET", "/dead-letters").body
    [letter] = page["items"]
    assert (letter["execution_id"], letter["job_id"]) == (execution["id"], job["id"])
    assert letter["job_name"] == job["name"] and "dead-letter" in letter["error"]
    assert world.api("GET", "/dead-letters", owner="bob").body["items"] == []
    refused = world.api("POST", "/dead-letters/redrive", {"execution_ids": [execution["id"]]}, owner="bob")
    assert refused.body["items"] == [{"execution_id": execution["id"], "result": "not_found"}]
    # and redrives it
    answer = world.api("POST", "/dead-letters/redrive", {"execution_ids": [execution["id"]]})
    assert answer.body["items"] == [{"execution_id": execution["id"], "result": "redriven"}]
    world.run_for(5)
    # Then the same execution ran again and succeeded, and is no longer a dead letter
    [again] = world.executions(job["id"])
    assert (again["id"], again["status"], again["dead_lettered"]) == (execution["id"], "SUCCEEDED", False)
    assert world.api("GET", "/dead-letters").body["items"] == []
    assert world.job(job["id"])["outcome"]["status"] == "SUCCEEDED"
    twice = world.api("POST", "/dead-letters/redrive", {"execution_ids": [execution["id"]]})
    assert twice.body["items"][0]["result"] == "not_found"


def test_a_paused_jobs_dead_letter_is_kept_until_the_job_is_resumed(world: World) -> None:
    # Given a cron job whose run by hand was dead-lettered, then paused
    job = world.create({"type": "cron", "expression": "0 10 * * *"})
    assert world.api("POST", f"/jobs/{job['id']}/run").status == 202
    _dead_letter_its_message(world, job["id"])
    world.run_for(5)
    [letter] = world.api("GET", "/dead-letters").body["items"]
    assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
    before = world.executions(job["id"])
    # When it is redriven
    answer = world.api("POST", "/dead-letters/redrive", {"execution_ids": [letter["execution_id"]]})
    # Then nothing is sent or changed: the answer says why, and the dead letter stays
    assert answer.body["items"] == [{"execution_id": letter["execution_id"], "result": "job_paused"}]
    world.run_for(5)
    assert world.executions(job["id"]) == before
    assert [d["execution_id"] for d in world.api("GET", "/dead-letters").body["items"]] == [
        letter["execution_id"]
    ]
    # and once the job is resumed, it is redriven and runs again, the job's outcome with it
    assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    answer = world.api("POST", "/dead-letters/redrive", {"execution_ids": [letter["execution_id"]]})
    assert answer.body["items"][0]["result"] == "redriven"
    world.run_for(5)
    again = next(e for e in world.executions(job["id"]) if e["id"] == letter["execution_id"])
    assert again["status"] == "SUCCEEDED"
    shown = world.job(job["id"])
    assert shown["outcome"]["execution_id"] == shown["last_execution"]["id"]


@pytest.mark.parametrize("change", ["pause", "pause and resume", "cancel"])
def test_a_scheduled_run_its_job_would_no_longer_make_is_not_redriven(world: World, change: str) -> None:
    # Given an every-minute job whose scheduled run was dead-lettered
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.tick()
    world.clock.advance(65)
    _dead_letter_its_message(world, job["id"])
    world.drain()
    [letter] = world.api("GET", "/dead-letters").body["items"]
    # When the job is paused (and resumed), or cancelled, and the run redriven
    if change == "cancel":
        assert world.api("DELETE", f"/jobs/{job['id']}").status == 200
    else:
        assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
    if change == "pause and resume":
        assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    before = world.executions(job["id"])
    answer = world.api("POST", "/dead-letters/redrive", {"execution_ids": [letter["execution_id"]]})
    # Then it is not sent (the job would not run it): the answer says why, and the record goes
    expected = "job_cancelled" if change == "cancel" else "superseded"
    assert answer.body["items"] == [{"execution_id": letter["execution_id"], "result": expected}]
    world.drain()
    assert world.executions(job["id"]) == before
    assert world.api("GET", "/dead-letters").body["items"] == []
    # and the execution stays as it ended, FAILED, to be retried as a new one
    [dead] = [e for e in before if e["id"] == letter["execution_id"]]
    assert (dead["status"], dead["dead_lettered"]) == ("FAILED", True)


# ------------------------------------------------------------------------------ a relative schedule
def test_an_in_schedule_retried_with_its_idempotency_key_answers_the_same_job(world: World) -> None:
    body = {"task": {"type": "noop"}, "schedule": {"type": "in", "seconds": 3600}}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "hourly-1"})
    assert first.status == 201, first.body
    assert first.body["schedule"] == {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(hours=1))}
    world.clock.advance(7)
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "hourly-1"})
    assert (again.status, again.body["id"]) == (201, first.body["id"])
    assert again.body["next_run_at"] == first.body["next_run_at"]
    bad = world.api("POST", "/jobs", {**body, "schedule": {"type": "in", "seconds": -1}})
    assert (bad.status, bad.body["field"]) == (422, "schedule.seconds")
