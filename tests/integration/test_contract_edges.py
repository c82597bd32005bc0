"""The API at the edges of its contract (docs/api.md): bad bodies, content types, timestamps, cursors,
idempotent retries, and every action on a job in every status.

Bad input answers 4xx with a message naming the field, and changes nothing stored. A request whose
handler raises is recorded as 502 (what API Gateway, or the local server, answers when the function
fails), so that a test says what went wrong instead of raising.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest

from punctual.domain.errors import LostRace, RetryableStoreError
from punctual.domain.schedules import PAST_TOLERANCE
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from tests.world import Answer, World, mocked_world

CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
NOOP = {"type": "noop"}
BOTH_FORMATS = pytest.mark.usefixtures("api_format")


def seconds_ahead(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def call(world: World, method: str, path: str, body: Any = None, **kwargs: Any) -> Answer:
    try:
        return world.api(method, path, body, **kwargs)
    except Exception as exc:  # the function failed: API Gateway answers 5xx
        return Answer(status=502, body={"exception": f"{type(exc).__name__}: {exc}"[:300]}, headers={})


def snapshot(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def assert_bad_input(answer: Answer, field: str | None = None) -> None:
    assert answer.status in (400, 422), (answer.status, answer.body)
    assert isinstance(answer.body, dict) and isinstance(answer.body.get("message"), str), answer.body
    if field is not None:
        assert field in answer.body["message"], answer.body


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def http_task_raw(body_json: bytes, url: str = "https://hooks.example.com/run") -> bytes:
    return (
        b'{"task":{"type":"http","params":{"url":"' + url.encode() + b'","body":' + body_json + b"}},"
        b'"schedule":{"type":"cron","expression":"0 10 * * *"}}'
    )


# ------------------------------------------------------------------------------------------------
# Nesting: what is stored must read back (pydantic's JSON parser stops near 200 levels).
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_a_task_nested_too_deep_is_refused_or_stays_readable(
    world: World,
) -> None:
    # (stored, a task nested 200 deep could not be read back: the job could not be read, listed,
    # cancelled or run)
    answer = call(world, "POST", "/jobs", raw=http_task_raw(nested(200)))
    assert_bad_input(answer, "body")
    assert snapshot(world) == []
    # Within the body's 64 levels, a task's parameters take at most 32
    deep_params = call(world, "POST", "/jobs", raw=http_task_raw(nested(40)))
    assert_bad_input(deep_params, "task.params")
    assert "nested deeper than 32 levels" in deep_params.body["message"]
    assert snapshot(world) == []
    # and one nested as deep as allowed is stored, readable, listed and cancellable like any other
    created = call(world, "POST", "/jobs", raw=http_task_raw(nested(30)))
    assert created.status == 201, created.body
    job_id = created.body["id"]
    got = call(world, "GET", f"/jobs/{job_id}")
    listed = call(world, "GET", "/jobs")
    cancelled = call(world, "DELETE", f"/jobs/{job_id}")
    assert (got.status, [j["id"] for j in listed.body["items"]], cancelled.status) == (200, [job_id], 200)


def test_a_task_nested_past_the_serialiser_stores_nothing(world: World) -> None:
    before = snapshot(world)
    answer = call(world, "POST", "/jobs", raw=http_task_raw(nested(255)))
    assert answer.status < 500, answer.body  # "Bad input never answers 5xx ..."
    assert snapshot(world) == before or answer.status == 201  # "... and never changes stored data"


# ------------------------------------------------------------------------------------------------
# A webhook's answer is stored as the execution's result: one nested too deep is kept as text.
# ------------------------------------------------------------------------------------------------
class Receiver:
    """A webhook receiver on loopback that answers every POST with `payload`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.payload = nested(300)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = found.payload
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def test_a_webhook_answer_that_cannot_be_stored_as_json_is_kept_as_text(
    world: World, receiver: Receiver
) -> None:
    # nested 300 deep, a number no float holds (JSON would store it as null), nested 32 deep (its
    # result is 33: {"status", "body"} around it), and as deep as a result may be
    for payload, as_text in [
        (nested(300), True),
        (b'{"big": 1e400}', True),
        (nested(32), True),
        (nested(31), False),
    ]:
        receiver.payload = payload
        job = world.create({"type": "now"}, task={"type": "http", "params": {"url": receiver.url}})
        world.run_for(5)
        assert world.job(job["id"])["status"] == "COMPLETED"
        answer = call(world, "GET", f"/jobs/{job['id']}/executions")
        assert answer.status == 200, answer.body
        result = answer.body["items"][0]["result"]
        assert result["status"] == 200, result  # (the result as such, not a truncated preview)
        assert result["body"] == (payload.decode() if as_text else json.loads(payload)), payload[:40]


# ------------------------------------------------------------------------------------------------
# Bodies json.loads takes (or raises on) but no store can keep: 4xx, nothing stored.
# ------------------------------------------------------------------------------------------------
SURROGATE_TASK = (
    b'{"task":{"type":"http","params":{"url":"https://hooks.example.com/run","body":"\\ud800"}},'
    b'"schedule":{"type":"now"}}'
)


BAD_BODIES = (
    ("POST", "/jobs", SURROGATE_TASK, {}),
    ("POST", "/jobs/batch", b'{"jobs":[' + SURROGATE_TASK + b"]}", {}),
    ("POST", "/jobs", http_task_raw(nested(1000)), {}),
    (
        "POST",
        "/jobs",
        b'{"task":{"type":"noop"},"schedule":{"type":"now"},"timeout_seconds":' + b"9" * 5000 + b"}",
        {},
    ),
    ("POST", "/jobs", b"x", {"Content-Type": "multipart/form-data"}),
    ("POST", "/jobs", http_task_raw(b"Infinity"), {}),
    ("POST", "/jobs", http_task_raw(b"1e400"), {}),
    ("POST", "/jobs", http_task_raw(b'{"x": -1e999}'), {}),
)  # a lone surrogate in a task (single, batch), 1,000 levels, 5,000 digits, multipart, Infinity,
# numbers no float holds (json.loads makes them infinite without a word: stored, they would be null)


