"""Inputs the API used to take loosely, each refused plainly (docs/api.md, "Input refusals"): an
integer query parameter written otherwise than in digits, an empty cursor, a control character in a
query value, null where the contract gives null no meaning, an Idempotency-Key outside printable
ASCII, and schedules whose runs would fall on or after 2200-01-01T00:00:00Z.

Each answers 400 or 422 naming the field, stores nothing, and is refused before the store is read.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest

from functions.api.handler import lambda_handler as api_handler
from punctual.domain.models import next_after, spread
from punctual.domain.schedules import LATEST_INSTANT, RateSchedule
from punctual.platform.timefmt import parse_rfc3339
from punctual_local.lambda_events import FakeLambdaContext, api_gateway_event
from punctual_local.server import ApiServer
from tests.integration.api_edges import snapshot
from tests.world import Answer, World

CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
NOOP = {"type": "noop"}
BOTH_FORMATS = pytest.mark.usefixtures("api_format")


def refused(
    world: World,
    status: int,
    field: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    reads: int = 0,
    **request: Any,
) -> Answer:
    """Send the request; assert it answers `status` naming `field`, with at most `reads` calls to the
    store (cheap: refused before the rest is read), and nothing stored changed (without a call to
    the store, nothing could)."""
    before = snapshot(world) if reads else []
    with world.counting_calls() as calls:
        answer = world.api(method, path, body, **request)
    assert (answer.status, answer.body.get("field")) == (status, field), (method, path, request, answer.body)
    assert isinstance(answer.body.get("message"), str) and answer.body["message"].startswith(field)
    assert sum(calls.values()) <= reads, calls
    if reads:
        assert snapshot(world) == before
    return answer


def list_routes(world: World) -> list[tuple[str, str, str]]:
    """(method, path, query) of every route that takes `limit` and `cursor`."""
    job_id = world.create(CRON, tags={"team": "a"})["id"]
    return [
        ("GET", "/jobs", ""),
        ("GET", f"/jobs/{job_id}/executions", ""),
        ("GET", "/dead-letters", ""),
        ("GET", "/tasks", ""),
        ("POST", "/jobs/pause", "tag=team:b&"),
        ("POST", "/jobs/resume", "tag=team:b&"),
    ]


# ------------------------------------------------------------------------------------------------
# Integer query parameters: digits only.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_a_limit_written_as_a_float_is_refused(world: World) -> None:
    # Given a job to list
    world.create(CRON)
    # When a page is asked for with ?limit=1.0 / Then it is refused, naming limit
    answer = refused(world, 422, "limit", "GET", "/jobs", query="limit=1.0")
    assert "'1.0'" in answer.body["message"]


# %2B is "+", %20 a space, %D9%A5 an Arabic-Indic five
NOT_DIGITS = ["1.0", "", "%2B5", "%205", "5%20", "5_0", "1e2", "0x5", "%D9%A5", "99999999999999999999"]


@BOTH_FORMATS
def test_every_limit_not_written_in_digits_is_refused_on_every_list(world: World) -> None:
    # Given every route that pages
    for method, path, query in list_routes(world):
        # When its limit is sent otherwise than in digits / Then it is refused, naming limit
        for value in NOT_DIGITS:
            refused(world, 422, "limit", method, path, query=f"{query}limit={value}")
        # (while digits are a limit)
        assert world.api(method, path, query=f"{query}limit=5").status == 200, path


# ------------------------------------------------------------------------------------------------
# Cursors: an empty one is no cursor of ours.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_an_empty_cursor_is_refused_not_read_as_the_first_page(world: World) -> None:
    # Given a job, so that the first page is not empty
    world.create(CRON)
    # When the list is asked for with ?cursor= / Then it is refused (400), naming cursor
    answer = refused(world, 400, "cursor", "GET", "/jobs", query="cursor=")
    assert "empty" in answer.body["message"]


@BOTH_FORMATS
def test_an_empty_cursor_is_refused_on_every_list(world: World) -> None:
    for method, path, query in list_routes(world):
        refused(world, 400, "cursor", method, path, query=f"{query}cursor=")


# ------------------------------------------------------------------------------------------------
# Control characters in query values.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_a_name_prefix_holding_a_nul_is_refused(world: World) -> None:
    # Given a job (no name holds a control character: names are plain text)
    world.create(CRON, name="nightly")
    # When jobs are listed by ?name_prefix=%00 / Then it is refused, naming name_prefix
    answer = refused(world, 422, "name_prefix", "GET", "/jobs", query="name_prefix=%00")
    assert "U+0000" in answer.body["message"]


@BOTH_FORMATS
def test_a_query_parameter_the_route_does_not_take_is_refused_naming_it(world: World) -> None:
    # (a misspelt filter was dropped: every job listed, as if unfiltered)
    job = world.create(CRON, name="nightly")
    answer = refused(world, 422, "stauts", "GET", "/jobs", query="stauts=PAUSED")
    assert "status" in answer.body["message"]  # (it says what the route takes)
    refused(world, 422, "limit", "GET", f"/jobs/{job['id']}", query="limit=5")
    refused(world, 422, "all", "POST", f"/jobs/{job['id']}/pause", query="all=1")
    assert world.api("GET", "/jobs", query="status=ACTIVE&limit=5").status == 200


@BOTH_FORMATS
def test_control_characters_in_text_query_values_are_refused(world: World) -> None:
    # Given a job with a name and a tag
    world.create(CRON, name="nightly", tags={"team": "a"})
    # When a text filter holds a control character (C0, DEL, C1) / Then it is refused, naming it
    for value in ["%00", "%0A", "%1B%5B31m", "%7F", "%C2%85"]:
        refused(world, 422, "name_prefix", "GET", "/jobs", query=f"name_prefix=n{value}")
        for method, path in [("GET", "/jobs"), ("GET", "/tasks"), ("POST", "/jobs/pause")]:
            refused(world, 422, "tag", method, path, query=f"tag=team:a{value}")
        refused(world, 422, "task", "GET", "/jobs", query=f"task=t{value}")
    # and a tag filter's key no tag can have says why
    for query, why in [
        ("tag=" + "k" * 129, "at most 128 characters"),
        ("tag=a%00", "letters, digits"),
        ("tag=a%00:b", "letters, digits"),
        ("tag=:b", "write key:value"),
        ("tag=a:" + "v" * 257, "at most 256 characters"),
    ]:
        answer = refused(world, 422, "tag", "GET", "/jobs", query=query)
        assert why in answer.body["message"], answer.body
    # (while other text filters as before)
    assert [j["name"] for j in world.api("GET", "/jobs", query="name_prefix=nigh").body["items"]] == [
        "nightly"
    ]
    assert len(world.api("GET", "/jobs", query="tag=team:a").body["items"]) == 1


# ------------------------------------------------------------------------------------------------
# null where the contract gives it no meaning.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_a_preview_with_a_null_count_is_refused(world: World) -> None:
    body = {"schedule": {"type": "now"}, "count": None}
    answer = refused(world, 422, "count", "POST", "/schedules/preview", body)
    assert "leave the field out" in answer.body["message"]


def test_a_new_job_with_a_null_field_without_meaning_is_refused(world: World) -> None:
    for field in ["name", "tags", "policy", "notify"]:
        body = {"task": NOOP, "schedule": CRON, field: None}
        answer = refused(world, 422, field, "POST", "/jobs", body)
        assert "leave the field out" in answer.body["message"], answer.body
        refused(world, 422, f"jobs[0].{field}", "POST", "/jobs/batch", {"jobs": [body]})


def test_a_change_with_a_null_field_is_refused_not_read_as_no_change(world: World) -> None:
    # Given a job
    job_id = world.create(CRON, name="n", retry={"max_attempts": 2}, timeout_seconds=30)["id"]
    # When a PATCH sends a field as null / Then it is refused rather than answered 200 with nothing
    # changed (retry and timeout_seconds take null: back to the default)
    for field in ["name", "task", "params", "tags", "schedule", "policy", "notify"]:
        refused(world, 422, field, "PATCH", f"/jobs/{job_id}", {field: None})


def test_a_null_retry_or_timeout_goes_back_to_the_named_tasks_or_the_default(world: World) -> None:
    # Given a job of a named task with a retry and timeout of its own, and an inline job with both
    task = {"name": "ping", "type": "noop", "retry": {"max_attempts": 7}, "timeout_seconds": 45}
    assert world.api("POST", "/tasks", task).status == 201
    named = world.create(CRON, task="ping", retry={"max_attempts": 2}, timeout_seconds=30)
    inline = world.create(CRON, retry={"max_attempts": 2}, timeout_seconds=30)
    assert (named["retry"]["max_attempts"], named["timeout_seconds"]) == (2, 30)
    # When each is sent retry and timeout_seconds as null
    for job in (named, inline):
        answer = world.api("PATCH", f"/jobs/{job['id']}", {"retry": None, "timeout_seconds": None})
        assert answer.status == 200, answer.body
    # Then the named task's job takes its task's again, as one created without its own would
    shown = world.job(named["id"])
    assert (shown["retry"], shown["timeout_seconds"]) == (None, None)
    stored = world.store.jobs.get(named["id"])
    assert stored.inherits == {"retry", "timeout_seconds"}
    # and the inline job has the defaults
    shown = world.job(inline["id"])
    assert (shown["retry"]["max_attempts"], shown["timeout_seconds"]) == (3, 60)


def test_a_pause_with_a_null_note_is_refused(world: World) -> None:
    job_id = world.create(CRON)["id"]
    refused(world, 422, "note", "POST", f"/jobs/{job_id}/pause", {"note": None})
    assert world.job(job_id)["status"] == "ACTIVE"


def test_a_named_task_with_a_null_field_without_meaning_is_refused(world: World) -> None:
    for field in ["tags", "description"]:
        answer = refused(world, 422, field, "POST", "/tasks", {"name": "t", "type": "noop", field: None})
        assert "leave the field out" in answer.body["message"], answer.body
    # (a params_schema that is no schema is named as itself, not by the type pydantic tried)
    refused(world, 422, "params_schema", "POST", "/tasks", {"name": "t", "type": "noop", "params_schema": 5})
    assert world.api("POST", "/tasks", {"name": "t", "type": "noop", "description": "d"}).status == 201
    for field in ["type", "params", "description", "tags"]:
        refused(world, 422, field, "PATCH", "/tasks/t", {field: None})


def test_the_documented_nulls_are_still_taken(world: World) -> None:
    # Given the fields whose null the contract (or an answer) gives a meaning
    job = {
        "task": NOOP,
        "schedule": {**CRON, "start_at": None, "end_at": None},
        "params": None,
        "retry": None,
        "timeout_seconds": None,
        "signing_secret": None,
        "policy": {"max_lateness_seconds": None, "max_runs": None, "pause_after_failures": None},
    }
    # When they are sent / Then they are taken
    created = world.api("POST", "/jobs", job)
    assert created.status == 201, created.body
    patched = world.api("PATCH", f"/jobs/{created.body['id']}", {"signing_secret": None})
    assert patched.status == 200, patched.body
    task = {"name": "t", "type": "noop", "params_schema": None, "retry": None, "timeout_seconds": None}
    assert world.api("POST", "/tasks", task).status == 201
    removed = world.api("PATCH", "/tasks/t", {"params_schema": None, "retry": None, "timeout_seconds": None})
    assert removed.status == 200, removed.body


# ------------------------------------------------------------------------------------------------
# Idempotency-Key: 1 to 200 printable ASCII characters.
# ------------------------------------------------------------------------------------------------
KEY_FIELD = "header idempotency-key"


@BOTH_FORMATS
def test_an_idempotency_key_holding_a_control_character_is_refused(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    for path, data in [("/jobs", body), ("/jobs/batch", {"jobs": [body]})]:
        answer = refused(world, 400, KEY_FIELD, "POST", path, data, headers={"Idempotency-Key": "\x01"})
        assert "U+0001" in answer.body["message"]


@BOTH_FORMATS
def test_an_idempotency_key_of_latin_1_bytes_is_refused(world: World) -> None:
    # Given a key sent as the raw latin-1 bytes b"caf\xe9", as an HTTP server decodes them
    key = b"caf\xe9".decode("latin-1")
    body = {"task": NOOP, "schedule": CRON}
    for path, data in [("/jobs", body), ("/jobs/batch", {"jobs": [body]})]:
        # When a job is created with it / Then it is refused (400), naming the header; nothing is stored
        answer = refused(world, 400, KEY_FIELD, "POST", path, data, headers={"Idempotency-Key": key})
        assert "U+00E9" in answer.body["message"]


@BOTH_FORMATS
def test_only_idempotency_keys_of_printable_ascii_are_keys(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    for key in ["\x7f", "a\tb", "\u00a0", "k\u2028", "\u65e5\u672c", "k" * 201]:
        refused(world, 400, KEY_FIELD, "POST", "/jobs", body, headers={"Idempotency-Key": key})
    # while every printable ASCII character but the comma, the space too, is part of a key
    key = {"Idempotency-Key": "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != ",") + " x"}
    first, again = (world.api("POST", "/jobs", body, headers=key) for _ in range(2))
    assert (first.status, again.status, again.body["id"]) == (201, 201, first.body["id"])


@BOTH_FORMATS
def test_two_idempotency_keys_are_refused_not_joined_or_one_dropped(world: World) -> None:
    # (joined, "K1,K2" was a key of its own: a retry sending K1 alone created a second job)
    body = {"task": NOOP, "schedule": CRON}
    for path, data in [("/jobs", body), ("/jobs/batch", {"jobs": [body]})]:
        # Given two Idempotency-Key headers, as an HTTP API or the local stack joins them
        answer = refused(world, 400, KEY_FIELD, "POST", path, data, headers={"Idempotency-Key": "K1-x,K2-x"})
        assert "comma" in answer.body["message"]
    # and as a REST API sends them, apart (its resolver would take the first and drop the other)
    event = api_gateway_event(
        "POST",
        "/jobs",
        owner="alice",
        query="",
        headers={"Content-Type": "application/json", "Idempotency-Key": "K2-x"},
        body=json.dumps(body).encode(),
    )
    event["multiValueHeaders"] = {
        **(event.get("multiValueHeaders") or {}),
        "Idempotency-Key": ["K1-x", "K2-x"],
    }
    before = snapshot(world)
    answer = api_handler(event, FakeLambdaContext())
    assert (answer["statusCode"], json.loads(answer["body"])["field"]) == (400, KEY_FIELD), answer
    assert snapshot(world) == before


def test_raw_latin_1_bytes_in_an_idempotency_key_over_http_are_refused(world: World) -> None:
    # Given the local stack's HTTP front end on loopback, with the API function behind it
    server = ApiServer(
        ("127.0.0.1", 0),
        lambda event: api_handler(event, FakeLambdaContext()),
        {"t1": "alice"},
        access_log=False,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    body = json.dumps({"task": NOOP, "schedule": CRON}).encode()
    try:
        # When a job is created with the key sent as the bytes b"caf\xe9" and b"\x01"
        answers = []
        for key in [b"caf\xe9", b"\x01"]:
            with socket.create_connection(server.server_address[:2], timeout=5) as connection:
                connection.sendall(
                    b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t1\r\n"
                    b"Content-Type: application/json\r\nIdempotency-Key: " + key + b"\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
                )
                answers.append(b"".join(iter(lambda c=connection: c.recv(65536), b"")))
    finally:
        server.shutdown()
        server.server_close()
    # Then each is refused with 400 and nothing is stored
    assert [a.split(b" ", 2)[1] for a in answers] == [b"400", b"400"], answers
    assert snapshot(world) == []


# ------------------------------------------------------------------------------------------------
# 2200-01-01T00:00:00Z: no instant a request may not name is a run either.
# ------------------------------------------------------------------------------------------------
RUNS_FROM_2200 = {"type": "cron", "expression": "0 0 1 1 *", "start_at": "2199-06-01T00:00:00Z"}
ONE_RUN_BEFORE_2200 = {"type": "rate", "every_seconds": 366 * 24 * 3600, "start_at": "2199-06-01T00:00:00Z"}


def test_a_schedule_whose_runs_fall_after_2200_is_refused(world: World) -> None:
    # Given a cron schedule that would first run on 2200-01-01 (its start_at a valid request time)
    # When it is previewed, or a job is created with it / Then it is refused: no run to come
    for path, body in [
        ("/schedules/preview", {"schedule": RUNS_FROM_2200, "count": 5}),
        ("/jobs", {"task": NOOP, "schedule": RUNS_FROM_2200}),
    ]:
        answer = refused(world, 422, "schedule", "POST", path, body)
        assert "2200-01-01T00:00:00Z" in answer.body["message"]
    # And a job's schedule cannot be changed to it either (the job read, nothing written)
    job_id = world.create(CRON)["id"]
    refused(world, 422, "schedule", "PATCH", f"/jobs/{job_id}", {"schedule": RUNS_FROM_2200}, reads=1)


def test_an_instant_far_outside_a_requests_range_is_told_that_range(world: World) -> None:
    # (year 9999 was told "years 1970 to 9000": the store's range, not a request's)
    for at in ["9999-01-01T00:00:00Z", "0001-01-01T00:00:00Z"]:
        answer = refused(
            world, 422, "schedule.at", "POST", "/jobs", {"task": NOOP, "schedule": {"type": "at", "at": at}}
        )
        assert "from 1970-01-01T00:00:00Z and before 2200-01-01T00:00:00Z" in answer.body["message"]
        answer = refused(world, 422, "since", "GET", "/jobs/job_x/executions", query=f"since={at}")
        assert "before 2200-01-01T00:00:00Z" in answer.body["message"]


def test_a_recurring_schedule_ends_before_2200(world: World) -> None:
    # Given a rate schedule whose second run would fall in 2200
    # When previewed / Then only its run before 2200 is shown
    preview = world.api("POST", "/schedules/preview", {"schedule": ONE_RUN_BEFORE_2200, "count": 5})
    assert preview.body["next_runs"] == ["2199-06-01T00:00:00.000Z"], preview.body
    # and a cron schedule's runs stop there too
    cron = {"type": "cron", "expression": "0 0 * * *", "start_at": "2199-12-30T12:00:00Z"}
    preview = world.api("POST", "/schedules/preview", {"schedule": cron, "count": 5})
    assert preview.body["next_runs"] == ["2199-12-31T00:00:00.000Z"], preview.body
    # and a job created with it runs that once, then has no run to come
    job = world.create(ONE_RUN_BEFORE_2200)
    assert job["next_run_at"] == "2199-06-01T00:00:00.000Z"
    stored = world.store.jobs.get(job["id"])
    assert next_after(stored, parse_rfc3339(job["next_run_at"])) is None


def test_a_flexible_window_does_not_spread_the_last_run_past_2200() -> None:
    # Given the last run of a rate schedule, a minute before 2200, with a window of 900 s
    schedule = RateSchedule.model_validate(
        {"type": "rate", "every_seconds": 3600, "start_at": "2199-12-31T23:59:00Z"}
    )
    nominal = parse_rfc3339("2199-12-31T23:59:00Z")
    # When spread, for many jobs / Then none runs at or after 2200
    runs = {spread(f"job_{n}", schedule, nominal, schedule.start_at, 900) for n in range(200)}
    assert max(r for r in runs if r is not None) < LATEST_INSTANT and len(runs) > 1


def test_instants_of_a_schedule_from_2200_are_refused(world: World) -> None:
    for schedule, field in [
        ({"type": "at", "at": "2200-01-01T00:00:00Z"}, "schedule.at"),
        ({**CRON, "start_at": "2200-01-01T00:00:00Z"}, "schedule.start_at"),
        ({**CRON, "end_at": "2300-01-01T00:00:00Z"}, "schedule.end_at"),
    ]:
        refused(world, 422, field, "POST", "/jobs", {"task": NOOP, "schedule": schedule})
        refused(world, 422, field, "POST", "/schedules/preview", {"schedule": schedule})


@BOTH_FORMATS
def test_query_instants_from_2200_are_refused(world: World) -> None:
    job_id = world.create(CRON)["id"]
    path = f"/jobs/{job_id}/executions"
    for param in ["since", "until"]:
        refused(world, 422, param, "GET", path, query=f"{param}=2200-01-01T00:00:00Z")
        assert world.api("GET", path, query=f"{param}=2199-12-31T23:59:59Z").status == 200
