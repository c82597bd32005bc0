"""Output that fits: tables and live lines within the terminal's width (COLUMNS honoured), ids shortened
as `git` shortens hashes and taken back shortened, `--json` and `-q` whole."""

from __future__ import annotations

import json

import pytest

from punctual_cli import display, ids
from tests.unit.cli.fake_api import FakeApi, execution, job, run

Capsys = pytest.CaptureFixture[str]

JOB = "job_1a2b3c4d5e6f70819a2b"
SIBLING = "job_1a2b3c4ff00112233445"  # shares its first eight digits with JOB
OTHER = "job_9f8e7d6c5b4a39281706"
# Recurring execution ids as the worker draws them: the job's id, the instant in hex, the version.
RUNS = [f"{JOB}.19aee4{i:05x}.1352885501405796" for i in (0, 0xEA60, 0x1D4C0)]
LONG_ERROR = "HTTP 503 from https://example.com/some/long/path/that/goes/on: Service Unavailable, retry later"


def _jobs() -> list[dict[str, object]]:
    return [
        job(
            JOB,
            name="nightly-report-for-the-finance-team-in-europe",
            outcome={"status": "FAILED", "consecutive_failures": 3},
        ),
        job(SIBLING, name="ping", schedule={"type": "rate", "every_seconds": 5400}, status="PAUSED"),
        job(
            OTHER, name="once", schedule={"type": "at", "at": "2026-12-07T08:00:00.000Z"}, status="COMPLETED"
        ),
    ]


def _runs() -> list[dict[str, object]]:
    return [
        execution(
            run_id,
            "FAILED",
            3,
            job_id=JOB,
            error=LONG_ERROR,
            started_at="2026-06-01T12:00:00.010Z",
            finished_at="2026-06-01T12:00:03.010Z",
        )
        for run_id in RUNS
    ]


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_jobs_list_fits_the_terminal_with_ids_shortened_as_git_does(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, columns: int, zone: str
) -> None:
    # Given three jobs with long names, two of whose ids share their first eight digits
    cli_api.answer("GET", "/jobs", {"items": _jobs(), "next_cursor": "c" * 300})
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("PUNCTUAL_DISPLAY_ZONE", zone)

    # When they are listed
    code, out, err = run(cli_api, capsys, "jobs", "list")

    # Then no line is wider than the terminal, nothing wraps, and each id is its shortest unique prefix
    # of at least seven digits
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4 and all(len(line) <= columns for line in lines), out
    assert [line.split()[0] for line in lines[1:]] == ["job_1a2b3c4d", "job_1a2b3c4f", "job_9f8e7d6"]
    assert all(status in out for status in ("ACTIVE", "PAUSED", "COMPLETED"))
    # and the hint for more fits too, without the cursor
    assert "c" * 40 not in err and all(len(line) <= columns for line in err.splitlines())