def test_a_body_no_store_can_keep_is_refused(world: World) -> None:
    for method, path, raw, headers in BAD_BODIES:
        answer = call(world, method, path, raw=raw, headers=headers)
        assert answer.status in (400, 415, 422), (raw[:60], answer.status, answer.body)
        assert isinstance(answer.body.get("message"), str), answer.body
    assert snapshot(world) == []


def test_a_patched_task_with_a_lone_surrogate_is_refused(world: World) -> None:
    job = world.create(CRON)
    before = snapshot(world)
    raw = b'{"task":{"type":"http","params":{"url":"https://hooks.example.com/run","body":{"\\udfff":1}}}}'
    answer = call(world, "PATCH", f"/jobs/{job['id']}", raw=raw)
    assert_bad_input(answer, "unpaired surrogate")
    assert snapshot(world) == before


# ------------------------------------------------------------------------------------------------
# Idempotency-Key: a retry with the same key and body returns the same job, even once its
# instant has passed.
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["at", "end_at"])
def test_an_idempotent_retry_after_the_instant_passed_returns_the_job(world: World, which: str) -> None:
    now = world.clock.now()
    if which == "at":
        schedule = {"type": "at", "at": to_rfc3339(now + timedelta(minutes=1))}
    else:
        schedule = {
            "type": "cron",
            "expression": "* * * * *",
            "end_at": to_rfc3339(now + timedelta(minutes=3)),
        }
    body = {"task": NOOP, "schedule": schedule}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": f"k-{which}"})
    assert first.status == 201
    world.run_for(600)  # the client's retry comes 10 minutes later (keys are kept 24 hours)
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": f"k-{which}"})
    assert (again.status, (again.body or {}).get("id")) == (201, first.body["id"]), again.body


def test_a_partly_stored_batch_retried_once_invalid_is_409_naming_what_was_stored(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose first attempt stored one of its two jobs, then failed (503)
    real = world.store.jobs.put_new_many

    def partly(jobs: Any) -> None:
        real(jobs[:1])
        raise RetryableStoreError("BatchWriteItem left items unprocessed")

    monkeypatch.setattr(world.store.jobs, "put_new_many", partly)
    at = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(minutes=2))}
    body = {"jobs": [{"name": f"j{i}", "task": NOOP, "schedule": at} for i in range(2)]}
    key = {"Idempotency-Key": "k"}
    assert world.api("POST", "/jobs/batch", body, headers=key).status == 503
    monkeypatch.setattr(world.store.jobs, "put_new_many", real)
    # When it is retried with the key once its instant has passed (more than 5 minutes: refused)
    world.clock.advance(600)
    retried = world.api("POST", "/jobs/batch", body, headers=key)
    # Then the answer is not 422 ("nothing created": one job was), but 409 saying what happened
    assert retried.status == 409, retried.body
    assert "stored 1 of its 2 jobs" in retried.body["message"]
    assert "schedule.at" in retried.body["message"]
    # and a single create whose first attempt failed before storing its job answers the same way
    soon = {"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(minutes=2))}
    single = {"task": NOOP, "schedule": soon}
    monkeypatch.setattr(world.store.jobs, "put_new", mock.Mock(side_effect=RetryableStoreError("throttled")))
    assert world.api("POST", "/jobs", single, headers={"Idempotency-Key": "s"}).status == 503
    monkeypatch.undo()
    world.clock.advance(600)
    assert (
        "stored 0 of its 1 jobs"
        in world.api("POST", "/jobs", single, headers={"Idempotency-Key": "s"}).body["message"]
    )


def test_a_retry_while_the_first_attempt_is_still_storing_is_told_to_wait(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a request whose instant is just within the past tolerance, slow to store its job
    at = world.clock.now() - PAST_TOLERANCE + timedelta(seconds=2)
    body = {"task": NOOP, "schedule": {"type": "at", "at": to_rfc3339(at)}}
    key = {"Idempotency-Key": "k"}
    real = world.store.jobs.put_new
    retried: list[Answer] = []

    def slow(job: Any) -> Any:
        if not retried:  # the key claimed, the marker filed, the job not yet stored
            world.clock.advance(3)  # the client gives up and retries: the instant is now refused
            retried.append(world.api("POST", "/jobs", body, headers=key))
        return real(job)

    monkeypatch.setattr(world.store.jobs, "put_new", slow)
    first = world.api("POST", "/jobs", body, headers=key)
    # Then the first attempt creates the job, and the retry is told to wait, not that it cannot be
    assert first.status == 201, first.body
    [answer] = retried
    assert answer.status == 409, answer.body
    assert "still in progress" in answer.body["message"], answer.body
    assert "cannot be created" not in answer.body["message"]
    # and once it has, a retry answers the job
    again = world.api("POST", "/jobs", body, headers=key)
    assert (again.status, again.body["id"]) == (201, first.body["id"])


def test_an_idempotency_key_is_remembered_for_24_hours_no_longer(world: World) -> None:
    # (DynamoDB's TTL may keep an expired item for days: the store looks at its expiry itself)
    body = {"task": NOOP, "schedule": CRON}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "day"})
    world.clock.advance(timedelta(hours=23).total_seconds())
    again = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "day"})
    assert (again.status, again.body["id"]) == (201, first.body["id"])
    world.clock.advance(timedelta(hours=2).total_seconds())
    other = world.api("POST", "/jobs", {**body, "name": "another"}, headers={"Idempotency-Key": "day"})
    assert other.status == 201 and other.body["id"] != first.body["id"], other.body
    # and the key now stands for the new request
    repeated = world.api("POST", "/jobs", {**body, "name": "another"}, headers={"Idempotency-Key": "day"})
    assert repeated.body["id"] == other.body["id"]


