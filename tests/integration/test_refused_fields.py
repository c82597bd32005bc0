"""Fields at the edges of the contract (docs/api.md): timestamps, schedules with no future run, bad
values in every field, names with control characters, webhooks to this machine. Each answers 4xx
naming the field, and changes nothing stored.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from tests.integration.api_edges import (
    BOTH_FORMATS,
    CRON,
    HOOK,
    NOOP,
    assert_bad_input,
    call,
    http_task_raw,
    snapshot,
)
from tests.world import World, mocked_world


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
    # and so are Unicode's line and paragraph separators, and a name of spaces alone
    for name, why in [("a\u2028b", "line separator"), ("a\u2029b", "line separator"), ("   ", "only spaces")]:
        answer = call(world, "PATCH", f"/jobs/{job['id']}", {"name": name})
        assert (answer.status, answer.body["field"]) == (422, "name"), (name, answer.body)
        assert why in answer.body["message"], answer.body
    assert snapshot(world) == before
    # Other text is a name like any
    for name in ["Café ☕ nightly", "日本語のジョブ", "a b", " padded ", "\u200bzero-width"]:
        assert call(world, "PATCH", f"/jobs/{job['id']}", {"name": name}).body["name"] == name


def test_an_oversized_text_field_is_refused_by_its_length_at_once(world: World) -> None:
    # (each character was checked for control characters before the length: 0.7 s of CPU a 10 MB name)
    job = world.create(CRON, name="plain")
    before = snapshot(world)
    huge = "x" * 1_000_000  # (a longer body is refused before it is read: test_refused_bodies)
    for method, path, body, field in [
        ("POST", "/jobs", {"task": NOOP, "schedule": CRON, "name": huge}, "name"),
        ("PATCH", f"/jobs/{job['id']}", {"name": huge}, "name"),
        ("POST", f"/jobs/{job['id']}/pause", {"note": huge}, "note"),
        ("POST", "/tasks", {"name": "t", "type": "noop", "description": huge}, "description"),
    ]:
        started = time.process_time()
        answer = call(world, method, path, body)
        assert (answer.status, answer.body["field"]) == (422, field), answer.body
        assert "at most" in answer.body["message"]
        assert time.process_time() - started < 0.5  # (parsing 1 MB of JSON takes some 3 ms)
    assert snapshot(world) == before


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
