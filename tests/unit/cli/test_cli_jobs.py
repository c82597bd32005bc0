"""punctual jobs list, get, update and the state actions against the API's test double."""

from __future__ import annotations

import io
import json

import pytest

from tests.unit.cli.fake_api import FakeApi, execution, job, run

JOB = "job_1a2b3c4d5e6f70819a2b"  # a whole id, as the API draws them


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
        "GET", "/jobs/a%20b%25", job("a b%", last_execution=execution("ex-1", "FAILED", 3, error="HTTP 500"))
    )

    # When it is fetched
    code, out, _ = run(api, capsys, "jobs", "get", "a b%")

    # Then the path is quoted and the details show task, retry and the last execution
    assert code == 0
    assert api.sent()[0].path == "/jobs/a%20b%25"
    assert "http POST https://example.com/hook" in out
    assert "3 attempts, backoff 2s, max 5m" in out
    assert "FAILED" in out and "HTTP 500" in out


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["jobs", "get", f"{JOB}/executions"], id="a path below the job"),
        pytest.param(["jobs", "get", f"{JOB}?x=1"], id="a query string"),
        pytest.param(["jobs", "get", f"{JOB}#x"], id="a fragment"),
        pytest.param(["jobs", "run", f"{JOB}/../{JOB}"], id="a dot segment between ids"),
        pytest.param(["jobs", "cancel", ".."], id="a dot segment alone"),
        pytest.param(["jobs", "get", ""], id="nothing"),
        pytest.param(["executions", f"{JOB}/run"], id="an action below the job"),
        pytest.param(["jobs", "retry", JOB, f"{JOB}.1/../2"], id="an execution's path"),
        pytest.param(["tasks", "get", "report/x"], id="a task's path"),
    ],
)
def test_an_id_no_path_segment_can_carry_is_refused_before_any_request(
    api: FakeApi, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # Given an API behind an HTTP API, which decodes the path before routing: `%2F` arrives as `/`,
    # so `JOB/executions` would be read as the job's executions however it is encoded
    api.answer("GET", f"/jobs/{JOB}/executions", {"items": [], "next_cursor": None})
    api.answer("GET", f"/jobs/{JOB}", job(JOB))

    # When the id given holds what ends or splits a path segment, or is a dot segment
    code, out, err = run(api, capsys, *argv)

    # Then it is a usage error naming the id, and nothing is sent, let alone shown
    assert code == 2
    assert out == ""
    assert "punctual: error: " in err and "holds '/', '?' or '#'" in err
    assert api.sent() == []


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


def test_update_amends_the_job_as_read_on_condition_that_it_is_still_so_and_again_if_not(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job whose retry policy someone else changes between the update's read and its write
    api.answer("GET", "/jobs/job-1", job(revision=4))
    api.answer("GET", "/jobs/job-1", job(revision=5, retry={"max_attempts": 3, "backoff_seconds": 9}))
    api.answer("PATCH", "/jobs/job-1", {"message": "the job is at revision 5, not 4"}, status=412)
    api.answer("PATCH", "/jobs/job-1", job(revision=6))

    # When only max attempts change
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--max-attempts", "7")

    # Then each PATCH names the revision its read saw, and the one made amends the job as it became:
    # the other change to the backoff is kept, not undone
    assert code == 0, err
    assert [r.method for r in api.sent()] == ["GET", "PATCH", "GET", "PATCH"]
    first, second = api.sent("PATCH")
    assert (first.headers["If-Match"], second.headers["If-Match"]) == ('"4"', '"5"')
    assert second.body == {"retry": {"max_attempts": 7, "backoff_seconds": 9}}


def test_update_started_again_sends_the_secret_read_from_stdin_each_time(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a secret given on stdin, and another change landing between the update's read and write
    secret = "whsec_" + "QUFB" * 8
    monkeypatch.setattr("sys.stdin", io.StringIO(secret + "\n"))
    api.answer("GET", "/jobs/job-1", job(revision=4))
    api.answer("GET", "/jobs/job-1", job(revision=5))
    api.answer("PATCH", "/jobs/job-1", {"message": "the job is at revision 5, not 4"}, status=412)
    api.answer("PATCH", "/jobs/job-1", job(revision=6))
    # When the update sets it with a tag (which reads the job)
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--tag", "a=b", "--signing-secret", "-")
    # Then both attempts send the secret
    assert code == 0, err
    assert [r.body["signing_secret"] for r in api.sent("PATCH")] == [secret, secret]


def test_update_that_keeps_losing_to_other_changes_gives_up_with_the_apis_412(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answer("GET", "/jobs/job-1", job(revision=4))
    api.answer("PATCH", "/jobs/job-1", {"message": "the job is at revision 5, not 4"}, status=412)
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--max-attempts", "7")
    assert code == 1 and "revision 5, not 4" in err
    assert len(api.sent("PATCH")) == 3


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


def test_update_cron_keeps_the_jobs_time_zone(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a cron job in Paris
    api.answer("GET", "/jobs/job-1", job())
    api.answer("PATCH", "/jobs/job-1", job())

    # When only its expression changes
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--cron", "30 9 * * *")

    # Then the new schedule stays in Paris
    assert code == 0, err
    assert api.sent("PATCH")[0].body == {
        "schedule": {"type": "cron", "expression": "30 9 * * *", "timezone": "Europe/Paris"}
    }


def test_update_cron_keeps_the_jobs_window_unless_given(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a cron job in Paris running from June to the end of the year
    windowed = job()
    windowed["schedule"] = {
        **windowed["schedule"],
        "start_at": "2026-06-01T00:00:00.000Z",
        "end_at": "2027-01-01T00:00:00.000Z",
    }
    api.answer("GET", "/jobs/job-1", windowed)
    api.answer("PATCH", "/jobs/job-1", windowed)

    # When its expression changes, and its end with it
    code, _, err = run(
        api, capsys, "jobs", "update", "job-1", "--cron", "30 9 * * *", "--end-at", "2026-12-24T00:00:00Z"
    )

    # Then the schedule keeps its zone and start, and takes the new end
    assert code == 0, err
    assert api.sent("PATCH")[0].body == {
        "schedule": {
            "type": "cron",
            "expression": "30 9 * * *",
            "timezone": "Europe/Paris",
            "start_at": "2026-06-01T00:00:00.000Z",
            "end_at": "2026-12-24T00:00:00Z",
        }
    }


def test_update_tz_alone_moves_a_cron_job_to_the_zone_and_keeps_its_expression_and_window(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a cron job in Paris with a start
    schedule = {
        "type": "cron",
        "expression": "0 10 * * *",
        "timezone": "Europe/Paris",
        "start_at": "2026-06-01T00:00:00.000Z",
        "end_at": None,
    }
    api.answer("GET", "/jobs/job-1", job(schedule=schedule))
    api.answer("PATCH", "/jobs/job-1", job())

    # When only its zone changes
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--tz", "America/New_York")

    # Then the same expression and start are sent in the new zone
    assert code == 0, err
    assert api.sent("PATCH")[0].body == {
        "schedule": {
            "type": "cron",
            "expression": "0 10 * * *",
            "timezone": "America/New_York",
            "start_at": "2026-06-01T00:00:00.000Z",
        }
    }


def test_update_tz_alone_on_a_job_that_is_not_cron_names_its_schedule(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job on a rate schedule
    api.answer("GET", "/jobs/job-1", job(schedule={"type": "rate", "every_seconds": 300}))

    # When only a zone is given
    code, _, err = run(api, capsys, "jobs", "update", "job-1", "--tz", "Europe/Paris")

    # Then it is a usage error that says what the job's schedule is, and nothing is changed
    assert code == 2
    assert "job job-1 has a rate schedule, not cron" in err and "--cron" in err
    assert api.sent("PATCH") == []


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