def test_an_idempotency_key_with_another_body_is_409_and_stores_nothing(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    first = world.api("POST", "/jobs", body, headers={"Idempotency-Key": "k"})
    before = snapshot(world)
    for other in [
        {**body, "name": "x"},
        {**body, "timeout_seconds": 5},
        {"task": NOOP, "schedule": {"type": "now"}},
    ]:
        answer = world.api("POST", "/jobs", other, headers={"Idempotency-Key": "k"})
        assert answer.status == 409, answer.body
        assert "message" in answer.body
    batch = world.api("POST", "/jobs/batch", {"jobs": [body]}, headers={"Idempotency-Key": "k"})
    assert batch.status == 409
    assert snapshot(world) == before
    same = world.api("POST", "/jobs", {"schedule": CRON, "task": NOOP}, headers={"Idempotency-Key": "k"})
    assert same.status == 201 and same.body["id"] == first.body["id"]


def test_a_refused_request_does_not_use_up_its_idempotency_key(world: World) -> None:
    # Given a request refused with 422 (a yearly cron whose window holds no run: refused only once
    # its runs are computed), sent with a key
    window = {"start_at": seconds_ahead(world, 0), "end_at": seconds_ahead(world, 3600)}
    bad = {"task": NOOP, "schedule": {"type": "cron", "expression": "0 0 1 1 *", **window}}
    good = {"task": NOOP, "schedule": {"type": "now"}}
    assert world.api("POST", "/jobs", bad, headers={"Idempotency-Key": "k"}).status == 422
    # When another request comes with the same key, Then it is taken
    assert world.api("POST", "/jobs", good, headers={"Idempotency-Key": "k"}).status == 201


# ------------------------------------------------------------------------------------------------
# A schedule with no run in the future is refused (422), by POST and by PATCH alike.
# ------------------------------------------------------------------------------------------------
def test_a_patch_to_a_schedule_with_no_future_run_is_refused(world: World) -> None:
    job = world.create(CRON)
    never = {
        "type": "cron",
        "expression": "0 0 1 1 *",
        "end_at": to_rfc3339(world.clock.now() + timedelta(days=1)),
    }
    created = world.api("POST", "/jobs", {"task": NOOP, "schedule": never})
    assert created.status == 422  # "A schedule with no run time in the future is refused (422)."
    before = snapshot(world)
    patched = world.api("PATCH", f"/jobs/{job['id']}", {"schedule": never})
    assert patched.status == 422, (patched.status, patched.body.get("status"))
    assert snapshot(world) == before


# ------------------------------------------------------------------------------------------------
# Content types: JSON in (media types ignore case); anything else 415, in the error shape.
# ------------------------------------------------------------------------------------------------
def test_content_types(world: World) -> None:
    job = world.create(CRON)
    for content_type in ["text/plain", "application/merge-patch+json", "Text/Plain; charset=utf-8"]:
        answer = world.api(
            "PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"Content-Type": content_type}
        )
        assert answer.status == 415
        media_type = content_type.split(";")[0].lower()
        assert answer.body == {
            "message": f"Content-Type {media_type} is not supported: send JSON, with Content-Type: "
            "application/json",
            "field": "header content-type",
        }
    for content_type, raw in [
        ("application/x-www-form-urlencoded", b"name=from-a-form"),
        (
            "multipart/form-data; boundary=b",
            b'--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nfrom-a-form\r\n--b--\r\n',
        ),
    ]:  # (the resolver would parse these as forms)
        answer = world.api("PATCH", f"/jobs/{job['id']}", raw=raw, headers={"Content-Type": content_type})
        assert answer.status == 415, answer.body
    assert world.job(job["id"])["name"] == job["name"]
    # A route that reads no body ignores one, whatever its type (curl -d sends a form)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for method, suffix in [("POST", "/pause"), ("POST", "/resume"), ("GET", ""), ("GET", "/executions")]:
        answer = world.api(method, f"/jobs/{job['id']}{suffix}", raw=b"{}", headers=form)
        assert answer.status == 200, (method, suffix, answer.body)
    # Media types ignore case (RFC 9110 8.3.1)
    answer = world.api(
        "PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"Content-Type": "Application/JSON"}
    )
    assert (answer.status, answer.body["name"]) == (200, "x")


# ------------------------------------------------------------------------------------------------
# A body that is missing or not an object: the field named is `body`.
# ------------------------------------------------------------------------------------------------
def test_a_body_that_is_not_an_object_is_named(world: World) -> None:
    for raw in [b"", b"null", b"[]", b'"job"', b"42"]:
        answer = world.api("POST", "/jobs", raw=raw)
        assert answer.status == 422
        assert answer.body["field"] == "body" and answer.body["message"].startswith("body: "), answer.body


# ------------------------------------------------------------------------------------------------
# Request timestamps are RFC 3339 (with seconds and an offset), not any ISO 8601 form.
# ------------------------------------------------------------------------------------------------
def test_timestamps_that_are_not_rfc3339_are_refused(world: World) -> None:
    for stamp in [
        "2026-W49-2T10:00:00Z",
        "20261201T100000Z",
        "2026-12-01T10Z",
        "2026-12-01T10:00+01",
        "2026-12-01T10:00:00+01:00:30",
    ]:
        answer = world.api("POST", "/schedules/preview", {"schedule": {"type": "at", "at": stamp}})
        assert_bad_input(answer, "schedule.at")
    # (and RFC 3339 as it may be written: lower-case t and z, any fraction, an offset)
    for stamp in ["2027-01-01t10:00:00z", "2027-01-01T10:00:00.123456+01:00", "2027-01-01T10:00:00.5-05:30"]:
        answer = world.api("POST", "/schedules/preview", {"schedule": {"type": "at", "at": stamp}})
        assert answer.status == 200, answer.body


@pytest.mark.parametrize("instant", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_out_of_range_timestamps_are_refused_naming_the_field(world: World, instant: str) -> None:
    # (their UTC instant falls outside what a datetime holds)
    answer = world.api("POST", "/jobs", {"task": NOOP, "schedule": {"type": "at", "at": instant}})
    assert answer.status == 422
    assert "schedule.at" in answer.body["message"]
    preview = world.api(
        "POST", "/schedules/preview", {"schedule": {"type": "rate", "every_seconds": 60, "start_at": instant}}
    )
    assert preview.status == 422


def test_nan_is_not_json(world: World) -> None:
    raw = http_task_raw(b"NaN")
    answer = world.api("POST", "/jobs", raw=raw)
    # NaN is not JSON (RFC 8259 6): taken, the body would become null
    assert_bad_input(answer, "NaN is not a JSON value")
    assert snapshot(world) == []


# ------------------------------------------------------------------------------------------------
# Every action on a job in every status.
# ------------------------------------------------------------------------------------------------
def job_in(world: World, status: str) -> dict[str, Any]:
    if status == "COMPLETED":
        job = world.create({"type": "now"})
        world.drain()
    else:
        job = world.create(CRON)
        if status == "PAUSED":
            world.api("POST", f"/jobs/{job['id']}/pause")
        elif status == "CANCELLED":
            world.api("DELETE", f"/jobs/{job['id']}")
    job = world.job(job["id"])
    assert job["status"] == status
    return job


# (status, method, suffix, body) -> (answer status, job status after) as docs/api.md and its documented choices say
TRANSITIONS = {
    ("ACTIVE", "POST", "/pause", None): (200, "PAUSED"),
    ("ACTIVE", "POST", "/resume", None): (200, "ACTIVE"),
    ("ACTIVE", "POST", "/run", None): (202, "ACTIVE"),
    ("ACTIVE", "PATCH", "", "name"): (200, "ACTIVE"),
    ("ACTIVE", "DELETE", "", None): (200, "CANCELLED"),
    ("PAUSED", "POST", "/pause", None): (200, "PAUSED"),
    ("PAUSED", "POST", "/resume", None): (200, "ACTIVE"),
    ("PAUSED", "POST", "/run", None): (409, "PAUSED"),
    ("PAUSED", "PATCH", "", "name"): (200, "PAUSED"),
    ("PAUSED", "PATCH", "", "schedule"): (200, "PAUSED"),
    ("PAUSED", "DELETE", "", None): (200, "CANCELLED"),
    ("COMPLETED", "POST", "/pause", None): (409, "COMPLETED"),
    ("COMPLETED", "POST", "/resume", None): (409, "COMPLETED"),
    ("COMPLETED", "POST", "/run", None): (202, "COMPLETED"),
    ("COMPLETED", "PATCH", "", "schedule"): (200, "ACTIVE"),
    ("COMPLETED", "DELETE", "", None): (200, "CANCELLED"),
    ("CANCELLED", "POST", "/pause", None): (409, "CANCELLED"),
    ("CANCELLED", "POST", "/resume", None): (409, "CANCELLED"),
    ("CANCELLED", "POST", "/run", None): (409, "CANCELLED"),
    ("CANCELLED", "PATCH", "", "schedule"): (409, "CANCELLED"),
    ("CANCELLED", "DELETE", "", None): (200, "CANCELLED"),
}
BODIES = {
    None: None,
    "name": {"name": "renamed"},
    "schedule": {"schedule": {"type": "rate", "every_seconds": 600}},
}


def test_every_action_in_every_status(world: World) -> None:
    for (status, method, suffix, body), (expected_status, expected_job) in TRANSITIONS.items():
        case = (status, method, suffix, body)
        job = job_in(world, status)
        before = snapshot(world)
        answer = world.api(method, f"/jobs/{job['id']}{suffix}", BODIES[body])
        assert answer.status == expected_status, (case, answer.body)
        assert world.job(job["id"])["status"] == expected_job, case
        if answer.status >= 400:
            assert snapshot(world) == before, case
            assert "message" in answer.body
        elif suffix == "/run":
            assert answer.body["job_id"] == job["id"] and answer.body["manual"] is True
        else:
            assert answer.body["status"] == expected_job, case


def test_a_completed_job_can_be_renamed_and_stays_completed(world: World) -> None:
    # docs/api.md: PATCH changes the name ... -> 200 Job; only a new schedule revives the job
    job = job_in(world, "COMPLETED")
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"name": "renamed"})
    assert answer.status == 200, answer.body
    assert (answer.body["name"], answer.body["status"]) == ("renamed", "COMPLETED")
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_cancelled_job_refuses_every_change_alike(world: World) -> None:
    job = job_in(world, "CANCELLED")
    renamed = world.api("PATCH", f"/jobs/{job['id']}", {"name": "renamed"})
    rescheduled = world.api("PATCH", f"/jobs/{job['id']}", BODIES["schedule"])
    assert (renamed.status, rescheduled.status) == (409, 409)
    assert renamed.body["message"] == rescheduled.body["message"] == "job is CANCELLED and cannot be changed"


