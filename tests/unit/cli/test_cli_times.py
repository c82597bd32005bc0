"""Times with their zone: shown in the reader's zone (a flag, an environment variable, the config
file's profile; by default this machine's), a cron job's runs in its own zone beside UTC."""

from __future__ import annotations

from pathlib import Path

import pytest
import tzlocal

from tests.unit.cli.fake_api import FakeApi, execution, job, run

Capsys = pytest.CaptureFixture[str]

# A job whose cron runs at 10:00 in Paris: 08:00 UTC in June.
PARIS_JOB = job("job-1")


def test_a_cron_jobs_next_run_is_shown_in_its_own_zone_beside_utc(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given a job on a Paris cron, read with UTC as the display zone
    cli_api.answer("GET", "/jobs/job-1", PARIS_JOB)

    # When it is shown
    code, out, _ = run(cli_api, capsys, "jobs", "get", "job-1")

    # Then its next run reads in Paris time first, with UTC beside it, and every time has its zone
    assert code == 0
    assert "next run:        2026-06-02 10:00:00 CEST (2026-06-02 08:00:00Z)" in out
    assert "created:         2026-06-01 11:00:00Z" in out


def test_a_third_display_zone_is_shown_too(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given the same job, read by someone in New York
    cli_api.answer("GET", "/jobs/job-1", PARIS_JOB)

    # When it is shown with --display-zone given after the command words
    code, out, _ = run(cli_api, capsys, "jobs", "get", "job-1", "--display-zone", "America/New_York")

    # Then the run is in Paris time, UTC and New York time, and the other times in New York time
    assert code == 0
    assert "2026-06-02 10:00:00 CEST (2026-06-02 08:00:00Z, 2026-06-02 04:00:00 EDT)" in out
    assert "created:         2026-06-01 07:00:00 EDT" in out


def test_a_utc_cron_jobs_next_run_keeps_utc_beside_another_display_zone(
    cli_api: FakeApi, capsys: Capsys
) -> None:
    # Given a job on a UTC cron, and one on a cron without a zone (UTC, as the API takes it)
    utc = {"type": "cron", "expression": "0 8 * * *", "timezone": "UTC"}
    cli_api.answer("GET", "/jobs/job-1", {**PARIS_JOB, "schedule": utc})
    cli_api.answer("GET", "/jobs/job-2", {**PARIS_JOB, "id": "job-2", "schedule": {**utc, "timezone": None}})

    # When they are shown to someone in Kathmandu, and to someone in UTC
    kathmandu = [
        run(cli_api, capsys, "jobs", "get", job_id, "--display-zone", "Asia/Kathmandu")[1]
        for job_id in ("job-1", "job-2")
    ]
    in_utc = run(cli_api, capsys, "jobs", "get", "job-1", "--display-zone", "UTC")[1]

    # Then the run reads in UTC, its own zone, with the reader's beside it; once where they are one
    for out in kathmandu:
        assert "next run:        2026-06-02 08:00:00Z (2026-06-02 13:45:00 +05:45)" in out, out
    assert "next run:        2026-06-02 08:00:00Z\n" in in_utc, in_utc


def test_the_display_zone_comes_from_the_flag_then_the_environment_then_the_profile(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a config file whose default profile shows times in Tokyo, and a listed job
    config = tmp_path / "config.toml"
    config.write_text('[profiles.default]\ndisplay_zone = "Asia/Tokyo"\n', encoding="utf-8")
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(config))
    monkeypatch.delenv("PUNCTUAL_DISPLAY_ZONE")
    cli_api.answer("GET", "/jobs", {"items": [PARIS_JOB], "next_cursor": None})

    # When the jobs are listed with the profile alone, then with the environment, then with the flag
    by_profile = run(cli_api, capsys, "jobs", "list")[1]
    monkeypatch.setenv("PUNCTUAL_DISPLAY_ZONE", "Europe/London")
    by_environment = run(cli_api, capsys, "jobs", "list")[1]
    by_flag = run(cli_api, capsys, "--display-zone", "UTC", "jobs", "list")[1]

    # Then each shows the next run in the zone that wins, marked
    assert "2026-06-02 17:00:00 JST" in by_profile
    assert "2026-06-02 09:00:00 BST" in by_environment
    assert "2026-06-02 08:00:00Z" in by_flag


def test_by_default_times_are_in_this_machines_zone_marked(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # Given a machine in India and no zone chosen
    monkeypatch.delenv("PUNCTUAL_DISPLAY_ZONE")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    tzlocal.reload_localzone()  # (read once a process, as a command does)
    request.addfinalizer(tzlocal.reload_localzone)
    cli_api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "SUCCEEDED")], "next_cursor": None}
    )

    # When executions are listed
    code, out, _ = run(cli_api, capsys, "executions", "job-1")

    # Then their times are India's, with its zone
    assert code == 0
    assert "2026-06-01 17:30:00 IST" in out


def test_watch_stamps_its_lines_with_the_zone(cli_api: FakeApi, capsys: Capsys) -> None:
    # Given a job whose execution starts while watched, read in Paris
    cli_api.answer("GET", "/jobs/job-1", PARIS_JOB)
    for items in ([], [execution("ex-1", "SUCCEEDED", finished_at="2026-06-01T12:00:01.000Z")]):
        cli_api.answer("GET", "/jobs/job-1/executions", {"items": items, "next_cursor": None})

    # When it is watched until one execution has finished
    code, out, _ = run(cli_api, capsys, "--display-zone", "Europe/Paris", "watch", "job-1", "--count", "1")

    # Then each line's time of day carries the zone
    assert code == 0
    assert out.splitlines()[0].startswith("14:00:00 CEST  job job-1  ACTIVE")
    assert out.splitlines()[1] == "--- live from 14:00:00 CEST ---"
    assert out.splitlines()[2].startswith("14:00:02 CEST  ex-1  new SUCCEEDED")


def test_an_unknown_display_zone_is_refused_naming_the_nearest(cli_api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(cli_api, capsys, "--display-zone", "Europe/Pariss", "jobs", "list")

    assert code == 2
    assert "did you mean Europe/Paris" in err
    assert cli_api.sent() == []
