"""Task types, named tasks, tags and job policies through the CLI, against the API's test double."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from punctual import tasks
from punctual_cli import common
from punctual_cli import main as cli
from tests.unit.cli.fake_api import FakeApi, job, run

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


def test_tasks_update_amends_the_task_as_read_on_condition_that_it_is_still_so_and_again_if_not(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a task whose defaults someone else changes between the update's read and its write
    base = {"name": "hook", "type": "http", "tags": {}, "created_at": None, "updated_at": None}
    api.answer("GET", "/tasks/hook", {**base, "params": {"url": "https://a.example"}, "version": 4})
    api.answer(
        "GET", "/tasks/hook", {**base, "params": {"url": "https://a.example", "method": "PUT"}, "version": 5}
    )
    api.answer("PATCH", "/tasks/hook", {"message": "the task is at version 5, not 4"}, status=412)
    api.answer("PATCH", "/tasks/hook", {**base, "params": {}, "version": 6})
    # When one default parameter is set
    code, _, err = run(api, capsys, "tasks", "update", "hook", "--param", "timeout_seconds=5")
    # Then each PATCH names the version its read saw, and the one made keeps the other change
    assert code == 0, err
    first, second = api.sent("PATCH")
    assert (first.headers["If-Match"], second.headers["If-Match"]) == ('"4"', '"5"')
    assert second.body["params"] == {"url": "https://a.example", "method": "PUT", "timeout_seconds": 5}


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