# ------------------------------------------------------------------------------------------------
# Listing and cursors.
# ------------------------------------------------------------------------------------------------
def test_list_limits_and_cursors(world: World) -> None:
    ids = []
    for _ in range(3):
        ids.append(world.create(CRON)["id"])
        world.clock.advance(1)
    for query in ["limit=0", "limit=101", "limit=-1", "limit=", "limit=x", "status=", "status=active"]:
        assert_bad_input(world.api("GET", "/jobs", query=query), query.split("=")[0])
    full = world.api("GET", "/jobs", query="limit=100").body
    assert [j["id"] for j in full["items"]] == list(reversed(ids)) and full["next_cursor"] is None
    one = world.api("GET", "/jobs", query="limit=1").body
    cursor = one["next_cursor"]
    assert cursor and [j["id"] for j in one["items"]] == [ids[2]]
    execs_cursor = None
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.run_for(150)
    execs_cursor = world.api("GET", f"/jobs/{job['id']}/executions", query="limit=1").body["next_cursor"]
    assert execs_cursor
    for owner, path, query in [
        ("bob", "/jobs", f"cursor={cursor}"),
        ("alice", "/jobs", f"cursor={execs_cursor}"),
        ("alice", f"/jobs/{ids[0]}/executions", f"cursor={execs_cursor}"),
        ("alice", f"/jobs/{job['id']}/executions", f"cursor={cursor}"),
        ("alice", "/jobs", "cursor=%C3%A9%00"),
        ("alice", "/jobs", "cursor=" + cursor[:-4]),
    ]:
        answer = world.api("GET", path, owner=owner, query=query)
        assert answer.status == 400, (owner, path, query, answer.body)
        assert "items" not in answer.body
    bob_execs = world.api("GET", f"/jobs/{job['id']}/executions", owner="bob", query=f"cursor={execs_cursor}")
    assert bob_execs.status in (400, 404) and "items" not in bob_execs.body


