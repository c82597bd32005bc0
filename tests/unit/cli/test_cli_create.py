"""punctual jobs create and create-batch against the API's test double: what they send and print."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from punctual_cli import common
from tests.unit.cli.fake_api import FakeApi, job, run

# -- jobs create ---------------------------------------------------------------------------------------


def test_create_sends_friendly_flags_as_api_body_with_token_and_idempotency_key(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the API creates jobs
    api.answer("POST", "/jobs", job(), status=201)

    # When a cron http job is created with every option
    code, out, _ = run(
        api, capsys, "--token", "s3cret", "jobs", "create", "--name", "nightly-report",
        "--cron", "0 10 * * *", "--tz", "Europe/Paris", "--start-at", "2026-06-01T00:00:00+02:00",
        "--task", "http", "--url", "https://example.com/hook", "--method", "put",
        "--header", "X-Token=abc", "--header", "X-Env=prod", "--body", '{"report": "daily"}',
        "--max-attempts", "5", "--backoff", "2s", "--max-backoff", "5m", "--timeout", "1m",
        "--idempotency-key", "create-42",
    )  # fmt: skip

    # Then one POST /jobs carries the API's shapes, the bearer token and the key
    assert code == 0
    [request] = api.sent()
    assert (request.method, request.path) == ("POST", "/jobs")
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert request.headers["Idempotency-Key"] == "create-42"
    assert request.headers["Content-Type"] == "application/json"
    assert request.body == {
        "name": "nightly-report",
        "task": {
            "type": "http",
            "params": {
                "url": "https://example.com/hook",
                "method": "PUT",
                "headers": {"X-Token": "abc", "X-Env": "prod"},
                "body": {"report": "daily"},
            },
        },
        "schedule": {
            "type": "cron",
            "expression": "0 10 * * *",
            "timezone": "Europe/Paris",
            "start_at": "2026-06-01T00:00:00+02:00",
        },
        "retry": {"max_attempts": 5, "backoff_seconds": 2, "max_backoff_seconds": 300},
        "timeout_seconds": 60,
    }
    # And people see the job's details
    assert "id:" in out and "job-1" in out
    assert "cron '0 10 * * *' Europe/Paris" in out


def test_create_in_duration_is_the_same_request_when_retried_later(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the API creates jobs
    api.answer("POST", "/jobs", job(), status=201)

    # When a job is created to run in 1h30m, and the same command is retried a minute later
    code, _, _ = run(api, capsys, "jobs", "create", "--in", "1h30m", "--task", "noop")
    common.clock.advance(60)  # type: ignore[attr-defined]
    run(api, capsys, "jobs", "create", "--in", "1h30m", "--task", "noop")

    # Then its schedule is an `in` the API takes at the request, the same body both times (an instant
    # computed here would differ, and the same Idempotency-Key would answer 409), and the default
    # token is sent
    assert code == 0
    first, second = api.sent()
    assert first.body["schedule"] == {"type": "in", "seconds": 5400}
    assert second.body == first.body
    [request] = api.sent()[:1]
    assert request.body["task"] == {"type": "noop", "params": {}}
    assert request.headers["Authorization"] == "Bearer local"
    assert "Idempotency-Key" not in request.headers


def test_create_defaults_to_now_and_takes_the_token_from_the_environment(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given PUNCTUAL_TOKEN is set
    monkeypatch.setenv("PUNCTUAL_TOKEN", "from-env")
    api.answer("POST", "/jobs", job(), status=201)

    # When a sleep job is created without a schedule
    code, _, _ = run(api, capsys, "jobs", "create", "--task", "sleep", "--seconds", "5")

    # Then it runs now with the env token
    assert code == 0
    [request] = api.sent()
    assert request.body == {"task": {"type": "sleep", "params": {"seconds": 5}}, "schedule": {"type": "now"}}
    assert request.headers["Authorization"] == "Bearer from-env"


def test_create_with_json_prints_the_raw_api_answer(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API answers a job
    created = job(schedule={"type": "rate", "every_seconds": 300})
    api.answer("POST", "/jobs", created, status=201)

    # When created with --json (after the command)
    code, out, _ = run(api, capsys, "jobs", "create", "--every", "5m", "--task", "fail", "--json")

    # Then stdout is exactly the API's JSON
    assert code == 0
    assert json.loads(out) == created
    assert api.sent()[0].body["schedule"] == {"type": "rate", "every_seconds": 300}


# -- jobs create-batch ---------------------------------------------------------------------------------


def test_create_batch_posts_the_files_jobs_with_the_key_and_prints_them(
    api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    # Given a batch file and an API that creates the jobs
    jobs = [
        {"name": "a", "task": {"type": "noop"}, "schedule": {"type": "now"}},
        {"name": "b", "task": {"type": "noop"}, "schedule": {"type": "rate", "every_seconds": 300}},
    ]
    path = tmp_path / "batch.json"
    path.write_text(json.dumps({"jobs": jobs}))
    api.answer("POST", "/jobs/batch", {"items": [job("job-1"), job("job-2", name="b")]}, status=201)

    # When it is created with an idempotency key
    code, out, _ = run(api, capsys, "jobs", "create-batch", str(path), "--idempotency-key", "b-1")

    # Then one POST /jobs/batch carries the jobs and the key, and a row per job is printed
    assert code == 0
    [request] = api.sent()
    assert (request.method, request.path) == ("POST", "/jobs/batch")
    assert request.body == {"jobs": jobs}
    assert request.headers["Idempotency-Key"] == "b-1"
    assert "job-1" in out and "job-2" in out


def test_create_batch_reads_a_bare_list_from_stdin_and_prints_json(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [{"task": {"type": "noop"}, "schedule": {"type": "now"}}]
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(read=lambda: json.dumps(jobs)))
    api.answer("POST", "/jobs/batch", {"items": [job()]}, status=201)

    code, out, _ = run(api, capsys, "jobs", "create-batch", "-", "--json")

    assert code == 0
    assert api.sent()[0].body == {"jobs": jobs}
    assert json.loads(out) == {"items": [job()]}


@pytest.mark.parametrize(
    "content", ["{not json", '{"jobs": {}}', '{"jobs": []}', "[1, 2]", json.dumps([{}] * 101), None]
)
def test_create_batch_refuses_a_bad_file_without_calling_the_api(
    api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Any, content: str | None
) -> None:
    path = tmp_path / "batch.json"
    if content is not None:
        path.write_text(content)
    code, _, err = run(api, capsys, "jobs", "create-batch", str(path))
    assert code == 2
    assert "batch.json" in err
    assert api.requests == []


def test_create_batch_shows_the_field_of_the_invalid_job(
    api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([{"task": {"type": "noop"}, "schedule": {"type": "now"}}]))
    message = "jobs[0].task.type: unknown task type 'nope'"
    api.answer("POST", "/jobs/batch", {"message": message, "field": "jobs[0].task.type"}, status=422)
    code, _, err = run(api, capsys, "jobs", "create-batch", str(path))
    assert code == 1
    assert f"punctual: error: {message} (HTTP 422)" in err
