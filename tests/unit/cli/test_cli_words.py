"""What the CLI says: options where people put them, one version, one tag syntax, help for the command
at hand, and errors that say what to do in the CLI's own words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from punctual import __version__
from punctual.api.app import resolver_for
from punctual.domain.errors import InvalidRequest
from punctual.domain.schedules import AtSchedule
from punctual.jobs.checks import check_not_past
from punctual.tasks.netguard import AddressRefused, resolve_checked
from punctual_cli import main as cli
from tests.unit.cli.fake_api import FakeApi, execution, job, run

Capsys = pytest.CaptureFixture[str]


# -- options anywhere, one version, one tag syntax ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--token", "tok-a", "jobs", "list"],
        ["jobs", "--token", "tok-a", "list"],
        ["jobs", "list", "--token", "tok-a"],
        ["dead-letters", "--token", "tok-a", "list"],
    ],
)
def test_global_options_are_taken_before_between_and_after_the_command_words(
    cli_api: FakeApi, capsys: Capsys, argv: list[str]
) -> None:
    cli_api.answer("GET", "/jobs", {"items": [], "next_cursor": None})
    cli_api.answer("GET", "/dead-letters", {"items": [], "next_cursor": None})

    code, _, err = run(cli_api, capsys, *argv)

    assert code == 0, err
    assert cli_api.sent()[0].headers["Authorization"] == "Bearer tok-a"


def test_the_cli_and_the_apis_openapi_document_say_the_same_version(capsys: Capsys) -> None:
    # Given the version the command prints
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--version"])
    printed = capsys.readouterr().out.split()[-1]

    # When the API's OpenAPI document is read
    document = resolver_for({"requestContext": {"http": {}}}).get_openapi_schema()

    # Then both say the package's version
    assert printed == __version__ == document.info.version


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("team=billing", "team:billing"),
        ("team", "team"),
        ("team:billing", "team:billing"),
        ("url=http://x", "url:http://x"),
        # (a key may hold `=`, written `\=`)
        ("a\\=b=c:d", "a=b:c:d"),
        ("a\\=b", "a=b"),
    ],
)
def test_tag_filters_take_key_equals_value_as_create_does_and_the_older_colon(
    cli_api: FakeApi, capsys: Capsys, given: str, sent: str
) -> None:
    cli_api.answer("GET", "/jobs", {"items": [], "next_cursor": None})
    cli_api.answer("POST", "/jobs/pause", {"changed": [], "failed": [], "next_cursor": None})

    assert run(cli_api, capsys, "jobs", "list", "--tag", given)[0] == 0
    assert run(cli_api, capsys, "jobs", "pause", "--tag", given)[0] == 0

    assert [request.query["tag"] for request in cli_api.sent()] == [[sent], [sent]]


def test_a_tag_key_holding_equals_is_written_with_a_backslash(cli_api: FakeApi, capsys: Capsys) -> None:
    cli_api.answer("POST", "/jobs", {"id": "j1"})

    tags = ["--tag", "a\\=b=c=d", "--tag", "k=v", "--tag", "x=1\\=2"]
    assert run(cli_api, capsys, "-q", "jobs", "create", "--task", "noop", *tags)[0] == 0

    assert cli_api.sent()[0].body["tags"] == {"a=b": "c=d", "k": "v", "x": "1=2"}


@pytest.mark.parametrize("command", [["jobs", "update"], ["preview"]])
def test_update_and_preview_help_do_not_repeat_what_only_create_does(
    command: list[str], capsys: Capsys
) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())

    assert "idempotency" not in text.lower()
    assert "without one the job runs now" not in text


@pytest.mark.parametrize(
    ("command", "takes"),
    [(["new-secret"], set()), (["completion", "bash"], set()), (["receive"], {"--display-zone"})],
)
def test_commands_that_call_no_api_list_no_connection_options(
    command: list[str], takes: set[str], capsys: Capsys
) -> None:
    # When the help of a command that calls no API is read
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*command, "--help"])
    text = capsys.readouterr().out

    # Then it lists none of the connection's options, only the display zone where it prints times
    listed = {
        o for o in ("--endpoint", "--token", "--profile", "--display-zone", "--json", "--quiet") if o in text
    }
    assert listed == takes


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["jobs", "retry"], "run a failed, skipped or cancelled execution"),
        (["watch"], "without: only those that finish while watching"),
    ],
)
def test_help_says_what_retry_takes_and_what_watch_count_counts(
    command: list[str], says: str, capsys: Capsys
) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*command, "--help"])

    assert says in " ".join(capsys.readouterr().out.split())


def test_a_refused_token_is_answered_with_how_to_give_one(cli_api: FakeApi, capsys: Capsys) -> None:
    cli_api.answer("GET", "/jobs", {"message": "missing or unknown token"}, status=401)

    code, _, err = run(cli_api, capsys, "jobs", "list")

    assert code == 1
    assert "--token" in err and "PUNCTUAL_TOKEN" in err


# -- errors that say what to do ---------------------------------------------------------------------------


def test_a_url_without_its_scheme_is_refused_saying_to_add_it(cli_api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(cli_api, capsys, "jobs", "create", "--task", "http", "--url", "127.0.0.1:9001/x")

    assert code == 2
    assert "add http://" in err and "http://127.0.0.1:9001/x" in err
    assert cli_api.sent() == []


def test_an_endpoint_without_its_scheme_is_refused_saying_to_add_it(capsys: Capsys) -> None:
    code = cli.main(["--endpoint", "127.0.0.1:8765", "jobs", "list"])

    assert code == 2
    assert "add http://" in capsys.readouterr().err


def test_a_misspelt_zone_is_answered_with_the_nearest(cli_api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(
        cli_api, capsys, "jobs", "create", "--task", "noop", "--cron", "0 9 * * *", "--tz", "America/New_Yrok"
    )

    assert code == 2
    assert "did you mean America/New_York" in err
    assert cli_api.sent() == []


def test_a_misspelt_task_type_is_answered_with_did_you_mean(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given the API knows no task named nop
    cli_api.answer(
        "POST",
        "/jobs",
        {"message": "task: unknown task 'nop': define it with POST /tasks", "field": "task"},
        status=422,
    )

    code, _, err = run(cli_api, capsys, "jobs", "create", "--task", "nop")

    assert code == 1
    assert "did you mean noop?" in err and "punctual tasks create nop" in err


def test_a_too_short_period_is_refused_in_the_clis_own_words(cli_api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(cli_api, capsys, "jobs", "create", "--task", "noop", "--every", "30s")

    assert code == 2
    assert "--every takes at least 1m" in err and "--in 30s" in err
    assert "every_seconds" not in err
    assert cli_api.sent() == []


def test_a_bad_at_prints_one_example(cli_api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(cli_api, capsys, "jobs", "create", "--task", "noop", "--at", "2026-12-01 10:00")

    assert code == 2
    assert err.count("e.g.") == 1


def test_an_at_in_the_past_says_how_much_lateness_is_taken() -> None:
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    with pytest.raises(InvalidRequest) as refused:
        check_not_past(AtSchedule(type="at", at=now - timedelta(minutes=6)), now)

    assert "360 s ago" in str(refused.value) and "up to 5 minutes past runs at once" in str(refused.value)
    check_not_past(AtSchedule(type="at", at=now - timedelta(minutes=4)), now)  # within: runs at once


def test_a_private_address_refusal_says_how_the_local_stack_allows_loopback() -> None:
    with pytest.raises(AddressRefused) as refused:
        resolve_checked("hooks.internal", 443, (), lambda host, port: ["10.1.2.3"])

    assert "local stack allows loopback" in str(refused.value)
    assert "webhook_allowed_networks" in str(refused.value)


# -- watch: history as history -------------------------------------------------------------------------------


def test_watch_shows_earlier_runs_at_their_own_times_then_the_live_changes(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given a job that succeeded yesterday, and runs again while watched
    cli_api.answer("GET", "/jobs/job-1", job())
    yesterday = execution(
        "ex-0",
        "SUCCEEDED",
        scheduled_at="2026-05-31T12:00:00.000Z",
        finished_at="2026-05-31T12:00:01.000Z",
    )
    today = execution("ex-1", "SUCCEEDED", finished_at="2026-06-01T12:00:02.000Z")
    for items in ([yesterday], [today, yesterday]):
        cli_api.answer("GET", "/jobs/job-1/executions", {"items": items, "next_cursor": None})

    # When it is watched until two executions have finished
    code, out, _ = run(cli_api, capsys, "watch", "job-1", "--count", "2")

    # Then yesterday's run is history, at its own time and not "new"; then the live changes
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("2026-05-31 12:00:01Z  ex-0  SUCCEEDED")
    assert lines[2].startswith("--- live from 12:00:00Z")
    assert "ex-1  new SUCCEEDED" in lines[3]
    assert "new" not in lines[1]


def test_watching_every_job_shows_the_latest_runs_and_the_next_at_once(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given two jobs, one that ran yesterday and one due tomorrow, and nothing happening
    ran = job(
        "job-1",
        name="billing",
        next_run_at=None,
        status="COMPLETED",
        last_execution=execution("ex-0", "FAILED", error="HTTP 500", finished_at="2026-05-31T12:00:01.000Z"),
    )
    due = job("job-2", name="report", next_run_at="2026-06-02T08:00:00.000Z")
    cli_api.answer("GET", "/jobs", {"items": [ran, due], "next_cursor": None})

    # When every job is watched for one poll
    code, out, _ = run(cli_api, capsys, "watch", "--timeout", "1", "--interval", "1")

    # Then the first poll already shows the last run, the next one, and where the live view starts
    lines = out.splitlines()
    assert code == 1  # (gave up after its timeout)
    assert "billing" in lines[0] and "2026-05-31 12:00:01Z" in lines[0] and "FAILED" in lines[0]
    assert lines[1].startswith("next run: report") and "2026-06-02 08:00:00Z" in lines[1]
    assert lines[2].startswith("--- 2 jobs; live from 12:00:00Z")