def test_an_altered_or_overlong_cursor_is_400(world: World) -> None:
    for _ in range(3):
        world.create(CRON)
        world.clock.advance(1)
    cursor = world.api("GET", "/jobs", query="limit=1").body["next_cursor"]
    # docs/api.md: "an altered or foreign cursor answers 400"
    padded = world.api("GET", "/jobs", query="cursor=" + cursor + "A" * 5000)  # too long: 422
    junk = world.api("GET", "/jobs", query="cursor=" + cursor[:5] + "." + cursor[5:])  # b64 skips '.': 200
    assert (padded.status, junk.status) == (400, 400), (padded.body, junk.body)


# ------------------------------------------------------------------------------------------------
# Bad input in every field: 400/422 naming the field, nothing stored.
# ------------------------------------------------------------------------------------------------
BAD_CREATE = [
    ({"task": NOOP, "schedule": CRON, "name": ""}, "name"),
    ({"task": NOOP, "schedule": CRON, "name": "x" * 201}, "name"),
    ({"task": NOOP, "schedule": CRON, "name": 5}, "name"),
    ({"task": NOOP, "schedule": CRON, "timeout_seconds": 301}, "timeout_seconds"),
    ({"task": NOOP, "schedule": CRON, "timeout_seconds": 1.5}, "timeout_seconds"),
    ({"task": NOOP, "schedule": CRON, "retry": {"max_attempts": 11}}, "retry.max_attempts"),
    ({"task": NOOP, "schedule": CRON, "retry": {"backoff_seconds": -1}}, "retry.backoff_seconds"),
    ({"task": NOOP, "schedule": CRON, "retry": {"colour": 1}}, "retry.colour"),
    ({"task": NOOP, "schedule": CRON, "retry": []}, "retry"),
    ({"task": "noop", "schedule": CRON}, "task"),
    ({"task": {"type": "noop", "extra": 1}, "schedule": CRON}, "task.extra"),
    ({"task": {"type": "noop", "params": {"x": 1}}, "schedule": CRON}, "task.params.x"),
    ({"task": {"type": "sleep", "params": {"seconds": 901}}, "schedule": CRON}, "task.params.seconds"),
    (
        {
            "task": {"type": "http", "params": {"url": "https://h.example.com", "method": "TRACE"}},
            "schedule": CRON,
        },
        "task.params.method",
    ),
    ({"task": {"type": "http", "params": {"url": "http://10.0.0.1/"}}, "schedule": CRON}, "task.params.url"),
    ({"task": NOOP, "schedule": {**CRON, "colour": 1}}, "schedule.colour"),
    ({"task": NOOP, "schedule": {**CRON, "expression": "0 10 * * * *"}}, "schedule.expression"),
    ({"task": NOOP, "schedule": {**CRON, "expression": "61 10 * * *"}}, "schedule.expression"),
    ({"task": NOOP, "schedule": {**CRON, "timezone": "utc"}}, "schedule.timezone"),
    ({"task": NOOP, "schedule": {**CRON, "start_at": "2026-12-02T00:00:00"}}, "schedule.start_at"),
    (
        {
            "task": NOOP,
            "schedule": {**CRON, "start_at": "2027-01-02T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"},
        },
        "end_at",
    ),
    ({"task": NOOP, "schedule": {"type": "at", "at": 1796000000}}, "schedule.at"),
    ({"task": NOOP, "schedule": {"type": "at", "at": "9999-12-31T00:00:00Z"}}, "schedule.at"),
    ({"task": NOOP, "schedule": {"type": "rate", "every_seconds": 60.5}}, "schedule.every_seconds"),
    ({"task": NOOP, "schedule": {"type": "rate", "every_seconds": 10**12}}, "schedule.every_seconds"),
    ({"task": NOOP, "schedule": {"type": "now", "at": "2026-12-02T00:00:00Z"}}, "schedule.at"),
]


@BOTH_FORMATS
def test_a_bad_create_is_4xx_naming_the_field_and_stores_nothing(world: World) -> None:
    for body, field in BAD_CREATE:
        answer = call(world, "POST", "/jobs", body, headers={"Idempotency-Key": "bad"})
        assert_bad_input(answer, field)
    assert snapshot(world) == []


def test_a_bad_patch_is_4xx_naming_the_field_and_changes_nothing(world: World) -> None:
    job = world.create(CRON)
    before = snapshot(world)
    for body, field in BAD_CREATE:
        if field.startswith(("name", "timeout", "retry", "task", "schedule.")):
            key = field.split(".")[0]
            answer = call(world, "PATCH", f"/jobs/{job['id']}", {key: body[key]})
            assert_bad_input(answer, field)
    assert snapshot(world) == before


def test_preview_bounds(world: World) -> None:
    for count in (0, 51, -1, "x", None):
        assert_bad_input(world.api("POST", "/schedules/preview", {"schedule": CRON, "count": count}), "count")
    assert (
        len(world.api("POST", "/schedules/preview", {"schedule": CRON, "count": 50}).body["next_runs"]) == 50
    )
    assert len(world.api("POST", "/schedules/preview", {"schedule": CRON, "count": 1}).body["next_runs"]) == 1
    assert_bad_input(world.api("POST", "/schedules/preview", {"schedule": CRON, "extra": 1}), "extra")
    assert snapshot(world) == []


def test_ids_that_are_not_jobs_answer_404(world: World) -> None:
    for job_id in ["x" * 3000, "%C3%A9t%C3%A9", "%00", "JOB", "IDEM%23x"]:
        for method, suffix in [("GET", ""), ("GET", "/executions"), ("DELETE", ""), ("POST", "/run")]:
            answer = call(world, method, f"/jobs/{job_id}{suffix}")
            assert answer.status == 404 and "message" in answer.body, (job_id, method, suffix, answer.body)


