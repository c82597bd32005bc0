"""Named tasks through the API and the worker, on moto: defined once, used by many jobs, changed once
for all of them; their parameters checked against the task's schema; deletion refused while in use."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.domain.errors import RetryableStoreError
from punctual.jobs import named_tasks
from punctual.jobs.task_resolver import DEFINITION_TTL_SECONDS
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.store.packs import PackRepository
from punctual_local.stack import LOCAL_EARLY_VISIBILITY_SECONDS
from tests.world import World, mocked_world

ACCOUNT = "123456789012"  # moto's
QUEUES = f"arn:aws:sqs:us-east-1:{ACCOUNT}:allowed-*"
SCHEMA = {
    "type": "object",
    "required": ["message"],
    "properties": {
        "message": {
            "type": "object",
            "required": ["to"],
            "properties": {"to": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"}},
        }
    },
    "additionalProperties": False,
}


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, sqs_queues=(QUEUES,)) as w:
        yield w


def queue(world: World, name: str) -> tuple[str, str]:
    url = world.sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"


def received(world: World, url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        batch = world.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
        messages = batch.get("Messages", [])
        if not messages:
            return found
        found += messages
        for message in messages:
            world.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def named_job(world: World, schedule: dict[str, Any], params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    answer = world.api(
        "POST", "/jobs", {"task": "send-email", "params": params, "schedule": schedule, **extra}
    )
    assert answer.status == 201, answer.body
    return dict(answer.body)


def define(world: World, arn: str, **extra: Any) -> dict[str, Any]:
    body = {
        "name": "send-email",
        "type": "sqs",
        "params": {"queue_arn": arn, "message": {"from": "noreply@example.com", "v": 1}},
        "params_schema": SCHEMA,
        "description": "an e-mail, by the mail service's queue",
        "tags": {"team": "mail"},
        **extra,
    }
    answer = world.api("POST", "/tasks", body)
    assert answer.status == 201, answer.body
    return dict(answer.body)


def test_a_named_task_used_by_three_jobs_changed_once_runs_the_new_version_in_all_three(world: World) -> None:
    # Given a named task and three every-minute jobs that use it, each with its own recipient
    first_url, first_arn = queue(world, "allowed-mail")
    second_url, second_arn = queue(world, "allowed-mail-v2")
    task = define(world, first_arn)
    assert task["version"] == 1
    recipients = ["ann@example.com", "bob@example.com", "cy@example.com"]
    jobs = [
        named_job(world, {"type": "cron", "expression": "* * * * *"}, {"message": {"to": to}})
        for to in recipients
    ]
    # (the job shows the task by name, its own parameters, and takes the task's retry and timeout)
    assert jobs[0]["task"] == "send-email" and jobs[0]["params"] == {"message": {"to": recipients[0]}}
    assert jobs[0]["retry"] is None and jobs[0]["timeout_seconds"] is None

    # When a minute passes, each job's execution runs version 1: the defaults merged with its params
    world.run_for(60)
    before = received(world, first_url)
    assert sorted(json.loads(m["Body"])["to"] for m in before) == recipients
    assert {json.loads(m["Body"])["from"] for m in before} == {"noreply@example.com"}
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["task_version"]) == ("SUCCEEDED", 1)

    # and the task is changed once: another queue and another message default
    changed = world.api(
        "PATCH",
        "/tasks/send-email",
        {"params": {"queue_arn": second_arn, "message": {"from": "mail@example.com", "v": 2}}},
    )
    assert changed.status == 200, changed.body
    assert changed.body["version"] == 2
    world.clock.advance(DEFINITION_TTL_SECONDS)  # (the workers' copy of a task lasts this long)
    world.run_for(60)

    # Then the next execution of every one of the three ran version 2
    after = received(world, second_url)
    assert sorted(json.loads(m["Body"])["to"] for m in after) == recipients
    assert {json.loads(m["Body"])["v"] for m in after} == {2}
    assert received(world, first_url) == []
    for job in jobs:
        latest = world.executions(job["id"])[0]
        assert (latest["status"], latest["task_version"]) == ("SUCCEEDED", 2), latest


def test_a_job_whose_params_break_the_schema_is_refused_naming_the_parameter(world: World) -> None:
    # Given a named task whose schema wants an e-mail address in message.to
    _, arn = queue(world, "allowed-mail")
    define(world, arn)

    # When jobs give a bad address, leave it out, or add a parameter the schema does not take
    cases = {
        "params.message.to": {"message": {"to": "not an address"}},
        "params.message": {},
        "params.url": {"message": {"to": "a@example.com"}, "url": "https://example.com"},
    }
    for field, params in cases.items():
        answer = world.api(
            "POST", "/jobs", {"task": "send-email", "params": params, "schedule": {"type": "now"}}
        )
        # Then each is refused, the parameter named, and the schema's version said
        assert answer.status == 422, answer.body
        assert answer.body["field"] == field, answer.body
        assert "send-email" in answer.body["message"]
    # (in a batch, as jobs[i].params...)
    batch = world.api(
        "POST",
        "/jobs/batch",
        {
            "jobs": [
                {
                    "task": "send-email",
                    "params": {"message": {"to": "a@example.com"}},
                    "schedule": {"type": "now"},
                },
                {"task": "send-email", "params": {"message": {"to": 3}}, "schedule": {"type": "now"}},
            ]
        },
    )
    assert (batch.status, batch.body["field"]) == (422, "jobs[1].params.message.to")
    # and nothing was stored or queued
    assert world.api("GET", "/jobs").body["items"] == []
    assert world.unread_markers() == []
    assert world.drain() == 0
    # while a job that fits is taken, and so is a change of its params that fits, but not one that does not
    job = named_job(world, {"type": "at", "at": "2026-12-02T09:00:00Z"}, {"message": {"to": "a@example.com"}})
    bad = world.api("PATCH", f"/jobs/{job['id']}", {"params": {"message": {"to": "nope"}}})
    assert (bad.status, bad.body["field"]) == (422, "params.message.to")
    good = world.api("PATCH", f"/jobs/{job['id']}", {"params": {"message": {"to": "b@example.com"}}})
    assert good.status == 200 and good.body["params"] == {"message": {"to": "b@example.com"}}


BAD_DEFINITIONS = [
    ({"type": "sqs", "params_schema": {"type": "strin"}}, "params_schema.type"),
    (
        {"type": "sqs", "params_schema": {"properties": {"a": {"$ref": "https://example.com/s.json"}}}},
        "params_schema.properties.a.$ref",
    ),
    (
        {"type": "sqs", "params_schema": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}},
        "params_schema.$ref",
    ),
    (
        {"type": "sqs", "params_schema": {"properties": {"a": {"pattern": "(a)\\1"}}}},
        "params_schema.properties.a.pattern",
    ),
    ({"type": "sqs", "params": {"message": "at {{ execution.start }}"}}, "params.message"),
    (
        {"type": "sqs", "params": {"queue_arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:other"}},
        "params.queue_arn",
    ),
    ({"type": "sqs", "params": {"delay_seconds": 901}}, "params.delay_seconds"),
    ({"type": "smtp"}, "type"),
    ({"name": "http", "type": "http"}, "name"),
]


def test_a_bad_task_definition_is_refused_naming_the_field_and_nothing_is_stored(world: World) -> None:
    for body, field in BAD_DEFINITIONS:
        answer = world.api("POST", "/tasks", {"name": "t", **body})
        assert answer.status == 422, answer.body
        assert answer.body["field"] == field, answer.body
    assert world.api("GET", "/tasks").body["items"] == []


def test_unknown_tasks_references_and_targets_in_jobs_are_refused_naming_the_field(world: World) -> None:
    _, arn = queue(world, "allowed-q")
    refused = {
        "task": {"task": "no-such-task", "schedule": {"type": "now"}},
        "task.params.message": {
            "task": {"type": "sqs", "params": {"queue_arn": arn, "message": "{{ execution.nope }}"}},
            "schedule": {"type": "now"},
        },
        "task.params.queue_arn": {
            "task": {
                "type": "sqs",
                "params": {"queue_arn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:not-allowed", "message": "x"},
            },
            "schedule": {"type": "now"},
        },
        "params": {"task": {"type": "noop"}, "params": {"a": 1}, "schedule": {"type": "now"}},
    }
    for field, body in refused.items():
        answer = world.api("POST", "/jobs", body)
        assert (answer.status, answer.body["field"]) == (422, field), answer.body
    assert world.api("GET", "/jobs").body["items"] == []
    assert world.drain() == 0


def test_parameters_refer_to_the_execution_and_are_substituted_when_it_runs(world: World) -> None:
    # Given a job whose message names the execution, its instant, its attempt and the job
    url, arn = queue(world, "allowed-context")
    message = {
        "id": "{{ execution.id }}",
        "text": "run {{ job.name }} at {{ execution.scheduled_at }}",
        "attempt": "{{ execution.attempt }}",
    }
    job = world.create(
        {"type": "now"}, {"type": "sqs", "params": {"queue_arn": arn, "message": message}}, name="nightly"
    )
    # (stored and shown as given)
    assert job["task"]["params"]["message"] == message

    # When it runs
    world.run_for(5)

    # Then what was sent had them substituted, the attempt as a number
    [execution] = world.executions(job["id"])
    [sent] = received(world, url)
    assert json.loads(sent["Body"]) == {
        "id": execution["id"],
        "text": f"run nightly at {execution['scheduled_at']}",
        "attempt": 1,
    }


def test_a_task_in_use_cannot_be_deleted_until_its_jobs_are_cancelled(world: World) -> None:
    # Given a named task used by two jobs
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    jobs = [
        named_job(world, {"type": "cron", "expression": "0 9 * * *"}, {"message": {"to": f"{n}@example.com"}})
        for n in "ab"
    ]
    # When it is deleted / Then 409 says how many use it and how to list them
    refused = world.api("DELETE", "/tasks/send-email")
    assert refused.status == 409
    assert "2 active or paused job" in refused.body["message"]
    assert "punctual jobs list --task send-email" in refused.body["message"]
    listed = world.api("GET", "/jobs", query="task=send-email")
    assert sorted(j["id"] for j in listed.body["items"]) == sorted(j["id"] for j in jobs)
    # and once both are cancelled (a paused one still counts) it goes
    world.api("POST", f"/jobs/{jobs[0]['id']}/pause")
    assert world.api("DELETE", f"/jobs/{jobs[1]['id']}").status == 200
    assert "1 active or paused job" in world.api("DELETE", "/tasks/send-email").body["message"]
    assert world.api("DELETE", f"/jobs/{jobs[0]['id']}").status == 200
    assert world.api("DELETE", "/tasks/send-email").status == 200
    assert world.api("GET", "/tasks/send-email").status == 404


def test_a_task_changed_on_condition_of_the_version_read_changes_only_at_it(world: World) -> None:
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    read = world.api("GET", "/tasks/send-email")
    assert read.headers["ETag"] == f'"{read.body["version"]}"'
    # When one client changes it on condition of what it read, then another from the same read
    first = world.api(
        "PATCH", "/tasks/send-email", {"description": "first"}, headers={"If-Match": read.headers["ETag"]}
    )
    stale = world.api(
        "PATCH", "/tasks/send-email", {"description": "second"}, headers={"If-Match": read.headers["ETag"]}
    )
    # Then the first is made, the second refused with 412, changing nothing
    assert (first.status, first.headers["ETag"]) == (200, f'"{read.body["version"] + 1}"')
    assert stale.status == 412, stale.body
    assert world.api("GET", "/tasks/send-email").body["description"] == "first"


def test_a_task_changed_on_condition_losing_the_race_to_another_change_is_412(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    etag = world.api("GET", "/tasks/send-email").headers["ETag"]
    check = named_tasks.TaskService._check
    theirs: list[Any] = []

    def another_change_first(service: Any, changed: Any) -> None:
        if not theirs:
            theirs.append(None)  # (the other change's own check goes through)
            theirs[0] = world.api("PATCH", "/tasks/send-email", {"description": "theirs"})
        check(service, changed)

    monkeypatch.setattr(named_tasks.TaskService, "_check", another_change_first)
    answer = world.api("PATCH", "/tasks/send-email", {"description": "mine"}, headers={"If-Match": etag})
    monkeypatch.undo()
    assert [t.status for t in theirs] == [200]
    assert answer.status == 412, answer.body
    assert world.api("GET", "/tasks/send-email").body["description"] == "theirs"


def test_named_tasks_are_the_owners_own(world: World) -> None:
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    # Another owner sees no such task, cannot change or delete it, and cannot name it in a job
    assert world.api("GET", "/tasks/send-email", owner="bob").status == 404
    assert world.api("PATCH", "/tasks/send-email", {"description": "mine"}, owner="bob").status == 404
    assert world.api("DELETE", "/tasks/send-email", owner="bob").status == 404
    assert world.api("GET", "/tasks", owner="bob").body["items"] == []
    job = world.api(
        "POST",
        "/jobs",
        {"task": "send-email", "params": {"message": {"to": "a@example.com"}}, "schedule": {"type": "now"}},
        owner="bob",
    )
    assert (job.status, job.body["field"]) == (422, "task")
    # and may define its own of the same name
    assert world.api("POST", "/tasks", {"name": "send-email", "type": "noop"}, owner="bob").status == 201
    assert world.api("GET", "/tasks/send-email").body["type"] == "sqs"


def test_the_task_list_shows_the_types_and_the_owners_tasks_filtered_by_tag(world: World) -> None:
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    world.api("POST", "/tasks", {"name": "ping", "type": "noop", "tags": {"team": "ops"}})
    listed = world.api("GET", "/tasks").body
    assert {t["type"] for t in listed["types"]} >= {
        "http",
        "lambda",
        "sqs",
        "sns",
        "eventbridge",
        "stepfunctions",
    }
    assert [t["name"] for t in listed["items"]] == ["ping", "send-email"]
    assert [t["name"] for t in world.api("GET", "/tasks", query="tag=team:ops").body["items"]] == ["ping"]
    assert [t["name"] for t in world.api("GET", "/tasks", query="tag=team").body["items"]] == [
        "ping",
        "send-email",
    ]


def test_a_job_whose_task_was_changed_beyond_its_params_fails_its_next_run_saying_why(world: World) -> None:
    # Given a job using a task, whose schema then changes to want what the job does not give
    _, arn = queue(world, "allowed-mail")
    define(world, arn)
    job = named_job(world, {"type": "now"}, {"message": {"to": "a@example.com"}})
    strict = {**SCHEMA, "required": ["message", "priority"]}
    assert world.api("PATCH", "/tasks/send-email", {"params_schema": strict}).status == 200
    # When it runs / Then it fails at once (no retry), naming the parameter and the version
    world.run_for(5)
    [execution] = world.executions(job["id"])
    assert execution["status"] == "FAILED" and execution["attempts"] == 1, execution
    assert "params.priority" in execution["error"] and "version 2" in execution["error"]


def two_due_together(world: World) -> tuple[datetime, list[dict[str, Any]]]:
    """Two jobs of the task, due at one instant 30.5 s ahead; that instant and the jobs."""
    due = world.clock.now() + timedelta(seconds=30.5)
    schedule = {"type": "at", "at": to_rfc3339(due)}
    return due, [
        named_job(world, schedule, {"message": {"to": to}}) for to in ("ann@example.com", "bob@x.org")
    ]


def first_and_second_queues(world: World) -> tuple[str, tuple[str, str]]:
    """The task defined on a first queue (its URL), and a second one to move it to (URL, ARN)."""
    first_url, first_arn = queue(world, "allowed-mail")
    second = queue(world, "allowed-mail-v2")
    define(world, first_arn)
    return first_url, second


def change_once(world: World, queue_arn: str, changes: list[datetime]) -> None:
    """Change the task to version 2 (a new queue, `v` 2), the first time only; note when."""
    if not changes:
        body = {"params": {"queue_arn": queue_arn, "message": {"from": "mail@example.com", "v": 2}}}
        assert world.api("PATCH", "/tasks/send-email", body).status == 200
        changes.append(world.clock.now())  # acknowledged


def both_ran_version_2(world: World, jobs: list[dict[str, Any]], first_url: str, second_url: str) -> None:
    assert received(world, first_url) == []
    assert sorted(json.loads(m["Body"])["v"] for m in received(world, second_url)) == [2, 2]
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["task_version"]) == ("SUCCEEDED", 2), execution


@pytest.fixture
def early_world(clock: ManualClock) -> Iterator[World]:
    # (copies kept a minute: here runs sharing an instant may start seconds apart, as each run's
    # sleep moves the test's clock)
    with mocked_world(
        clock,
        sqs_queues=(QUEUES,),
        early_visibility_seconds=LOCAL_EARLY_VISIBILITY_SECONDS,
        task_cache_seconds=60,
    ) as w:
        yield w


@pytest.mark.usefixtures("claim_path")
def test_a_change_acknowledged_before_an_instant_is_run_by_executions_claimed_ahead_of_it(
    early_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    first_url, (second_url, second_arn) = first_and_second_queues(world)
    # Given two jobs using a task, due at one instant
    due, jobs = two_due_together(world)
    changes: list[datetime] = []
    real_claim, real_sleep = world.store.executions.claim, world.clock.sleep
    one_at_a_time = threading.Lock()  # (no run's sleep moves the clock while the change is made)

    def claim(execution: Any, **kwargs: Any) -> Any:
        claimed = real_claim(execution, **kwargs)
        with one_at_a_time:
            # When the task is changed right after the first claim, ahead of the instant
            change_once(world, second_arn, changes)
        return claimed

    def sleep(seconds: float) -> None:
        with one_at_a_time:
            real_sleep(seconds)

    reads: list[datetime] = []
    real_get = world.store.tasks.get

    def get(owner: str, name: str, **kwargs: Any) -> Any:
        reads.append(world.clock.now())
        return real_get(owner, name, **kwargs)

    monkeypatch.setattr(world.store.executions, "claim", claim)
    monkeypatch.setattr(world.store.tasks, "get", get)
    monkeypatch.setattr(world.clock, "sleep", sleep)
    world.run_for(40, step=0.25)
    # Then both ran version 2, which was acknowledged before their instant
    assert changes and changes[0] < due
    both_ran_version_2(world, jobs, first_url, second_url)
    # reading the task once at their instant between them, not once each
    assert len([at for at in reads if at >= due]) == 1


def test_a_jobs_refused_webhook_address_is_named_where_the_job_gave_it(world: World) -> None:
    # Given a named webhook task whose jobs give the URL
    assert world.api("POST", "/tasks", {"name": "hook", "type": "http"}).status == 201
    for url in ("http://10.0.0.1/", "http://0x7f.1/", "http://u:p@example.com/"):
        # When a job gives an address no webhook may call
        answer = world.api(
            "POST", "/jobs", {"task": "hook", "params": {"url": url}, "schedule": {"type": "now"}}
        )
        # Then its field is the job's params.url, whichever check refused it
        assert (answer.status, answer.body["field"]) == (422, "params.url"), answer.body
        assert answer.body["message"].startswith("params.url: "), answer.body


def test_a_change_acknowledged_before_an_instant_is_run_by_a_pack_that_resolved_the_task_ahead(
    early_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    first_url, (second_url, second_arn) = first_and_second_queues(world)
    # Given two jobs using a task, due at one instant: one pack, taken and resolved ahead of it
    due, jobs = two_due_together(world)
    changes: list[datetime] = []
    real_take = PackRepository.take

    once = threading.Lock()  # (packs of two shards take their leases side by side)

    def take(self: PackRepository, *args: Any, **kwargs: Any) -> Any:
        taken = real_take(self, *args, **kwargs)
        with once:
            # When the task is changed once a pack holds its lease, ahead of the instant
            change_once(world, second_arn, changes)
        return taken

    monkeypatch.setattr(PackRepository, "take", take)
    world.run_for(40, step=0.25)
    # Then both ran version 2, which was acknowledged before their instant
    assert changes and changes[0] < due
    both_ran_version_2(world, jobs, first_url, second_url)


def test_a_task_that_cannot_be_read_at_the_instant_runs_the_copy_read_ahead(
    early_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    url, arn = queue(world, "allowed-mail")
    define(world, arn)
    # Given two jobs using a task, due at one instant, created in one request (one pack, its lease
    # taken ahead of the instant; separate packs may be taken in turn, the last at the instant, where
    # a failed read returns its message), and a store that throttles every read of the task from that
    # instant on
    due = world.clock.now() + timedelta(seconds=30.5)
    schedule = {"type": "at", "at": to_rfc3339(due)}
    batch = [
        {"task": "send-email", "params": {"message": {"to": to}}, "schedule": schedule}
        for to in ("ann@example.com", "bob@x.org")
    ]
    answer = world.api("POST", "/jobs/batch", {"jobs": batch})
    assert answer.status == 201, answer.body
    jobs = answer.body["items"]
    real_get = world.store.tasks.get

    def get(*args: Any, **kwargs: Any) -> Any:
        if world.clock.now() >= due:
            raise RetryableStoreError("ThrottlingException")
        return real_get(*args, **kwargs)

    monkeypatch.setattr(world.store.tasks, "get", get)
    world.run_for(40, step=0.25)
    # Then both ran at their instant, with the version read ahead, rather than the packs failing
    assert len(received(world, url)) == 2
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert (execution["status"], execution["task_version"], execution["attempts"]) == ("SUCCEEDED", 1, 1)
        assert execution["lateness_ms"] < 1000, execution
