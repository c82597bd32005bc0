"""punctual executions, preview and watch against the API's test double: tables, pages, local times,
and watch's end on a final state, a count, a timeout, Ctrl-C or a dropped connection."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from punctual.api.schemas import JobIn, JobPatch, PreviewIn
from punctual_cli import common
from tests.unit.cli.fake_api import DROP, FakeApi, execution, job, run

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

    # Then each change is printed once, in order (the run's end before the job's completion it
    # brings), after the line where the live changes start, and the watch stops by itself
    assert code == 0
    lines = out.splitlines()
    assert "job job-1  ACTIVE" in lines[0]
    assert lines[1].startswith("--- live from ")
    assert "ex-1  new RUNNING" in lines[2]
    assert "RUNNING -> RETRYING" in lines[3] and "attempt 2" in lines[3] and "HTTP 503" in lines[3]
    assert "RETRYING -> SUCCEEDED" in lines[4] and "attempt 3" in lines[4]
    assert "job job-1  ACTIVE -> COMPLETED" in lines[5]
    assert len(lines) == 6
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
