"""The HTTP API of docs/api.md, through the real API handler on moto.

Tests marked BOTH_FORMATS run once with each of API Gateway's events: an HTTP API's (payload format
2.0, the deployed default) and a REST API's (payload format 1.0); the others with the HTTP API's.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest

from functions.api.handler import lambda_handler as api_handler
from punctual_local.lambda_events import FakeLambdaContext, http_api_event
from tests.operations import OPERATIONS
from tests.world import World

HTTP_TASK = {"type": "http", "params": {"url": "https://hooks.example.com/run", "body": {"a": 1}}}
CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
BOTH_FORMATS = pytest.mark.usefixtures("api_format")


def table_items(world: World) -> list[dict[str, Any]]:
    return world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]


@BOTH_FORMATS
def test_create_returns_the_job_in_the_contract_shape(world: World) -> None:
    # Given a cron job in Paris time
    answer = world.api("POST", "/jobs", {"name": "nightly", "task": HTTP_TASK, "schedule": CRON})
    # Then it is created with defaults and its next run in UTC with milliseconds
    assert answer.status == 201
    job = answer.body
    assert job["name"] == "nightly"
    assert job["status"] == "ACTIVE"
    assert job["schedule"] == {**CRON, "start_at": None, "end_at": None}
    assert job["retry"] == {"max_attempts": 3, "backoff_seconds": 2, "max_backoff_seconds": 300}
    assert job["timeout_seconds"] == 60
    assert job["next_run_at"] == "2026-12-01T09:00:00.000Z"
    assert job["created_at"] == "2026-12-01T08:59:30.000Z"
    assert job["last_execution"] is None
    assert world.job(job["id"]) == job


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"schedule": {"type": "now"}}, "task"),
        ({"task": {"type": "noop"}}, "schedule"),
        ({"task": {"type": "noop"}, "schedule": {"type": "at", "at": "2026-12-01T10:00:00"}}, "schedule.at"),
        (
            {"task": {"type": "noop"}, "schedule": {"type": "cron", "expression": "* * *"}},
            "schedule.expression",
        ),
        (
            {
                "task": {"type": "noop"},
                "schedule": {"type": "cron", "expression": "0 0 * * *", "timezone": "Mars/Base"},
            },
            "schedule.timezone",
        ),
        (
            {"task": {"type": "noop"}, "schedule": {"type": "rate", "every_seconds": 59}},
            "schedule.every_seconds",
        ),
        ({"task": {"type": "noop"}, "schedule": {"type": "weekly"}}, "schedule"),
        ({"task": {"type": "nope"}, "schedule": {"type": "now"}}, "task.type"),
        (
            {"task": {"type": "http", "params": {"url": "ftp://x"}}, "schedule": {"type": "now"}},
            "task.params.url",
        ),
        (
            {
                "task": {"type": "http", "params": {"url": "http://169.254.169.254/"}},
                "schedule": {"type": "now"},
            },
            "task.params.url",
        ),
        ({"task": {"type": "sleep", "params": {}}, "schedule": {"type": "now"}}, "task.params.seconds"),
        (
            {"task": {"type": "noop"}, "schedule": {"type": "now"}, "retry": {"max_attempts": 0}},
            "retry.max_attempts",
        ),
        ({"task": {"type": "noop"}, "schedule": {"type": "now"}, "timeout_seconds": 0}, "timeout_seconds"),
        # a boolean is not a number (JSON true would otherwise count as 1)
        (
            {"task": {"type": "noop"}, "schedule": {"type": "now"}, "retry": {"max_attempts": True}},
            "retry.max_attempts",
        ),
        ({"task": {"type": "noop"}, "schedule": {"type": "now"}, "timeout_seconds": True}, "timeout_seconds"),
        (
            {"task": {"type": "noop"}, "schedule": {"type": "rate", "every_seconds": True}},
            "schedule.every_seconds",
        ),
        (
            {"task": {"type": "sleep", "params": {"seconds": False}}, "schedule": {"type": "now"}},
            "task.params.seconds",
        ),
        ({"task": {"type": "noop"}, "schedule": {"type": "now"}, "colour": "red"}, "colour"),
        (
            {"task": {"type": "noop"}, "schedule": {"type": "at", "at": "2026-11-30T10:00:00Z"}},
            "schedule.at",
        ),
        (
            {
                "task": {"type": "http", "params": {"url": "http://127.0.0.1:9/", "body": "x" * 262_144}},
                "schedule": {"type": "now"},
            },
            "task.params",
        ),
    ],
)
def test_bad_input_answers_4xx_naming_the_field_and_stores_nothing(
    world: World, body: dict[str, Any], field: str
) -> None:
    # When a bad job is posted
    answer = world.api("POST", "/jobs", body)
    # Then it is refused with a message naming the field, and nothing is stored
    assert answer.status in (400, 422), answer.body
    assert field in answer.body["message"], answer.body
    assert table_items(world) == []


@BOTH_FORMATS
def test_malformed_json_is_a_422_not_a_500(world: World) -> None:
    answer = world.api("POST", "/jobs", raw=b"{not json")
    assert answer.status == 422
    assert "body" in answer.body["message"]
    assert table_items(world) == []


@BOTH_FORMATS
def test_an_invalid_field_is_a_422_naming_it(world: World) -> None:
    # When a job with a bad time zone is posted
    body = {"task": {"type": "noop"}, "schedule": {**CRON, "timezone": "Mars/Base"}}
    answer = world.api("POST", "/jobs", body)
    # Then it is refused naming the field, and nothing is stored
    assert answer.status == 422
    assert answer.body["field"] == "schedule.timezone"
    assert table_items(world) == []


@BOTH_FORMATS
def test_a_base64_encoded_body_is_decoded(world: World) -> None:
    # Given a job sent base64-encoded, as API Gateway passes binary media types on
    body = {"name": "encoded", "task": {"type": "noop"}, "schedule": CRON}
    # When it is posted, then it is created as sent
    answer = world.api("POST", "/jobs", body, base64_body=True)
    assert answer.status == 201, answer.body
    assert world.job(answer.body["id"])["name"] == "encoded"


@BOTH_FORMATS
def test_a_body_that_is_not_utf8_is_a_422(world: World) -> None:
    # Given bytes that are not UTF-8 (API Gateway passes them base64-encoded)
    answer = world.api("POST", "/jobs", raw=b"\xff\xfe{}")
    # Then they are refused as bad input naming the body, its problem listed as every 422's, and
    # nothing is stored
    assert answer.status == 422
    assert answer.body["field"] == "body"
    assert [e["field"] for e in answer.body["errors"]] == ["body"]
    assert table_items(world) == []
    # and so is a body starting with UTF-8's byte order mark, which JSON does not take
    bom = world.api("POST", "/jobs", raw=b"\xef\xbb\xbf{}")
    assert (bom.status, [e["field"] for e in bom.body.get("errors", [])]) == (422, ["body"]), bom.body


@BOTH_FORMATS
def test_another_owners_job_answers_404_like_a_missing_one(world: World) -> None:
    # Given alice's job
    job = world.create(CRON)
    # When bob reads, changes, runs, lists or cancels it
    for method, path, body in [
        ("GET", f"/jobs/{job['id']}", None),
        ("PATCH", f"/jobs/{job['id']}", {"name": "mine"}),
        ("DELETE", f"/jobs/{job['id']}", None),
        ("POST", f"/jobs/{job['id']}/pause", None),
        ("POST", f"/jobs/{job['id']}/resume", None),
        ("POST", f"/jobs/{job['id']}/run", None),
        ("GET", f"/jobs/{job['id']}/executions", None),
    ]:
        answer = world.api(method, path, body, owner="bob")
        missing = world.api(method, path.replace(job["id"], "job_doesnotexist"), body, owner="bob")
        # Then bob gets exactly what a missing job gets
        assert answer.status == 404, (method, path)
        assert answer.body["message"] == missing.body["message"].replace("job_doesnotexist", job["id"])
    assert world.api("GET", "/jobs", owner="bob").body["items"] == []
    assert world.job(job["id"])["name"] == job["name"]


@BOTH_FORMATS
def test_a_request_without_a_caller_is_401(world: World) -> None:
    assert world.api("GET", "/jobs", owner=None).status == 401


@BOTH_FORMATS
def test_list_pages_newest_first_and_filters_by_status(world: World) -> None:
    # Given five jobs created a second apart, one paused
    ids = []
    for _ in range(5):
        ids.append(world.create(CRON)["id"])
        world.clock.advance(1)
    world.api("POST", f"/jobs/{ids[1]}/pause")
    # When alice pages through two at a time
    seen: list[str] = []
    cursor = None
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = world.api("GET", "/jobs", query=query).body
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # Then she sees all of them, newest first
    assert seen == list(reversed(ids))
    paused = world.api("GET", "/jobs", query="status=PAUSED").body["items"]
    assert [j["id"] for j in paused] == [ids[1]]
    active = world.api("GET", "/jobs", query="status=ACTIVE").body["items"]
    assert [j["id"] for j in active] == [i for i in reversed(ids) if i != ids[1]]


def pages(world: World, query: str, owner: str = "alice") -> list[list[str]]:
    """Every page of a list, following next_cursor: the ids on each."""
    found: list[list[str]] = []
    cursor = None
    while True:
        answer = world.api("GET", "/jobs", owner=owner, query=query + (f"&cursor={cursor}" if cursor else ""))
        assert answer.status == 200, answer.body
        found.append([j["id"] for j in answer.body["items"]])
        cursor = answer.body["next_cursor"]
        if cursor is None:
            return found


def test_a_status_filter_pages_through_every_match_once_newest_first(world: World) -> None:
    # Given nine jobs a second apart, every third one paused
    ids = []
    for _ in range(9):
        ids.append(world.create(CRON)["id"])
        world.clock.advance(1)
    paused = ids[::3]
    for job_id in paused:
        assert world.api("POST", f"/jobs/{job_id}/pause").status == 200
    newest_first = list(reversed(ids))
    for status, expected in [("PAUSED", [i for i in newest_first if i in paused]), ("ACTIVE", None)]:
        expected = expected or [i for i in newest_first if i not in paused]
        for limit in (1, 2, 4, 100):
            # When alice pages through the jobs in that status
            seen = pages(world, f"status={status}&limit={limit}")
            # Then she sees each match once, newest first, in full pages but the last
            assert [i for page in seen for i in page] == expected, (status, limit)
            assert all(len(page) == limit for page in seen[:-1]), (status, limit)
    assert pages(world, "status=COMPLETED") == [[]]
    # and bob, whose jobs are none of these, sees none of them
    assert pages(world, "status=PAUSED", owner="bob") == [[]]


def test_a_filter_checked_on_the_jobs_read_answers_short_pages_past_its_read_budget(world: World) -> None:
    # Given six jobs, the four newest paused, and a list that reads at most two jobs a request
    ids = []
    for i in range(6):
        ids.append(world.create(CRON)["id"])
        if i >= 2:
            assert world.api("POST", f"/jobs/{ids[-1]}/pause").status == 200
        world.clock.advance(1)
    world.store.list_read_budget = 2
    # When alice lists her active jobs (most jobs are: read from her jobs, the status checked on each)
    seen = pages(world, "status=ACTIVE&limit=10")
    # Then the first pages are empty but carry a cursor, and following it finds both, newest first
    assert seen[0] == [] and seen[1] == []
    assert [i for page in seen for i in page] == [ids[1], ids[0]]


def test_a_status_cursor_is_bound_to_its_owner_and_status(world: World) -> None:
    for _ in range(3):
        world.create(CRON)
        world.clock.advance(1)
    cursor = world.api("GET", "/jobs", query="status=ACTIVE&limit=1").body["next_cursor"]
    assert cursor
    for owner, query in [
        ("bob", f"status=ACTIVE&cursor={cursor}"),
        ("alice", f"status=PAUSED&cursor={cursor}"),
        ("alice", f"cursor={cursor}"),
    ]:
        answer = world.api("GET", "/jobs", owner=owner, query=query)
        assert answer.status == 400, (owner, query)
        assert "items" not in answer.body


def test_a_plain_job_item_carries_no_key_of_the_sparse_list_indexes(world: World) -> None:
    # Given an unnamed one-time job that ran to COMPLETED and SUCCEEDED, and a paused one
    done = world.create({"type": "now"})
    paused = world.create(CRON)
    world.api("POST", f"/jobs/{paused['id']}/pause")
    world.drain()
    assert world.job(done["id"])["status"] == "COMPLETED"
    # Then the table has the indexes resources.TABLE defines; the job that succeeded carries none of
    # the sparse ones' keys (no flag, no name of its own, no named task), the paused one its flag
    table = world.dynamodb_client.describe_table(TableName=world.punctual.settings.table_name)["Table"]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == [
        "by_owner",
        "by_task",
        "by_name",
        "by_flag",
    ]
    jobs = {i["id"]["S"]: i for i in table_items(world) if i["sk"]["S"] == "JOB"}
    assert not {"flag", "name", "task_ref"} & set(jobs[done["id"]])
    assert jobs[paused["id"]]["flag"] == {"S": "PAUSED"} and "name" not in jobs[paused["id"]]


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=x", "status=SLEEPING"])
def test_bad_list_parameters_are_refused(world: World, query: str) -> None:
    answer = world.api("GET", "/jobs", query=query)
    assert answer.status == 422
    assert query.split("=")[0] in answer.body["message"]


def test_altered_or_foreign_cursors_answer_400_and_reveal_nothing(world: World) -> None:
    # Given alice has three jobs and a cursor into them
    for _ in range(3):
        world.create(CRON)
        world.clock.advance(1)
    cursor = world.api("GET", "/jobs", query="limit=1").body["next_cursor"]
    assert cursor
    # When the cursor is altered, used by bob, or used for another list
    altered = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    for owner, query in [
        ("alice", f"cursor={altered}"),
        ("alice", "cursor=garbage"),
        ("bob", f"cursor={cursor}"),
        ("alice", f"status=ACTIVE&cursor={cursor}"),
    ]:
        answer = world.api("GET", "/jobs", owner=owner, query=query)
        # Then it is refused
        assert answer.status == 400, (owner, query, answer.body)
        assert "cursor" in answer.body["message"]
        assert "items" not in answer.body


@BOTH_FORMATS
def test_idempotency_key_returns_the_same_job_and_conflicts_on_another_body(world: World) -> None:
    body = {"task": {"type": "noop"}, "schedule": CRON}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "k1"})
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "k1"})
    other = world.api("POST", "/jobs", {**body, "name": "x"}, headers={"Idempotency-Key": "k1"})
    bobs = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "k1"}, owner="bob")
    assert first.status == 201
    assert again.status == 201
    assert again.body["id"] == first.body["id"]
    assert other.status == 409
    assert bobs.status == 201 and bobs.body["id"] != first.body["id"]
    assert len(world.api("GET", "/jobs").body["items"]) == 1


def test_patch_reschedules_and_renames(world: World) -> None:
    job = world.create(CRON)
    answer = world.api(
        "PATCH",
        f"/jobs/{job['id']}",
        {"name": "renamed", "schedule": {"type": "rate", "every_seconds": 300}, "timeout_seconds": 5},
    )
    assert answer.status == 200
    assert answer.body["name"] == "renamed"
    assert answer.body["timeout_seconds"] == 5
    assert answer.body["next_run_at"] == "2026-12-01T09:04:30.000Z"
    bad = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "rate", "every_seconds": 1}})
    assert bad.status == 422
    assert world.job(job["id"])["next_run_at"] == "2026-12-01T09:04:30.000Z"


def test_pause_resume_cancel_transitions(world: World) -> None:
    job = world.create(CRON)
    paused = world.api("POST", f"/jobs/{job['id']}/pause").body
    assert paused["status"] == "PAUSED" and paused["next_run_at"] is None
    assert world.api("POST", f"/jobs/{job['id']}/run").status == 409
    resumed = world.api("POST", f"/jobs/{job['id']}/resume").body
    assert resumed["status"] == "ACTIVE" and resumed["next_run_at"] == "2026-12-01T09:00:00.000Z"
    cancelled = world.api("DELETE", f"/jobs/{job['id']}")
    assert cancelled.status == 200 and cancelled.body["status"] == "CANCELLED"
    assert world.api("DELETE", f"/jobs/{job['id']}").body["status"] == "CANCELLED"
    assert world.api("POST", f"/jobs/{job['id']}/resume").status == 409
    assert world.api("PATCH", f"/jobs/{job['id']}", {"name": "x"}).status == 409


def test_run_now_answers_202_with_a_queued_execution(world: World) -> None:
    job = world.create(CRON)
    answer = world.api("POST", f"/jobs/{job['id']}/run")
    assert answer.status == 202
    assert answer.body["status"] == "QUEUED"
    assert answer.body["manual"] is True
    world.run_for(3)
    executions = {e["id"]: e for e in world.executions(job["id"])}
    # (the 09:00 occurrence is queued too: it is due within the hand-off window)
    assert executions[answer.body["id"]]["status"] == "SUCCEEDED"
    assert executions[answer.body["id"]]["manual"] is True
    assert world.job(job["id"])["status"] == "ACTIVE"  # an extra run does not complete a recurring job


def test_run_now_answers_as_sent_however_soon_a_worker_takes_it_or_pending_if_unsent(world: World) -> None:
    job = world.create(CRON)
    # Given a worker that has taken the run before the API answers (its store reads it RUNNING)
    with mock.patch.object(
        world.store.executions, "get", side_effect=AssertionError("the answer is not read back")
    ):
        answer = world.api("POST", f"/jobs/{job['id']}/run")
    # Then the answer is the execution as queued
    assert (answer.status, answer.body["status"]) == (202, "QUEUED"), answer.body
    # And one the queue could not take is PENDING: the scanner's next tick sends it
    with mock.patch.object(world.punctual.dispatcher, "dispatch", side_effect=RuntimeError("queue down")):
        unsent = world.api("POST", f"/jobs/{job['id']}/run")
    assert (unsent.status, unsent.body["status"]) == (202, "PENDING"), unsent.body
    world.run_for(70)
    ran = {e["id"]: e["status"] for e in world.executions(job["id"])}
    assert ran[answer.body["id"]] == ran[unsent.body["id"]] == "SUCCEEDED"


@BOTH_FORMATS
def test_preview_lists_next_runs_without_creating_anything(world: World) -> None:
    answer = world.api("POST", "/schedules/preview", {"schedule": CRON, "count": 3})
    assert answer.status == 200
    assert answer.body["next_runs"] == [
        "2026-12-01T09:00:00.000Z",
        "2026-12-02T09:00:00.000Z",
        "2026-12-03T09:00:00.000Z",
    ]
    assert world.api("POST", "/schedules/preview", {"schedule": CRON, "count": 51}).status == 422
    assert world.api("POST", "/schedules/preview", {"schedule": CRON, "count": True}).status == 422
    # (a count is an integer: one written as a float or a string is refused, not converted)
    for count in (2.0, "2"):
        refused = world.api("POST", "/schedules/preview", {"schedule": CRON, "count": count})
        assert (refused.status, refused.body["field"]) == (422, "count"), refused.body
    assert table_items(world) == []


@BOTH_FORMATS
def test_tasks_health_and_openapi(world: World) -> None:
    types = {t["type"]: t for t in world.api("GET", "/tasks").body["types"]}
    assert set(types) == {
        "http",
        "lambda",
        "noop",
        "sleep",
        "fail",
        "sqs",
        "sns",
        "eventbridge",
        "stepfunctions",
    }
    assert "url" in types["http"]["params"]["properties"]
    assert world.api("GET", "/health").status == 200
    spec = world.api("GET", "/openapi.json").body
    assert spec["openapi"].startswith("3.")
    paths = spec["paths"]
    for path in [
        "/jobs",
        "/jobs/batch",
        "/jobs/{job_id}",
        "/jobs/{job_id}/run",
        "/jobs/{job_id}/executions",
        "/schedules/preview",
    ]:
        assert path in paths, path
    assert "201" in paths["/jobs"]["post"]["responses"]
    assert {"201", "409", "422", "503"} <= set(paths["/jobs/batch"]["post"]["responses"])
    assert "next_cursor" in paths["/jobs"]["get"]["description"]  # short filtered pages documented
    assert "404" in paths["/jobs/{job_id}"]["get"]["responses"]


@BOTH_FORMATS
def test_unknown_route_is_404_json(world: World) -> None:
    answer = world.api("GET", "/nope")
    assert answer.status == 404
    assert "message" in answer.body


@BOTH_FORMATS
def test_a_method_an_endpoint_does_not_take_is_405_saying_which_it_does(world: World) -> None:
    job = world.create(CRON)
    for method, path, allowed in [
        ("PUT", "/jobs", "GET, POST"),
        ("DELETE", f"/jobs/{job['id']}/pause", "POST"),
        ("POST", f"/jobs/{job['id']}", "DELETE, GET, PATCH"),
        ("PATCH", "/jobs/", "GET, POST"),
        # (fixed paths that a route with an id would otherwise read as a job named so)
        ("DELETE", "/jobs/batch", "POST"),
        ("GET", "/jobs/pause", "POST"),
        ("PATCH", "/jobs/resume", "POST"),
    ]:
        answer = world.api(method, path, {} if method == "PATCH" else None)
        assert answer.status == 405, (method, path, answer.body)
        assert answer.headers.get("Allow") == allowed, answer.headers
        assert answer.body["message"].endswith(f"it takes {allowed}")
    assert world.job(job["id"])["status"] == "ACTIVE"


def test_a_status_cursor_signed_before_the_status_index_was_dropped_answers_400(world: World) -> None:
    # Given a cursor a client kept from before the by_owner_status index was dropped (its key names
    # that index's attributes)
    world.create({"type": "cron", "expression": "0 * * * *"})
    stale = world.punctual.cursors.encode(
        {
            "pk": "JOB#job_x",
            "sk": "JOB",
            "status_pk": "OWNER#alice#ACTIVE",
            "owner_sk": "0000000000000#job_x",
        },
        owner="alice",
        scope="jobs:ACTIVE",
    )
    # When it is used / Then it is refused as bad input, not a server error
    answer = world.api("GET", "/jobs", query=f"status=ACTIVE&cursor={stale}")
    assert answer.status == 400
    assert "cursor" in answer.body["message"]


def test_a_task_up_to_the_size_limit_is_taken_and_its_job_can_still_change(world: World) -> None:
    # Given a webhook whose body takes the task to just under the 256 KiB limit
    body = "x" * 261_000
    task = {"type": "http", "params": {"url": "http://127.0.0.1:9/", "body": body}}
    answer = world.api(
        "POST", "/jobs", {"task": task, "schedule": {"type": "cron", "expression": "* * * * *"}}
    )
    assert answer.status == 201, answer.body
    # When it is paused and resumed (its item rewritten with its schedule's state)
    job_id = answer.body["id"]
    assert world.api("POST", f"/jobs/{job_id}/pause").status == 200
    assert world.api("POST", f"/jobs/{job_id}/resume").status == 200
    # Then it is stored whole
    assert world.job(job_id)["task"]["params"]["body"] == body


def test_an_http_api_stage_name_in_the_path_is_not_part_of_the_route(world: World) -> None:
    # Given an HTTP API event from a named stage, whose rawPath starts with the stage's name
    job = world.create(CRON)
    event = http_api_event("GET", f"/jobs/{job['id']}", owner="alice", stage="v1")
    assert event["rawPath"] == f"/v1/jobs/{job['id']}"
    # When the API function answers it, then it routes on the path below the stage
    answer = api_handler(event, FakeLambdaContext())
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["id"] == job["id"]


def test_both_formats_serve_the_same_openapi_document(world: World) -> None:
    # Given the document as each resolver serves it
    documents = {}
    for api_format in ("http", "rest"):
        world.api_format = api_format
        documents[api_format] = world.api("GET", "/openapi.json").body
    # Then they are one document, listing every route with its models
    assert documents["http"] == documents["rest"]
    operations = {
        f"{method.upper()} {path}" for path, item in documents["http"]["paths"].items() for method in item
    }
    assert operations == OPERATIONS
    assert {"JobIn", "JobOut", "JobPage", "ExecutionOut", "ErrorOut"} <= set(
        documents["http"]["components"]["schemas"]
    )


@BOTH_FORMATS
def test_a_query_parameter_given_twice_is_refused_naming_it(world: World) -> None:
    for query in ("limit=1&limit=2", "status=ACTIVE&status=PAUSED", "tag=a:b&tag=c:d"):
        answer = world.api("GET", "/jobs", query=query)
        assert answer.status == 422, answer.body
        name = query.partition("=")[0]
        assert (answer.body["field"], answer.body["message"]) == (
            name,
            f"{name}: give it once (it was given more than once)",
        )
    # (a value may still hold commas and ampersands, encoded)
    assert world.api("GET", "/jobs", query="tag=a:b%2Cc%26d").status == 200