# ------------------------------------------------------------------------------------------------
# Numbers are JSON numbers: a number sent as a string, or an integer field sent a float (2.0 as
# much as 2.5), is refused by name rather than converted. Float fields take integers.
# ------------------------------------------------------------------------------------------------
SLEEP = {"type": "sleep", "params": {"seconds": 1}}
HOOK = {"type": "http", "params": {"url": "https://hooks.example.com/run"}}
NOT_NUMBERS = [
    ({"timeout_seconds": "60"}, "timeout_seconds"),
    ({"timeout_seconds": 60.0}, "timeout_seconds"),
    ({"timeout_seconds": 6e1}, "timeout_seconds"),
    ({"retry": {"max_attempts": "3"}}, "retry.max_attempts"),
    ({"retry": {"max_attempts": 2.0}}, "retry.max_attempts"),
    ({"retry": {"max_attempts": True}}, "retry.max_attempts"),
    ({"retry": {"backoff_seconds": "2"}}, "retry.backoff_seconds"),
    ({"retry": {"max_backoff_seconds": "300"}}, "retry.max_backoff_seconds"),
    ({"schedule": {"type": "rate", "every_seconds": "600"}}, "schedule.every_seconds"),
    ({"schedule": {"type": "rate", "every_seconds": 600.0}}, "schedule.every_seconds"),
    ({"task": {"type": "sleep", "params": {"seconds": "1"}}}, "task.params.seconds"),
    (
        {"task": {"type": "http", "params": {**HOOK["params"], "timeout_seconds": "5"}}},
        "task.params.timeout_seconds",
    ),
]


@BOTH_FORMATS
def test_numbers_sent_as_strings_or_integers_sent_as_floats_are_refused_by_name(world: World) -> None:
    # Given a job to patch, and what is stored
    job = world.create(CRON)
    before = snapshot(world)
    for change, field in NOT_NUMBERS:
        body = {"task": NOOP, "schedule": CRON, **change}
        # When it is created, in a batch, or patched in / Then 422 naming the field
        for answer, prefix in [
            (call(world, "POST", "/jobs", body), ""),
            (
                call(world, "POST", "/jobs/batch", {"jobs": [{"task": NOOP, "schedule": CRON}, body]}),
                "jobs[1].",
            ),
            (call(world, "PATCH", f"/jobs/{job['id']}", change), ""),
        ]:
            assert answer.status == 422, (change, answer.status, answer.body)
            assert answer.body["field"] == prefix + field, (change, answer.body)
            assert answer.body["message"].startswith(prefix + field), answer.body
    # and nothing was stored or changed
    assert snapshot(world) == before


def test_a_preview_count_must_be_an_integer(world: World) -> None:
    for count in ("5", 5.0, True):
        answer = world.api("POST", "/schedules/preview", {"schedule": CRON, "count": count})
        assert (answer.status, answer.body["field"]) == (422, "count"), answer.body
    rate = {"type": "rate", "every_seconds": "600"}
    answer = world.api("POST", "/schedules/preview", {"schedule": rate})
    assert (answer.status, answer.body["field"]) == (422, "schedule.every_seconds"), answer.body


def test_numbers_as_numbers_are_taken_as_before(world: World) -> None:
    # (integers where floats go; floats with a fraction where floats go)
    body = {
        "task": {"type": "http", "params": {**HOOK["params"], "timeout_seconds": 5}},
        "schedule": {"type": "rate", "every_seconds": 600},
        "retry": {"max_attempts": 4, "backoff_seconds": 1, "max_backoff_seconds": 7.5},
        "timeout_seconds": 30,
    }
    created = world.api("POST", "/jobs", body)
    assert created.status == 201, created.body
    assert created.body["retry"] == {"max_attempts": 4, "backoff_seconds": 1.0, "max_backoff_seconds": 7.5}
    assert created.body["timeout_seconds"] == 30
    sleep = world.api(
        "POST", "/jobs", {"task": {"type": "sleep", "params": {"seconds": 0.5}}, "schedule": CRON}
    )
    assert sleep.status == 201, sleep.body
    assert world.api("POST", "/schedules/preview", {"schedule": CRON, "count": 2}).status == 200


# ------------------------------------------------------------------------------------------------
# A key repeated in one object (json.loads would keep the last) is refused, naming the key.
# ------------------------------------------------------------------------------------------------
REPEATED_KEYS = [
    (b'{"task":{"type":"noop"},"schedule":{"type":"now"},"name":"a","name":"b"}', "name"),
    (b'{"task":{"type":"noop"},"task":{"type":"fail"},"schedule":{"type":"now"}}', "task"),
    (
        b'{"task":{"type":"http","params":{"url":"https://hooks.example.com/a",'
        b'"url":"https://hooks.example.com/b"}},"schedule":{"type":"now"}}',
        "url",
    ),
    (
        b'{"task":{"type":"http","params":{"url":"https://hooks.example.com/a",'
        b'"body":[{"k":1,"k":2}]}},"schedule":{"type":"now"}}',
        "k",
    ),
    (
        b'{"task":{"type":"noop"},"schedule":{"type":"rate","every_seconds":60,"every_seconds":600}}',
        "every_seconds",
    ),
]


@BOTH_FORMATS
def test_a_key_repeated_in_an_object_is_refused_naming_it(world: World) -> None:
    job = world.create(CRON)
    before = snapshot(world)
    for raw, key in REPEATED_KEYS:
        for path, data in [("/jobs", raw), ("/jobs/batch", b'{"jobs":[' + raw + b"]}")]:
            answer = call(world, "POST", path, raw=data, headers={"Idempotency-Key": "dup"})
            assert answer.status == 422, (raw, answer.status, answer.body)
            assert answer.body["field"] == "body"
            assert f'the key "{key}" appears more than once' in answer.body["message"], answer.body
    patched = call(world, "PATCH", f"/jobs/{job['id']}", raw=b'{"name":"a","name":"b"}')
    assert (patched.status, patched.body["field"]) == (422, "body") and '"name"' in patched.body["message"]
    batch = call(world, "POST", "/jobs/batch", raw=b'{"jobs":[],"jobs":[{"task":{"type":"noop"}}]}')
    assert batch.status == 422 and '"jobs"' in batch.body["message"], batch.body
    assert snapshot(world) == before
    # (the same key in different objects is no repetition)
    fine = b'{"task":{"type":"http","params":{"url":"https://hooks.example.com/a","body":{"type":1}}},"schedule":{"type":"now"}}'
    assert call(world, "POST", "/jobs", raw=fine).status == 201


