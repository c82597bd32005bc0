"""The CLI against an in-process HTTP test double on 127.0.0.1: what it sends, prints and exits with."""

from __future__ import annotations

import io
import json
import socket
import sys
import threading
import types
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.auth import SigV4Auth as BotocoreSigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from punctual import tasks
from punctual.api.schemas import JobIn, JobPatch, PreviewIn
from punctual.platform.clock import ManualClock
from punctual_cli import common
from punctual_cli import main as cli
from punctual_client.auth import SigV4Auth
from punctual_client.errors import ApiError
from punctual_client.transport import PunctualClient

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
DROP = object()  # an answer that closes the connection without a response


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw_body: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None


class FakeApi:
    """Canned answers per (method, path), consumed in order; the last one repeats."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.routes: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self.url = ""

    def answer(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.routes.setdefault((method, path), []).append((status, body))

    def next_answer(self, method: str, path: str) -> tuple[int, Any]:
        answers = self.routes.get((method, path))
        if not answers:
            return 404, {"message": f"no route {method} {path}"}
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def sent(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]


def _handler_for(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.requests.append(
                Recorded(
                    self.command, parts.path, urllib.parse.parse_qs(parts.query), dict(self.headers), raw
                )
            )
            status, body = api.next_answer(self.command, parts.path)
            if body is DROP:
                self.close_connection = True
                return
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    for variable in ("PUNCTUAL_ENDPOINT", "PUNCTUAL_PORT", "PUNCTUAL_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(common, "clock", ManualClock(NOW))
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


def run(api: FakeApi, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--endpoint", api.url, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def job(job_id: str = "job-1", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": job_id,
        "name": "nightly-report",
        "status": "ACTIVE",
        "task": {"type": "http", "params": {"url": "https://example.com/hook", "method": "POST"}},
        "schedule": {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"},
        "retry": {"max_attempts": 3, "backoff_seconds": 2, "max_backoff_seconds": 300},
        "timeout_seconds": 60,
        "next_run_at": "2026-06-02T08:00:00.000Z",
        "created_at": "2026-06-01T11:00:00.000Z",
        "updated_at": "2026-06-01T11:00:00.000Z",
        "last_execution": None,
    }
    return base | overrides


def execution(execution_id: str, status: str, attempts: int = 1, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": execution_id,
        "job_id": "job-1",
        "scheduled_at": "2026-06-01T12:00:00.000Z",
        "status": status,
        "attempts": attempts,
        "started_at": None,
        "finished_at": None,
        "lateness_ms": 12,
        "error": None,
        "result": None,
    }
    return base | overrides


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


def test_api_validation_error_prints_message_and_fields_and_exits_1(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the API rejects the schedule
    api.answer(
        "POST",
        "/jobs",
        {
            "message": "schedule.every_seconds: must be >= 60",
            "field": "schedule.every_seconds",
            "errors": [
                {"field": "schedule.every_seconds", "message": "must be >= 60", "type": "greater_than_equal"},
                {"field": "timeout_seconds", "message": "must be <= 900", "type": "less_than_equal"},
            ],
        },
        status=422,
    )

    # When a rate job is created that the API refuses (a period this CLI passes on as it is)
    code, out, err = run(api, capsys, "jobs", "create", "--every", "2m", "--task", "noop")

    # Then the API's message and the field are on stderr, and the exit code is 1
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        "punctual: error: schedule.every_seconds: must be >= 60 (HTTP 422)",
        "  - timeout_seconds: must be <= 900",
    ]


def test_server_error_with_a_text_body_exits_1(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API fails with a plain-text body
    api.answer("GET", "/jobs/job-1", "Internal Server Error", status=500)

    # When the job is fetched
    code, _, err = run(api, capsys, "jobs", "get", "job-1")

    # Then the text is shown and the exit code is 1
    assert code == 1
    assert "Internal Server Error (HTTP 500)" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "create", "--task", "noop", "--tz", "Europe/Paris"],
        ["jobs", "create", "--task", "noop", "--at", "2026-12-01T10:00:00"],
        ["jobs", "create", "--task", "noop", "--in", "soon"],
        [
            "jobs",
            "create",
            "--task",
            "noop",
            "--at",
            "2026-12-01T10:00:00Z",
            "--end-at",
            "2026-12-02T00:00:00Z",
        ],
        ["jobs", "create", "--task", "noop", "--url", "https://example.com"],
        ["jobs", "create", "--task", "http", "--url", "https://example.com", "--body", "{not json"],
        ["jobs", "create", "--task", "noop", "--seconds", "3"],
        ["jobs", "create", "--now"],
        ["jobs", "create", "--task", "noop", "--now", "--every", "5m"],
        ["jobs", "list", "--status", "SLEEPING"],
        ["jobs", "update", "job-1"],
        ["jobs"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2_without_calling_the_api(
    api: FakeApi, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # When the command line makes no sense
    code, _, err = run(api, capsys, *argv)

    # Then the exit code is 2, something explains why, and nothing was sent
    assert code == 2
    assert "error" in err
    assert api.requests == []


def test_connection_refused_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given nothing listens on a loopback port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("PUNCTUAL_PORT", str(port))
    monkeypatch.delenv("PUNCTUAL_ENDPOINT", raising=False)

    # When the CLI calls the default endpoint
    code = cli.main(["jobs", "list"])

    # Then it says it cannot reach that port and exits 3
    err = capsys.readouterr().err
    assert code == 3
    assert f"127.0.0.1:{port}" in err
    assert "punctual local" in err


def test_endpoint_comes_from_the_environment(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given PUNCTUAL_ENDPOINT names the test double
    monkeypatch.setenv("PUNCTUAL_ENDPOINT", api.url)
    api.answer("GET", "/jobs", {"items": [], "next_cursor": None})

    # When no --endpoint is given
    code = cli.main(["jobs", "list"])

    # Then the request reached it
    assert code == 0
    assert [r.path for r in api.sent()] == ["/jobs"]
    assert capsys.readouterr().out.strip() == "no jobs"


# -- jobs list, get, update and actions ----------------------------------------------------------------


def test_list_prints_an_aligned_table(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two jobs, one with a last execution
    api.answer(
        "GET",
        "/jobs",
        {
            "items": [
                job("job-1", last_execution=execution("ex-1", "SUCCEEDED")),
                job("job-two-longer", name="ping", schedule={"type": "rate", "every_seconds": 5400},
                    status="PAUSED", next_run_at=None),
            ],
            "next_cursor": None,
        },
    )  # fmt: skip

    # When the jobs are listed with a status filter in lower case
    code, out, _ = run(api, capsys, "jobs", "list", "--status", "active", "--limit", "10")

    # Then the query carries the filter and the rows line up under the headers
    assert code == 0
    assert api.sent()[0].query == {"status": ["ACTIVE"], "limit": ["10"]}
    header, first, second = out.splitlines()
    for column in ("NAME", "STATUS", "SCHEDULE", "NEXT RUN", "OUTCOME"):
        position = header.index(column)
        assert first[position - 2 : position] == "  "
        assert second[position - 2 : position] == "  "
    assert first.split()[:3] == ["job-1", "nightly-report", "ACTIVE"]
    assert "2026-06-02 08:00:00Z" in first and first.endswith("SUCCEEDED")
    assert "every 1h30m" in second and second.rstrip().endswith("-")


def test_list_all_follows_next_cursor(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two pages of jobs
    api.answer("GET", "/jobs", {"items": [job("job-1"), job("job-2")], "next_cursor": "page-2"})
    api.answer("GET", "/jobs", {"items": [job("job-3")], "next_cursor": None})

    # When all jobs are listed as JSON
    code, out, _ = run(api, capsys, "--json", "jobs", "list", "--all", "--limit", "2")

    # Then the second request carries the cursor and the output holds every job
    assert code == 0
    first, second = api.sent()
    assert first.query == {"limit": ["2"]}
    assert second.query == {"limit": ["2"], "cursor": ["page-2"]}
    printed = json.loads(out)
    assert [item["id"] for item in printed["items"]] == ["job-1", "job-2", "job-3"]
    assert printed["next_cursor"] is None


def test_list_one_page_tells_people_how_to_get_more(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a page with more after it
    api.answer("GET", "/jobs", {"items": [job("job-1")], "next_cursor": "abc"})

    # When one page is listed
    code, _, err = run(api, capsys, "jobs", "list")

    # Then stderr says how to continue, without the cursor (hundreds of characters; --json has it)
    assert code == 0
    assert "--all" in err and "--cursor" in err and "--json" in err and "abc" not in err


def test_get_prints_details_and_quotes_the_id(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a job whose id needs quoting in a path
    api.answer(
        "GET", "/jobs/a%2Fb", job("a/b", last_execution=execution("ex-1", "FAILED", 3, error="HTTP 500"))
    )

    # When it is fetched
    code, out, _ = run(api, capsys, "jobs", "get", "a/b")

    # Then the path is quoted and the details show task, retry and the last execution
    assert code == 0
    assert api.sent()[0].path == "/jobs/a%2Fb"
    assert "http POST https://example.com/hook" in out
    assert "3 attempts, backoff 2s, max 5m" in out
    assert "FAILED" in out and "HTTP 500" in out


def test_update_amends_retry_and_task_params_of_the_current_job(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job with a full retry policy and an http task
    api.answer("GET", "/jobs/job-1", job())
    api.answer("PATCH", "/jobs/job-1", job())

    # When only max attempts and the URL change
    code, _, _ = run(
        api, capsys, "jobs", "update", "job-1", "--max-attempts", "7", "--url", "https://example.com/v2"
    )

    # Then the PATCH keeps the other retry settings and task parameters
    assert code == 0
    assert [r.method for r in api.sent()] == ["GET", "PATCH"]
    assert api.sent("PATCH")[0].body == {
        "task": {"type": "http", "params": {"url": "https://example.com/v2", "method": "POST"}},
        "retry": {"max_attempts": 7, "backoff_seconds": 2, "max_backoff_seconds": 300},
    }


def test_update_schedule_and_name_sends_only_those(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API updates jobs
    api.answer("PATCH", "/jobs/job-1", job())

    # When the job is rescheduled to a fixed time and renamed
    code, _, _ = run(
        api, capsys, "jobs", "update", "job-1", "--at", "2026-12-01T10:00:00+01:00", "--name", "later"
    )

    # Then one PATCH carries exactly those changes
    assert code == 0
    [request] = api.sent()
    assert request.body == {"name": "later", "schedule": {"type": "at", "at": "2026-12-01T10:00:00+01:00"}}


def test_update_with_a_new_task_type_replaces_the_task(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the API updates jobs
    api.answer("PATCH", "/jobs/job-1", job())

    # When the task is replaced with generic params
    code, _, _ = run(
        api, capsys, "jobs", "update", "job-1", "--task", "lambda",
        "--params", '{"a": 1, "b": "x"}', "--param", "b=2", "--param", "c=text",
    )  # fmt: skip

    # Then the job is not fetched and --param wins over --params, parsed as JSON where it can be
    assert code == 0
    [request] = api.sent()
    assert request.body == {"task": {"type": "lambda", "params": {"a": 1, "b": 2, "c": "text"}}}


@pytest.mark.parametrize(
    ("action", "method", "path", "status"),
    [
        ("cancel", "DELETE", "/jobs/job-1", "CANCELLED"),
        ("pause", "POST", "/jobs/job-1/pause", "PAUSED"),
        ("resume", "POST", "/jobs/job-1/resume", "ACTIVE"),
    ],
)
def test_state_actions_call_their_endpoint_and_show_the_job(
    api: FakeApi, capsys: pytest.CaptureFixture[str], action: str, method: str, path: str, status: str
) -> None:
    # Given the API answers the job in its new state
    api.answer(method, path, job(status=status))

    # When the action runs
    code, out, _ = run(api, capsys, "jobs", action, "job-1")

    # Then it called that endpoint without a body and shows the new status
    assert code == 0
    [request] = api.sent()
    assert (request.method, request.path, request.raw_body) == (method, path, b"")
    assert out.splitlines()[0].startswith("ID")
    assert status in out.splitlines()[1]


def test_not_found_prints_the_api_message(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given another owner's job answers 404
    api.answer("DELETE", "/jobs/theirs", {"message": "job not found"}, status=404)

    # When it is cancelled
    code, _, err = run(api, capsys, "jobs", "cancel", "theirs")

    # Then the message is shown and the exit code is 1
    assert code == 1
    assert "job not found (HTTP 404)" in err


def test_run_shows_the_new_execution(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API accepts an extra run
    api.answer("POST", "/jobs/job-1/run", execution("ex-9", "QUEUED"), status=202)

    # When the job is run now
    code, out, _ = run(api, capsys, "jobs", "run", "job-1")

    # Then the execution is shown in a table
    assert code == 0
    assert api.sent()[0].path == "/jobs/job-1/run"
    assert out.splitlines()[1].split()[:2] == ["ex-9", "QUEUED"]


# -- executions and preview ----------------------------------------------------------------------------


def test_executions_table_and_pagination(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two pages of executions
    api.answer(
        "GET",
        "/jobs/job-1/executions",
        {
            "items": [execution("ex-2", "FAILED", 3, error="HTTP 503 from https://example.com")],
            "next_cursor": "n",
        },
    )
    api.answer(
        "GET",
        "/jobs/job-1/executions",
        {"items": [execution("ex-1", "SUCCEEDED", lateness_ms=1500)], "next_cursor": None},
    )

    # When all of them are listed
    code, out, _ = run(api, capsys, "executions", "job-1", "--all")

    # Then both pages are fetched and shown with attempts, lateness and error
    assert code == 0
    assert [r.query.get("cursor") for r in api.sent()] == [None, ["n"]]
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["ID", "STATUS"]
    assert lines[1].split()[:2] == ["ex-2", "FAILED"] and "HTTP 503" in lines[1]
    assert lines[2].split()[:2] == ["ex-1", "SUCCEEDED"] and "1.5s" in lines[2]


def test_preview_posts_the_schedule_and_shows_local_times(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the API previews two runs
    runs = ["2026-12-01T09:00:00.000Z", "2026-12-02T09:00:00.000Z"]
    api.answer("POST", "/schedules/preview", {"next_runs": runs})

    # When a cron schedule in Paris is previewed
    code, out, _ = run(api, capsys, "preview", "--cron", "0 10 * * *", "--tz", "Europe/Paris", "--count", "2")

    # Then the body is the schedule and count, and each run shows its Paris wall-clock time
    assert code == 0
    assert api.sent()[0].body == {
        "schedule": {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"},
        "count": 2,
    }
    assert out.splitlines() == [
        "2026-12-01 10:00:00 CET (2026-12-01 09:00:00Z)",
        "2026-12-02 10:00:00 CET (2026-12-02 09:00:00Z)",
    ]


def test_the_cli_sends_integers_as_json_integers(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # The API refuses a number sent as a string, and an integer field sent a float (2.0): every body
    # the CLI sends must pass the API's own models, whatever the flags' spellings.
    stored = job(retry={"max_attempts": 3, "backoff_seconds": 2.0, "max_backoff_seconds": 300.0})
    api.answer("POST", "/jobs", stored, status=201)
    api.answer("GET", "/jobs/job-1", stored)
    api.answer("PATCH", "/jobs/job-1", stored)
    api.answer("POST", "/schedules/preview", {"next_runs": []})
    commands = [
        ["jobs", "create", "--every", "1h30m", "--task", "sleep", "--seconds", "3", "--max-attempts", "5",
         "--backoff", "90", "--max-backoff", "1h", "--timeout", "2m"],
        ["jobs", "update", "job-1", "--max-attempts", "7", "--timeout", "45", "--every", "10m",
         "--param", "timeout_seconds=5"],
        ["preview", "--every", "2d", "--count", "3"],
    ]  # fmt: skip
    for argv in commands:
        assert run(api, capsys, *argv)[0] == 0, argv
    [create, preview] = api.sent("POST")
    [patch] = api.sent("PATCH")
    JobIn.model_validate(create.body)
    JobPatch.model_validate(patch.body)
    PreviewIn.model_validate(preview.body)
    assert type(create.body["timeout_seconds"]) is int and create.body["timeout_seconds"] == 120
    assert type(create.body["schedule"]["every_seconds"]) is int
    assert type(create.body["retry"]["max_attempts"]) is int
    assert type(patch.body["retry"]["max_attempts"]) is int and type(patch.body["timeout_seconds"]) is int
    assert type(preview.body["count"]) is int


# -- watch -----------------------------------------------------------------------------------------------


def test_watch_prints_new_executions_and_changes_until_final(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a one-time job whose execution retries twice then succeeds, seen over five polls
    for status in ("ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "COMPLETED"):
        api.answer("GET", "/jobs/job-1", job(status=status))
    for items in (
        [],
        [execution("ex-1", "RUNNING")],
        [execution("ex-1", "RETRYING", 2, error="HTTP 503")],
        [execution("ex-1", "RETRYING", 2, error="HTTP 503")],
        [execution("ex-1", "SUCCEEDED", 3)],
    ):
        api.answer("GET", "/jobs/job-1/executions", {"items": items, "next_cursor": None})

    # When the job is watched until it is final
    code, out, _ = run(api, capsys, "watch", "job-1", "--until-final", "--interval", "1")

    # Then each change is printed once, in order, and the watch stops by itself
    assert code == 0
    lines = out.splitlines()
    assert "job job-1  ACTIVE" in lines[0]
    assert "ex-1  new RUNNING" in lines[1]
    assert "RUNNING -> RETRYING" in lines[2] and "attempt 2" in lines[2] and "HTTP 503" in lines[2]
    assert "job job-1  ACTIVE -> COMPLETED" in lines[3]
    assert "RETRYING -> SUCCEEDED" in lines[4] and "attempt 3" in lines[4]
    assert len(lines) == 5
    assert len(api.sent("GET")) == 10
    # And the polls were spaced by the interval on the injected clock
    assert common.clock.now() == datetime(2026, 6, 1, 12, 0, 4, tzinfo=UTC)


def test_watch_count_stops_after_n_finished_executions_as_json_lines(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a recurring job whose second execution finishes on the second poll
    api.answer("GET", "/jobs/job-1", job())
    api.answer(
        "GET",
        "/jobs/job-1/executions",
        {"items": [execution("ex-2", "RUNNING"), execution("ex-1", "SUCCEEDED")], "next_cursor": None},
    )
    api.answer(
        "GET",
        "/jobs/job-1/executions",
        {
            "items": [execution("ex-2", "FAILED", error="boom"), execution("ex-1", "SUCCEEDED")],
            "next_cursor": None,
        },
    )

    # When watched for two finished executions with --json
    code, out, _ = run(api, capsys, "--json", "watch", "job-1", "--count", "2")

    # Then each new or changed execution is one JSON line, oldest first
    assert code == 0
    printed = [json.loads(line) for line in out.splitlines()]
    assert [(e["id"], e["status"]) for e in printed] == [
        ("ex-1", "SUCCEEDED"),
        ("ex-2", "RUNNING"),
        ("ex-2", "FAILED"),
    ]


def test_watch_gives_up_after_its_timeout(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a job that never finishes
    api.answer("GET", "/jobs/job-1", job())
    api.answer("GET", "/jobs/job-1/executions", {"items": [], "next_cursor": None})

    # When watched with a 10 s timeout, polling every 2 s
    code, _, err = run(api, capsys, "watch", "job-1", "--until-final", "--interval", "2", "--timeout", "10")

    # Then it polls six times (0..10 s) and exits 1
    assert code == 1
    assert "gave up after 10s" in err
    assert len(api.sent()) == 12


def test_watch_ends_quietly_on_ctrl_c(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a watch whose wait is interrupted by Ctrl-C
    api.answer("GET", "/jobs/job-1", job())
    api.answer("GET", "/jobs/job-1/executions", {"items": [], "next_cursor": None})

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(common.clock, "sleep", interrupt)

    # When watched
    code, _, _ = run(api, capsys, "watch", "job-1")

    # Then it exits 0
    assert code == 0


def test_watch_keeps_going_when_the_connection_drops(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack drops one poll's connection (a restart) between two states of an execution
    api.answer("GET", "/jobs/job-1", job())
    api.answer("GET", "/jobs/job-1", DROP)
    api.answer("GET", "/jobs/job-1", job(status="COMPLETED"))
    api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "RUNNING")], "next_cursor": None}
    )
    api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "SUCCEEDED")], "next_cursor": None}
    )

    # When watched until final
    code, out, err = run(api, capsys, "watch", "job-1", "--until-final")

    # Then the lost poll is reported and the watch still sees the end
    assert code == 0
    assert "retrying" in err
    assert "RUNNING -> SUCCEEDED" in out


def test_watch_of_an_unknown_job_exits_1(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(api, capsys, "watch", "nope", "--count", "1")

    assert code == 1
    assert "no route GET /jobs/nope" in err


# -- signing and the local stack -------------------------------------------------------------------------


def test_sigv4_signature_covers_exactly_what_is_sent(api: FakeApi) -> None:
    # Given a client that signs (pointed at the loopback test double, so nothing leaves the machine)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    client = PunctualClient(api.url, SigV4Auth("eu-west-1", credentials))
    api.answer("POST", "/jobs", job(), status=201)

    # When a job is created with a query-free path and a JSON body
    client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}}, idempotency_key="k1")

    # Then recomputing the signature from the received request gives the one sent
    [request] = api.sent()
    authorization = request.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type", "idempotency-key"} <= set(signed)
    received = {name: value for name, value in request.headers.items() if name.lower() in signed}
    again = AWSRequest(method="POST", url=api.url + "/jobs", data=request.raw_body, headers=received)
    again.context["timestamp"] = request.headers["X-Amz-Date"]
    signer = BotocoreSigV4Auth(credentials, "execute-api", "eu-west-1")
    expected = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
    assert authorization.endswith(f"Signature={expected}")


def test_local_dispatches_to_punctual_local_main(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a punctual_local module
    calls: list[list[str]] = []
    fake = types.ModuleType("punctual_local")

    def local_main(args: list[str]) -> int:
        calls.append(args)
        return 0

    fake.main = local_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "punctual_local", fake)

    # When `punctual local` runs with options of its own
    code = cli.main(["local", "--port", "9000", "--json"])

    # Then they reach punctual_local.main untouched
    assert code == 0
    assert calls == [["--port", "9000", "--json"]]


def test_local_without_the_module_exits_1_with_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given punctual_local cannot be imported
    monkeypatch.setitem(sys.modules, "punctual_local", None)

    # When `punctual local` runs
    code = cli.main(["--json", "local"])

    # Then it says so and exits 1
    assert code == 1
    assert "local stack is not available" in capsys.readouterr().err


def test_api_error_keeps_status_and_body_for_library_users(api: FakeApi) -> None:
    # Given the API answers 409 to a reused idempotency key
    api.answer("POST", "/jobs", {"message": "Idempotency-Key reused with another body"}, status=409)
    client = PunctualClient.from_endpoint(api.url, token="local")

    # When a job is created through the client class
    with pytest.raises(ApiError) as caught:
        client.create_job({"task": {"type": "noop"}, "schedule": {"type": "now"}}, idempotency_key="k")

    # Then the error carries the status and message
    assert caught.value.status == 409
    assert caught.value.message == "Idempotency-Key reused with another body"


# -- task types ----------------------------------------------------------------------------------------


def test_tasks_are_listed_for_people_and_as_json(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API's task types (as GET /tasks answers them)
    items = [
        {"type": t.name, "description": t.description, "params": t.params_model.model_json_schema()}
        for t in tasks.all_types()
    ]
    api.answer("GET", "/tasks", {"items": items})
    # When listed: each type with its parameters, the required ones starred, and what it does
    code, out, _ = run(api, capsys, "tasks")
    assert code == 0
    assert (
        "type:    http\nparams:  url*, method, headers, body, timeout_seconds\ndoes:    Calls a URL." in out
    )
    assert "type:    noop\nparams:  none" in out
    # and with --json, the API's answer as it is
    code, out, _ = run(api, capsys, "--json", "tasks")
    assert code == 0 and json.loads(out) == {"items": items}


def test_a_reader_that_stops_early_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # `punctual ... | head`: the pipe closes before the output is flushed
    def broken(argv: Any) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(cli, "_main", broken)
    redirected: list[tuple[int, int]] = []
    monkeypatch.setattr(cli.os, "dup2", lambda fd, fd2: redirected.append((fd, fd2)))
    monkeypatch.setattr(cli.sys, "stdout", io.StringIO())
    monkeypatch.setattr(cli.sys.stdout, "fileno", lambda: 1, raising=False)
    assert cli.main([]) == common.EXIT_OK
    assert [fd2 for _, fd2 in redirected] == [1]


def test_policy_options_build_the_job_policy() -> None:
    from punctual_cli.job_options import build_policy
    from punctual_cli.main import build_parser

    args = build_parser().parse_args(
        [
            "jobs",
            "create",
            "--task",
            "noop",
            "--cron",
            "* * * * *",
            "--max-lateness",
            "90s",
            "--overlap",
            "skip",
            "--flexible-window",
            "1m",
            "--max-runs",
            "4",
        ]
    )
    assert build_policy(args) == {
        "max_lateness_seconds": 90,
        "overlap": "skip",
        "flexible_window_seconds": 60,
        "max_runs": 4,
    }


# -- named tasks and tags ------------------------------------------------------------------------------


def test_tasks_create_sends_the_definition_and_shows_it(
    api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    # Given a schema in a file and the API answering the definition
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object", "required": ["body"]}')
    answer = {
        "name": "hook", "type": "http", "params": {"url": "https://example.com/h"}, "params_schema": {},
        "retry": None, "timeout_seconds": 30, "description": "d", "tags": {"team": "ops"}, "version": 1,
        "created_at": "2026-12-01T09:00:00.000Z", "updated_at": "2026-12-01T09:00:00.000Z",
    }  # fmt: skip
    api.answer("POST", "/tasks", answer, status=201)
    # When a task is created from the command line
    code, out, _ = run(
        api, capsys, "tasks", "create", "hook", "--type", "http", "--param", "url=https://example.com/h",
        "--schema", f"@{schema}", "--timeout", "30s", "--tag", "team=ops", "--description", "d",
    )  # fmt: skip
    # Then the API got the definition, and people see its version
    assert code == 0, out
    [request] = api.sent()
    assert request.body == {
        "name": "hook",
        "type": "http",
        "params": {"url": "https://example.com/h"},
        "params_schema": {"type": "object", "required": ["body"]},
        "description": "d",
        "tags": {"team": "ops"},
        "timeout_seconds": 30,
    }
    assert "version" in out and "team:ops" in out


def test_jobs_create_with_a_named_task_sends_its_name_and_params(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer(
        "POST", "/jobs", job(task="send-email", params={"to": "a@example.com"}, retry=None), status=201
    )
    code, out, _ = run(
        api, capsys, "jobs", "create", "--task", "send-email", "--param", "to=a@example.com",
        "--tag", "team=billing", "--in", "1m",
    )  # fmt: skip
    assert code == 0, out
    [request] = api.sent()
    assert request.body["task"] == "send-email"
    assert request.body["params"] == {"to": "a@example.com"}
    assert request.body["tags"] == {"team": "billing"}
    assert "send-email (named task)" in out and "the task's" in out
    # (a type's own flags make no sense for a named task)
    code, _, err = run(api, capsys, "jobs", "create", "--task", "send-email", "--url", "https://example.com")
    assert code == common.EXIT_USAGE and "named task" in err


def test_pause_by_tag_follows_the_cursor_until_done(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API pauses the tagged jobs a page at a time
    api.answer("POST", "/jobs/pause", {"changed": [job("job-1")], "failed": [], "next_cursor": "c1"})
    api.answer(
        "POST",
        "/jobs/pause",
        {"changed": [job("job-2")], "failed": [{"id": "job-3", "message": "changed"}], "next_cursor": None},
    )
    # When pausing by tag
    code, out, err = run(api, capsys, "jobs", "pause", "--tag", "team:billing")
    # Then every page was asked for, with the tag and then the cursor, and the failure reported
    requests = api.sent()
    assert [r.query.get("cursor") for r in requests] == [None, ["c1"]]
    assert all(r.query["tag"] == ["team:billing"] for r in requests)
    assert "job-1" in out and "job-2" in out
    assert "job-3" in err and code == common.EXIT_FAILURE
    # and a job id with --tag, or neither, is a usage error
    assert run(api, capsys, "jobs", "pause")[0] == common.EXIT_USAGE
    assert run(api, capsys, "jobs", "pause", "job-1", "--tag", "a:b")[0] == common.EXIT_USAGE


def test_tasks_lists_the_types_and_the_named_tasks(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.answer(
        "GET",
        "/tasks",
        {
            "types": [{"type": "noop", "description": "Succeeds at once.", "params": {}}],
            "items": [{"name": "send-email", "type": "sqs", "version": 3, "tags": {}, "description": "mail"}],
            "next_cursor": None,
        },
    )
    code, out, _ = run(api, capsys, "tasks")
    assert code == 0
    assert "type:    noop" in out
    assert "send-email" in out and "sqs" in out and "3" in out


def test_get_shows_each_policy_the_job_has_instead_of_default(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job created with --pause-after-failures 3 and a single attempt per execution, as the API
    # answers it (every policy field present, the others at their defaults)
    from punctual.domain.policies import JobPolicy

    policy = JobPolicy(pause_after_failures=3).model_dump(mode="json")
    retry = {"max_attempts": 1, "backoff_seconds": 2, "max_backoff_seconds": 300}
    api.answer("GET", "/jobs/job-1", job(policy=policy, retry=retry))

    # When it is fetched
    code, out, _ = run(api, capsys, "jobs", "get", "job-1")

    # Then its policy and its retry say what they are, in words that agree with their numbers
    assert code == 0
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert lines["policy"].strip() == "pause after 3 failures in a row"
    assert lines["retry"].strip() == "1 attempt, backoff 2s, max 5m"


def test_every_job_policy_field_set_shows_in_the_summary() -> None:
    from punctual.domain.policies import JobPolicy
    from punctual_cli.views.jobs import policy_summary

    # Given a value other than its default for every field of the job policy
    changed = {
        "max_lateness_seconds": 60,
        "overlap": "skip",
        "flexible_window_seconds": 30,
        "max_runs": 1,
        "pause_after_failures": 1,
    }
    assert set(changed) == set(JobPolicy.model_fields)
    for field, value in changed.items():
        # When only that field is set, Then the summary shows it rather than "default"
        summary = policy_summary(JobPolicy.model_validate({field: value}).model_dump(mode="json"))
        assert summary != "default", field
    # And all of them together, each in words; a field this CLI does not know is shown as given
    assert policy_summary(JobPolicy.model_validate(changed).model_dump(mode="json")) == (
        "skip if later than 1m, overlap skip, spread over 30s, at most 1 run, pause after 1 failure in a row"
    )
    assert policy_summary({"overlap": "allow", "quiet_hours": "22-6"}) == 'quiet_hours "22-6"'
    assert policy_summary(JobPolicy().model_dump(mode="json")) == "default"