def test_a_wider_terminal_shows_more_and_a_file_keeps_every_character(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the same jobs
    cli_api.answer("GET", "/jobs", {"items": _jobs(), "next_cursor": None})

    # When they are listed at 80 columns, at 100, and to a file (no COLUMNS, no terminal)
    shown = {}
    for columns in ("80", "100", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS")
        else:
            monkeypatch.setenv("COLUMNS", columns)
        shown[columns] = run(cli_api, capsys, "jobs", "list")[1]

    # Then the wider terminal gets the outcome column the narrow one left out, and the file the whole name
    assert "OUTCOME" not in shown["80"] and "OUTCOME" in shown["100"]
    assert "nightly-report-for-the-finance-team-in-europe" not in shown["100"]
    assert "FAILED (3 in a row)" in shown[None]
    assert max(len(line) for line in shown[None].splitlines()) > 100


@pytest.mark.parametrize("columns", [80, 100])
def test_executions_of_recurring_jobs_fit_and_show_what_their_ids_add_to_the_jobs(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    # Given a recurring job's executions, whose ids run to fifty characters
    cli_api.answer("GET", f"/jobs/{JOB}/executions", {"items": _runs(), "next_cursor": None})
    monkeypatch.setenv("COLUMNS", str(columns))

    # When they are listed, for people and then as JSON and as ids
    code, out, _ = run(cli_api, capsys, "executions", JOB)
    as_json = json.loads(run(cli_api, capsys, "--json", "executions", JOB)[1])
    quiet = run(cli_api, capsys, "-q", "executions", JOB)[1]

    # Then each line fits, the ids are the occurrence's instant, and the error is cut, not wrapped
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), out
    assert [line.split()[0] for line in lines[1:]] == ["19aee400000", "19aee40ea60", "19aee41d4c0"]
    assert "HTTP 503" in lines[1] and "…" in lines[1]
    # and JSON and -q keep the whole ids and the whole error
    assert [item["id"] for item in as_json["items"]] == RUNS
    assert as_json["items"][0]["error"] == LONG_ERROR
    assert quiet.split() == RUNS


def test_a_shortened_job_id_names_the_job_it_starts_and_an_ambiguous_one_is_refused(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given three jobs, two of which start job_1a2b3c4
    cli_api.answer("GET", "/jobs", {"items": _jobs(), "next_cursor": None})
    cli_api.answer("GET", f"/jobs/{JOB}", _jobs()[0])

    # When one is asked for by the id the table shows, then by a prefix two share
    code, out, _ = run(cli_api, capsys, "jobs", "get", "job_1a2b3c4d")
    asked = cli_api.sent()[-1].path
    ambiguous, _, err = run(cli_api, capsys, "jobs", "get", "job_1a2b3c4")

    # Then the first is the job itself, the second a usage error naming both
    assert code == 0 and JOB in out
    assert asked == f"/jobs/{JOB}"
    assert ambiguous == 2 and JOB in err and SIBLING in err


def test_a_shortened_execution_id_is_retried_by_its_whole_id(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given a job's executions
    cli_api.answer("GET", f"/jobs/{JOB}/executions", {"items": _runs(), "next_cursor": None})
    cli_api.answer("POST", f"/jobs/{JOB}/executions/{RUNS[1]}/retry", _runs()[1], status=202)

    # When the second is retried by the id `executions` shows
    code, _, err = run(cli_api, capsys, "jobs", "retry", JOB, "19aee40ea60")

    # Then the retry is asked for by its whole id
    assert code == 0, err
    assert cli_api.sent("POST")[0].path == f"/jobs/{JOB}/executions/{RUNS[1]}/retry"


def test_a_shortened_job_id_a_table_showed_is_taken_back_without_reading_the_list(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given a job list shown as a table, then a list grown so that the job is past its 1,000 newest
    cli_api.answer("GET", "/jobs", {"items": _jobs(), "next_cursor": None})
    cli_api.answer("GET", f"/jobs/{OTHER}", _jobs()[2])
    listed = run(cli_api, capsys, "jobs", "list")[1]
    cli_api.routes[("GET", "/jobs")] = [
        (200, {"items": [job(_id(n)) for n in range(100)], "next_cursor": "more"})
    ]
    cli_api.requests.clear()

    # When the job is asked for by the id the table showed
    code, _, err = run(cli_api, capsys, "jobs", "get", "job_9f8e7d6")

    # Then it is read by its whole id, with no page of the list read
    assert "job_9f8e7d6 " in listed
    assert code == 0, err
    assert [r.path for r in cli_api.sent()] == [f"/jobs/{OTHER}"]


def test_a_shortened_id_shorter_than_the_tables_show_is_checked_against_the_store_too(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given a table that showed one job starting job_1a2b, and a store holding another so starting
    cli_api.answer("GET", "/jobs", {"items": [_jobs()[0]], "next_cursor": None})
    run(cli_api, capsys, "jobs", "list")
    cli_api.routes[("GET", "/jobs")] = [(200, {"items": _jobs(), "next_cursor": None})]

    # When the job is asked for by four digits only
    code, _, err = run(cli_api, capsys, "jobs", "get", "job_1a2b")

    # Then it is ambiguous, naming both, not the one shown taken for granted
    assert code == 2 and JOB in err and SIBLING in err


def test_a_shortened_job_id_never_shown_reads_at_most_the_1000_newest_jobs(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given an owner with more jobs than can be read to take a shortened id back (every page full)
    page = {"items": [job(_id(n)) for n in range(100)], "next_cursor": "more"}
    cli_api.answer("GET", "/jobs", page)

    # When a shortened id is given that none of the newest 1,000 starts, and one that the first does
    code, _, err = run(cli_api, capsys, "jobs", "get", "job_9f8e7d6")
    pages_read = len(cli_api.sent("GET"))
    cli_api.answer("GET", f"/jobs/{_id(5)}", job(_id(5)))
    found, out, _ = run(cli_api, capsys, "jobs", "get", _id(5)[:11])

    # Then the first is a usage error asking for the whole id, after 11 pages (1,100 jobs) at most
    assert code == 2
    assert "job_9f8e7d6" in err and "1,000 newest jobs" in err and "whole id" in err
    assert pages_read == 11
    # and the second is the job
    assert found == 0 and _id(5) in out


def test_a_shortened_execution_id_reads_only_its_instants_executions(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given a job's executions, one of them at 0x19aee40ea60 ms
    cli_api.answer("GET", f"/jobs/{JOB}/executions", {"items": _runs(), "next_cursor": None})
    cli_api.answer("POST", f"/jobs/{JOB}/executions/{RUNS[1]}/retry", _runs()[1], status=202)

    # When it is retried by the id `executions` shows, never shown here
    code, _, err = run(cli_api, capsys, "jobs", "retry", JOB, "19aee40ea60")

    # Then the executions asked for are those of its instant's millisecond, however many the job has
    assert code == 0, err
    [listed] = cli_api.sent("GET")
    assert (listed.query["since"], listed.query["until"]) == (
        ["2025-12-05T11:23:43.072Z"],
        ["2025-12-05T11:23:43.073Z"],
    )
    assert cli_api.sent("POST")[0].path == f"/jobs/{JOB}/executions/{RUNS[1]}/retry"


def test_the_instant_an_execution_id_shown_shortened_may_have() -> None:
    assert ids.instant_window("19aee40ea60") == ("2025-12-05T11:23:43.072Z", "2025-12-05T11:23:43.073Z")
    assert ids.instant_window("19aee40ea60.1352885501405796") == ids.instant_window("19aee40ea60")
    # a shorter prefix holds every instant it may begin: 7 digits, 16^4 ms
    assert ids.instant_window("19aee40") == ("2025-12-05T11:22:43.072Z", "2025-12-05T11:23:48.608Z")
    # within the API's bound on instants (2200, which no `until` may name), and none past it
    assert ids.instant_window("699") == ("2199-11-16T15:29:22.944Z", None)
    assert ids.instant_window("69a") is None
    assert ids.instant_window("nothex") is None
    assert ids.instant_window("1234567890123") is None


def _id(n: int) -> str:
    """A job id of its own for each n, apart from the others from the first digits (Fibonacci hashing)."""
    return f"job_{(n * 0x9E3779B97F4A7C15) % 16**20:020x}"


def test_watch_lines_fit_the_terminal(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose execution fails with a long error while watched
    cli_api.answer("GET", f"/jobs/{JOB}", job(JOB))
    running = execution(RUNS[0], "RUNNING", job_id=JOB)
    failed = execution(RUNS[0], "FAILED", 3, job_id=JOB, error=LONG_ERROR, finished_at="2026-06-01T12:00:01Z")
    for items in ([running], [failed]):
        cli_api.answer("GET", f"/jobs/{JOB}/executions", {"items": items, "next_cursor": None})
    monkeypatch.setenv("COLUMNS", "80")

    # When it is watched until one execution has finished
    code, out, _ = run(cli_api, capsys, "watch", JOB, "--count", "1", "--interval", "1")

    # Then every line fits in 80 columns and names the execution shortened
    assert code == 0
    assert out.splitlines() and all(len(line) <= 80 for line in out.splitlines()), out
    assert "19aee400000" in out and RUNS[0] not in out


def test_abbreviations_grow_until_unique() -> None:
    assert display.abbreviations(["abcdef0123", "abcdef0199", "ff"]) == {
        "abcdef0123": "abcdef012",
        "abcdef0199": "abcdef019",
        "ff": "ff",
    }


def test_a_table_cuts_its_cuttable_columns_then_leaves_out_the_least_needed() -> None:
    # Given a table of an id, a name that may be cut and a note that may be left out
    columns = [display.Column("ID"), display.Column("NAME", shrink=6), display.Column("NOTE", drop=1)]
    rows = [["job_1234567", "a-rather-long-name", "something"]]

    # When it is fitted to 42, 30 and 20 columns
    wide, narrower, narrowest = (display.fit(columns, rows, width).splitlines() for width in (42, 30, 20))

    # Then the name is cut before the note is left out, and the id is never cut
    assert wide[1] == "job_1234567  a-rather-long-name  something"
    assert narrower[1] == "job_1234567  a-rat…  something"
    assert narrowest[1] == "job_1234567  a-rath…"
    assert all(len(line) <= 20 for line in narrowest)


def test_watching_every_job_fits_the_terminal_and_keeps_each_runs_status(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given jobs with long names whose last runs failed
    last = execution(RUNS[0], "FAILED", job_id=JOB, error=LONG_ERROR, finished_at="2026-06-01T11:00:00Z")
    jobs = [dict(item, last_execution=last) for item in _jobs()]
    cli_api.answer("GET", "/jobs", {"items": jobs, "next_cursor": None})
    monkeypatch.setenv("COLUMNS", "80")

    # When every job is watched for one poll
    _, out, _ = run(cli_api, capsys, "watch", "--timeout", "1", "--interval", "1")

    # Then each line fits, and each run's line still shows its status whole
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    runs = [line for line in lines if "job_1a2b3c4.19aee400000" in line]
    assert len(runs) == 3 and all("FAILED " in line for line in runs), out


def test_a_run_under_way_shows_no_attempt_until_one_is_recorded(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given a run under way, its attempt not yet recorded (stored at its end), then ended
    cli_api.answer("GET", f"/jobs/{JOB}", job(JOB))
    running = execution(RUNS[0], "RUNNING", 0, job_id=JOB, lateness_ms=None)
    done = execution(RUNS[0], "SUCCEEDED", 1, job_id=JOB, finished_at="2026-06-01T12:00:01Z")
    for items in ([running], [done]):
        cli_api.answer("GET", f"/jobs/{JOB}/executions", {"items": items, "next_cursor": None})

    # When it is watched
    code, out, _ = run(cli_api, capsys, "watch", JOB, "--count", "1", "--interval", "1")

    # Then the RUNNING line says no "attempt 0", and the end says attempt 1
    assert code == 0
    lines = [line for line in out.splitlines() if "19aee400000" in line]
    assert "RUNNING" in lines[0] and "attempt" not in lines[0], out
    assert "attempt 1" in lines[-1], out