# ------------------------------------------------------------------------------------------------
# A name is plain text: no control characters.
# ------------------------------------------------------------------------------------------------
CONTROL_NAMES = ["a\x00b", "line\nbreak", "tab\there", "\x1b[31mred", "del\x7f", "c1\x85", "\r"]


@BOTH_FORMATS
def test_a_name_with_a_control_character_is_refused(world: World) -> None:
    job = world.create(CRON, name="plain")
    before = snapshot(world)
    for name in CONTROL_NAMES:
        for answer, field in [
            (call(world, "POST", "/jobs", {"task": NOOP, "schedule": CRON, "name": name}), "name"),
            (
                call(
                    world, "POST", "/jobs/batch", {"jobs": [{"task": NOOP, "schedule": CRON, "name": name}]}
                ),
                "jobs[0].name",
            ),
            (call(world, "PATCH", f"/jobs/{job['id']}", {"name": name}), "name"),
        ]:
            assert (answer.status, answer.body["field"]) == (422, field), (name, answer.body)
            assert "control character" in answer.body["message"], answer.body
    assert snapshot(world) == before
    # Other text is a name like any
    for name in ["Café ☕ nightly", "日本語のジョブ", "a b", "\u200bzero-width"]:
        assert call(world, "PATCH", f"/jobs/{job['id']}", {"name": name}).body["name"] == name


# ------------------------------------------------------------------------------------------------
# An Idempotency-Key sent empty is refused (400), not read as no key.
# ------------------------------------------------------------------------------------------------
@BOTH_FORMATS
def test_an_empty_idempotency_key_is_400_and_stores_nothing(world: World) -> None:
    body = {"task": NOOP, "schedule": CRON}
    for key in ["", " ", "\t"]:
        for path, data in [("/jobs", body), ("/jobs/batch", {"jobs": [body]})]:
            answer = call(world, "POST", path, data, headers={"Idempotency-Key": key})
            assert answer.status == 400, (path, repr(key), answer.status, answer.body)
            assert answer.body["field"] == "header idempotency-key", answer.body
            assert "Idempotency-Key is empty" in answer.body["message"]
    too_long = call(world, "POST", "/jobs", body, headers={"Idempotency-Key": "k" * 201})
    assert (too_long.status, too_long.body["field"]) == (400, "header idempotency-key"), too_long.body
    assert snapshot(world) == []
    # and one key of the largest size is a key
    longest = {"Idempotency-Key": "k" * 200}
    first, again = (world.api("POST", "/jobs", body, headers=longest) for _ in range(2))
    assert (first.status, again.body["id"]) == (201, first.body["id"])


# ------------------------------------------------------------------------------------------------
# Webhooks to this machine are refused when the job is created, as far as that is known without
# looking a name up (literal addresses in any spelling, localhost names); run time checks again.
# ------------------------------------------------------------------------------------------------
LOOPBACK_URLS = [
    "http://localhost/",
    "http://LOCALHOST./",
    "http://localhost:8080/hook",
    "http://hooks.localhost/",
    "http://a.b.LocalHost./",
    "http://localhost.localdomain/",
    "http://ip6-localhost/",
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f.0.0.1/",
    "http://2130706433/",
    "http://017700000001/",
    "http://127.0.0.1./",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:0:127.0.0.1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::127.0.0.1]/",
    "http://[::ffff:0:10.0.0.1]/",
    "http://[::169.254.169.254]/",
    "http://0/",
]


@pytest.fixture
def guarded(clock: ManualClock) -> Iterator[World]:
    """A deployment as on AWS: webhooks may reach no private, loopback or link-local network."""
    with mocked_world(clock, webhook_allowed_networks=()) as world:
        yield world


def test_a_webhook_to_this_machine_is_refused_at_creation(guarded: World) -> None:
    job = guarded.create(CRON, task=HOOK)
    before = snapshot(guarded)
    for url in LOOPBACK_URLS:
        task = {"type": "http", "params": {"url": url}}
        for answer, field in [
            (call(guarded, "POST", "/jobs", {"task": task, "schedule": CRON}), "task.params.url"),
            (
                call(guarded, "POST", "/jobs/batch", {"jobs": [{"task": task, "schedule": CRON}]}),
                "jobs[0].task.params.url",
            ),
            (call(guarded, "PATCH", f"/jobs/{job['id']}", {"task": task}), "task.params.url"),
        ]:
            assert (answer.status, answer.body.get("field")) == (422, field), (
                url,
                answer.status,
                answer.body,
            )
    assert snapshot(guarded) == before
    # Names that merely look like it are left to run time
    for url in ["http://localhost.example.com/", "http://mylocalhost/", "http://[::ffff:0:8.8.8.8]/"]:
        task = {"type": "http", "params": {"url": url}}
        assert call(guarded, "POST", "/jobs", {"task": task, "schedule": CRON}).status == 201, url


def test_a_deployment_that_allows_loopback_takes_localhost_webhooks(world: World) -> None:
    # (the test world, like the local stack, allows 127.0.0.0/8: run time would call it, so creation takes it)
    for url in [
        "http://localhost:8080/hook",
        "http://LOCALHOST./",
        "http://hooks.localhost/",
        "http://127.0.0.1/",
    ]:
        task = {"type": "http", "params": {"url": url}}
        answer = call(world, "POST", "/jobs", {"task": task, "schedule": CRON})
        assert answer.status == 201, (url, answer.body)
    # (an IPv4 address is taken in its usual form only, wherever it points: 127.1 is 127.0.0.1 to some
    # readers and a name to others)
    task = {"type": "http", "params": {"url": "http://127.1/"}}
    assert call(world, "POST", "/jobs", {"task": task, "schedule": CRON}).status == 422


