"""How the CLI answers errors: the API's refusals and failures exit 1, usage errors 2 without a call,
a refused connection 3; and where it finds its endpoint."""

from __future__ import annotations

import socket

import pytest

from punctual_cli import main as cli
from tests.unit.cli.fake_api import FakeApi, run


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
        # (a key given twice: the API refuses it too, where json.loads would keep the last alone)
        ["jobs", "create", "--task", "http", "--url", "https://example.com", "--body", '{"a": 1, "a": 2}'],
        ["jobs", "create", "--task", "http", "--url", "https://example.com", "--params", '{"a": 1, "a": 2}'],
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
