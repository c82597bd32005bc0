"""Bodies at the edges of the contract (docs/api.md): nested too deep, not storable, of another
content type, not an object, with a key repeated or a number in another form. Each answers 4xx with
a message naming the field, and changes nothing stored. A webhook's answer nested too deep to store
as JSON is kept as text.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest

from punctual.api import bodies
from tests.integration.api_edges import (
    BOTH_FORMATS,
    CRON,
    HOOK,
    NOOP,
    assert_bad_input,
    call,
    http_task_raw,
    nested,
    snapshot,
)
from tests.world import World


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
    # JSON in another charset is refused, not read as UTF-8; UTF-8 said so is JSON
    utf16 = {"Content-Type": "application/json; charset=UTF-16"}
    answer = world.api("PATCH", f"/jobs/{job['id']}", raw='{"name":"x"}'.encode("utf-16"), headers=utf16)
    assert (answer.status, answer.body["field"]) == (415, "header content-type"), answer.body
    assert "utf-16" in answer.body["message"]
    assert world.job(job["id"])["name"] == job["name"]
    utf8 = {"Content-Type": 'application/json; charset="utf-8"'}
    assert world.api("PATCH", f"/jobs/{job['id']}", {"name": "y"}, headers=utf8).status == 200
    # A route that reads no body ignores one, whatever its type (curl -d sends a form)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for method, suffix in [("POST", "/pause"), ("POST", "/resume"), ("GET", ""), ("GET", "/executions")]:
        answer = world.api(method, f"/jobs/{job['id']}{suffix}", raw=b"{}", headers=form)
        assert answer.status == 200, (method, suffix, answer.body)
    # and the pause, whose body is optional, drops one of another type, an empty one too, rather than
    # answering 415 (in the validator's shape, without a message)
    for raw in [b"hello", b""]:
        answer = world.api(
            "POST", f"/jobs/{job['id']}/pause", raw=raw, headers={"Content-Type": "text/plain"}
        )
        assert (answer.status, answer.body["status"]) == (200, "PAUSED"), answer.body
        assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    # A route that needs a body answers 415 to another type, an empty one too, with a message
    answer = world.api("POST", "/jobs", raw=b"", headers={"Content-Type": "text/plain"})
    assert (answer.status, answer.body["field"]) == (415, "header content-type"), answer.body
    # A body in a Content-Encoding is refused, not read as it came (415, naming the header), and the
    # pause drops it
    gzip = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers=gzip)
    assert (answer.status, answer.body["field"]) == (415, "header content-encoding"), answer.body
    answer = world.api("POST", f"/jobs/{job['id']}/pause", {"note": "n"}, headers=gzip)
    assert (answer.status, answer.body.get("pause_note")) == (200, None), answer.body
    assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    identity = {"Content-Type": "application/json", "Content-Encoding": "identity"}
    assert world.api("PATCH", f"/jobs/{job['id']}", {"name": "y"}, headers=identity).body["name"] == "y"
    # Media types ignore case (RFC 9110 8.3.1)
    answer = world.api(
        "PATCH", f"/jobs/{job['id']}", {"name": "x"}, headers={"Content-Type": "Application/JSON"}
    )
    assert (answer.status, answer.body["name"]) == (200, "x")


# ------------------------------------------------------------------------------------------------
# A body that is missing or not an object: the field named is `body`.
# ------------------------------------------------------------------------------------------------
def test_an_integer_too_long_to_read_is_refused_in_plain_words(world: World) -> None:
    raw = b'{"task": {"type": "noop"}, "schedule": {"type": "now"}, "timeout_seconds": ' + b"9" * 5000 + b"}"
    answer = world.api("POST", "/jobs", raw=raw)
    assert (answer.status, answer.body["field"]) == (422, "body"), answer.body
    assert "an integer has more than 4300 digits" in answer.body["message"]
    assert "sys." not in answer.body["message"]


def test_minus_zero_is_zero(world: World) -> None:
    # (a backoff of -0.0 was stored and shown back as -0.0; an integer field said "send -0")
    job = world.create(CRON, retry={"max_attempts": 2, "backoff_seconds": -0.0})
    assert json.dumps(job["retry"]["backoff_seconds"]) == "0.0"
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"timeout_seconds": -0.0})
    assert (answer.status, answer.body["field"]) == (422, "timeout_seconds")
    assert "send 0," in answer.body["message"], answer.body


def test_a_body_that_is_not_an_object_is_named(world: World) -> None:
    for raw in [b"", b"null", b"[]", b'"job"', b"42"]:
        answer = world.api("POST", "/jobs", raw=raw)
        assert answer.status == 422
        assert answer.body["field"] == "body" and answer.body["message"].startswith("body: "), answer.body


def test_an_array_of_bodies_is_refused_not_read_as_its_first(world: World) -> None:
    # (the validator took an array's first element as the body and dropped the rest without a word)
    job = world.create(CRON)
    before = snapshot(world)
    two = [
        {"task": NOOP, "schedule": CRON, "name": "first"},
        {"task": NOOP, "schedule": CRON, "name": "second"},
    ]
    for method, path, body in [
        ("POST", "/jobs", two),
        ("POST", "/jobs", [two[0], 1]),
        ("PATCH", f"/jobs/{job['id']}", [{"name": "patched"}, {"name": "second"}]),
        ("POST", f"/jobs/{job['id']}/pause", [{"note": "from an array"}]),
        ("POST", "/schedules/preview", [{"schedule": CRON}]),
        ("POST", "/tasks", [{"name": "ping", "type": "noop"}]),
        ("POST", "/dead-letters/redrive", [{"all": True}]),
    ]:
        answer = world.api(method, path, body)
        assert answer.status == 422, (path, answer.body)
        assert answer.body["field"] == "body", answer.body
        assert answer.body["message"] == "body: the body must be a JSON object, not an array", answer.body
    assert snapshot(world) == before


# ------------------------------------------------------------------------------------------------
# Numbers are JSON numbers: a number sent as a string, or an integer field sent a float (2.0 as
# much as 2.5), is refused by name rather than converted. Float fields take integers.
# ------------------------------------------------------------------------------------------------


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
# Size: a body no route but the batch could take is refused unread; a cheap large one fast.
# ------------------------------------------------------------------------------------------------
def test_a_body_over_a_mebibyte_is_refused_before_it_is_parsed(world: World) -> None:
    call(world, "POST", "/jobs/batch", {"jobs": []})  # (the API's first request builds what it keeps)
    before = snapshot(world)
    # (millions of tiny values: seconds of CPU to parse and walk, were it read)
    body = b'{"task":{"type":"noop"},"schedule":{"type":"now"},"x":[' + b",".join([b"[]"] * 400_000) + b"]}"
    started = time.thread_time()
    answer = call(world, "POST", "/jobs", raw=body)
    spent = time.thread_time() - started
    assert answer.status == 413, answer.body
    assert answer.body["field"] == "body" and "POST /jobs/batch" in answer.body["message"]
    assert spent < 0.2, spent
    assert snapshot(world) == before


def test_a_body_of_many_tiny_values_is_refused_at_about_its_parse_cost(world: World) -> None:
    # A batch may be 10 MB: 150,000 empty arrays where 100 jobs belong, refused at its parse's cost
    # (an emoji as json.dumps writes it, a pair of surrogate escapes, reads no string but its own)
    body = b'{"jobs":[' + b",".join([b"[]"] * 150_000) + b'],"x":"\\ud83d\\ude00"}'
    call(world, "POST", "/jobs/batch", {"jobs": []})  # (the API's first request builds what it keeps)
    # (the collector's passes over the worker's whole heap are no cost of the request's: kept out)
    gc.collect()
    gc.disable()
    try:
        started = time.thread_time()
        json.loads(body)
        parse = time.thread_time() - started
        started = time.thread_time()
        answer = call(world, "POST", "/jobs/batch", raw=body)
        spent = time.thread_time() - started
    finally:
        gc.enable()
    assert_bad_input(answer, "jobs")
    # (at a few times what parsing it alone costs: no walk of every value, no message for each)
    assert spent < 2 * parse + 0.05, (spent, parse)
    assert snapshot(world) == []


def test_an_error_quotes_a_huge_key_or_value_by_its_start(world: World) -> None:
    key = "k" * 100_000
    extra = call(world, "POST", "/jobs", {"task": NOOP, "schedule": {"type": "now"}, key: 1})
    zone = call(world, "POST", "/schedules/preview", {"schedule": {**CRON, "timezone": "Z" * 500_000}})
    for answer in (extra, zone):
        assert answer.status == 422, answer.status
        assert len(json.dumps(answer.body)) < 10_000, len(json.dumps(answer.body))
    assert extra.body["message"].startswith("k" * 300 + "… (100,000 characters): ")
    assert extra.body["field"] == "k" * 300 + "… (100,000 characters)"
    assert "characters)" in zone.body["message"]
    assert snapshot(world) == []


def test_a_job_sent_pretty_printed_is_measured_without_its_whitespace(world: World) -> None:
    # A job within every limit, written with an indent that makes it longer than a mebibyte
    job = {
        "task": {"type": "noop"},
        "schedule": {"type": "now"},
        "tags": {f"k{i}": "v" * 200 for i in range(50)},
    }
    text = json.dumps(job, indent=30_000).encode()
    assert len(text) > 1 << 20
    answer = call(world, "POST", "/jobs", raw=text)
    assert answer.status == 201, answer.body


def test_a_batch_over_its_cap_is_refused_before_it_is_parsed(world: World) -> None:
    # Given a batch body just over the batch's cap (3 MiB besides whitespace): millions of tiny values
    call(world, "POST", "/jobs/batch", {"jobs": []})  # (the API's first request builds what it keeps)
    body = b'{"jobs":[' + b",".join([b"[]"] * 1_100_000) + b"]}"
    assert len(body) > bodies.BATCH_BODY_MAX_CHARS
    # When it is posted, with the parser watched
    with mock.patch.object(bodies.json, "loads", wraps=json.loads) as parsed:
        answer = call(world, "POST", "/jobs/batch", raw=body)
    # Then it is refused 413, naming the body and the cap, unread, and nothing is stored
    assert answer.status == 413, answer.body
    assert answer.body["field"] == "body" and f"{bodies.BATCH_BODY_MAX_CHARS:,}" in answer.body["message"]
    assert not [c for c in parsed.call_args_list if len(c.args[0]) > 1000]  # (the answer's alone)
    assert snapshot(world) == []
    # and one just under the cap is read (and refused for what it holds: no jobs there)
    under = b'{"jobs":[' + b",".join([b"[]"] * 1_000_000) + b"]}"
    assert_bad_input(call(world, "POST", "/jobs/batch", raw=under), "jobs")