# ------------------------------------------------------------------------------------------------
# A cursor signed by this deployment but carrying a key its list could not have returned: 400.
# ------------------------------------------------------------------------------------------------
def test_a_signed_cursor_with_a_malformed_key_is_400(world: World) -> None:
    job = world.create({"type": "cron", "expression": "* * * * *"})
    world.clock.advance(1)
    other = world.create(CRON)
    world.run_for(150)
    cursors = world.punctual.cursors
    jobs_key = {"pk": f"JOB#{job['id']}", "sk": "JOB", "owner_pk": "OWNER#alice", "owner_sk": "1#x"}
    execs_key = {"pk": f"JOB#{job['id']}", "sk": "EXEC#2026-12-01T09:00:00.000Z#x"}
    bad_jobs_keys = [
        {"pk": 5, "sk": "JOB", "owner_pk": "OWNER#alice", "owner_sk": "x"},
        {**jobs_key, "owner_sk": {"S": "x"}},
        {**jobs_key, "owner_sk": ["x"]},
        {**jobs_key, "owner_sk": None},
        {**jobs_key, "owner_sk": ""},
        {**jobs_key, "owner_pk": "OWNER#bob"},
        {**jobs_key, "pk": "IDEM#x"},
        {**jobs_key, "sk": "EXEC#x"},
        {**jobs_key, "extra": "x"},
        {"pk": f"JOB#{job['id']}", "sk": "JOB"},
        {"x": "y"},
    ]
    bad_execs_keys = [
        {**execs_key, "sk": 1},
        {**execs_key, "sk": {"nested": True}},
        {**execs_key, "pk": f"JOB#{other['id']}"},
        {**execs_key, "sk": "JOB"},
        {**execs_key, "owner_pk": "OWNER#alice"},
        {"pk": execs_key["pk"]},
    ]
    for key in bad_jobs_keys:
        for status in ["", "ACTIVE"]:
            cursor = cursors.encode(key, owner="alice", scope=f"jobs:{status}")
            query = f"cursor={cursor}" + (f"&status={status}" if status else "")
            answer = call(world, "GET", "/jobs", query=query)
            assert (answer.status, answer.body.get("field")) == (400, "cursor"), (key, status, answer.body)
    for key in bad_execs_keys:
        cursor = cursors.encode(key, owner="alice", scope=f"executions:{job['id']}")
        answer = call(world, "GET", f"/jobs/{job['id']}/executions", query=f"cursor={cursor}")
        assert (answer.status, answer.body.get("field")) == (400, "cursor"), (key, answer.body)
    # while the cursors the API hands out still page on
    page = world.api("GET", "/jobs", query="limit=1").body
    assert world.api("GET", "/jobs", query=f"limit=1&cursor={page['next_cursor']}").status == 200
    page = world.api("GET", f"/jobs/{job['id']}/executions", query="limit=1").body
    assert page["next_cursor"], page
    follow = world.api("GET", f"/jobs/{job['id']}/executions", query=f"limit=1&cursor={page['next_cursor']}")
    assert follow.status == 200 and follow.body["items"], follow.body


# ------------------------------------------------------------------------------------------------
# DELETE racing the end of a run: the job changes between the request's read and its write.
# ------------------------------------------------------------------------------------------------
def test_a_cancel_racing_the_run_that_completes_the_job_still_cancels_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose run is queued
    job = world.create({"type": "now"})
    real = world.store.jobs.get_with_last_execution
    reads: list[str] = []

    def read_then_run(job_id: str, owner: str | None = None) -> Any:
        found = real(job_id, owner)
        reads.append(found.status.value)
        if len(reads) == 1:
            world.drain()  # the run ends (the job COMPLETED) after DELETE read the job, before it writes
        return found

    monkeypatch.setattr(world.store.jobs, "get_with_last_execution", read_then_run)
    # When it is cancelled meanwhile
    answer = call(world, "DELETE", f"/jobs/{job['id']}")
    # Then the request read the job again and cancelled it: 200, not 409
    assert answer.status == 200, answer.body
    assert answer.body["status"] == "CANCELLED"
    assert reads == ["ACTIVE", "COMPLETED"]
    monkeypatch.undo()
    shown = world.job(job["id"])
    assert shown["status"] == "CANCELLED"
    assert shown["last_execution"]["status"] == "SUCCEEDED"  # the run it raced did run


def test_a_cancel_that_keeps_losing_the_race_gives_up_with_409(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = world.create(CRON)
    before = snapshot(world)
    lost = mock.Mock(side_effect=LostRace("ConditionalCheckFailed"))
    monkeypatch.setattr(world.store.jobs, "update", lost)
    answer = call(world, "DELETE", f"/jobs/{job['id']}")
    assert answer.status == 409 and "changed while this request ran" in answer.body["message"], answer.body
    assert lost.call_count == 3  # bounded
    assert snapshot(world) == before


def test_a_patch_from_a_stale_read_is_409_and_leaves_no_run_behind(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two clients that read the same one-time job
    job = world.create({"type": "at", "at": seconds_ahead(world, 600)})
    stale = world.store.jobs.get_with_last_execution(job["id"])
    first = world.api(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": seconds_ahead(world, 700)}}
    )
    # When the second changes it from its stale read
    monkeypatch.setattr(world.store.jobs, "get_with_last_execution", lambda *_args: stale)
    second = world.api(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": seconds_ahead(world, 800)}}
    )
    monkeypatch.undo()
    world.run_for(900)
    # Then it is refused, and only the first change runs
    assert first.status == 200
    assert second.status == 409
    ran = [e["scheduled_at"] for e in world.executions(job["id"]) if e["status"] == "SUCCEEDED"]
    assert ran == [first.body["next_run_at"]]
