"""The CLI's friendly forms (durations, schedules, tasks), its auth choice and its formatting; no network."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from punctual.platform.clock import ManualClock
from punctual_cli import common
from punctual_cli import formatting as cli_format
from punctual_cli import main as cli
from punctual_cli.common import UsageError, parse_duration
from punctual_cli.job_options import build_schedule, build_task
from punctual_cli.views import jobs as job_views
from punctual_client.auth import BearerAuth, SigV4Auth, sign_request
from punctual_client.endpoints import default_endpoint, is_loopback, region_for
from punctual_client.errors import ConfigurationError
from punctual_client.transport import PunctualClient


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["jobs", "create", *argv])


# -- durations -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("2d", 172800), ("1d2h3m4s", 93784), ("45", 45), ("0s", 0)],
)
def test_durations_in_units_become_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "h5", "5x", "30m1h", "1.5h", "-5m", "5 m", "1h1h"])
def test_malformed_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="invalid duration"):
        parse_duration(text)


# -- schedules -------------------------------------------------------------------------------------------


def test_no_schedule_flag_means_now_on_create_and_nothing_on_update() -> None:
    args = parse("--task", "noop")

    assert build_schedule(args, default_now=True) == {"type": "now"}
    assert build_schedule(args, default_now=False) is None


def test_in_is_left_to_the_api_to_take_at_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a clock at a known instant
    monkeypatch.setattr(common, "clock", ManualClock(datetime(2026, 12, 31, 23, 59, 45, tzinfo=UTC)))

    # When a schedule 30 s ahead is built
    schedule = build_schedule(parse("--in", "30s"), default_now=True)

    # Then it is an `in` schedule, which the API turns into the instant when it takes the request:
    # whatever this machine's clock says, and the same body each time the command is retried
    assert schedule == {"type": "in", "seconds": 30}


def test_at_keeps_the_offset_as_written() -> None:
    schedule = build_schedule(parse("--at", "2026-12-01T10:00:00+01:00"), default_now=True)

    assert schedule == {"type": "at", "at": "2026-12-01T10:00:00+01:00"}


def test_every_is_a_rate_with_a_window() -> None:
    args = parse("--every", "1h", "--start-at", "2026-12-01T00:00:00Z", "--end-at", "2026-12-31T00:00:00Z")

    assert build_schedule(args, default_now=True) == {
        "type": "rate",
        "every_seconds": 3600,
        "start_at": "2026-12-01T00:00:00Z",
        "end_at": "2026-12-31T00:00:00Z",
    }


def test_cron_without_tz_leaves_the_zone_to_the_api_default() -> None:
    assert build_schedule(parse("--cron", "*/5 * * * *"), default_now=True) == {
        "type": "cron",
        "expression": "*/5 * * * *",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--at", "2026-12-01T10:00:00"], "offset"),
        (["--at", "tomorrow"], "--at"),
        (["--every", "5m", "--end-at", "2026-12-01"], "--end-at"),
        (["--now", "--start-at", "2026-12-01T00:00:00Z"], "apply to --cron or --every"),
        (["--every", "5m", "--tz", "UTC"], "--tz"),
    ],
)
def test_schedule_mistakes_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_schedule(parse(*argv), default_now=True)


# -- tasks -----------------------------------------------------------------------------------------------


def test_url_alone_implies_an_http_task() -> None:
    assert build_task(parse("--url", "https://example.com")) == {
        "type": "http",
        "params": {"url": "https://example.com"},
    }


def test_headers_merge_into_the_current_task_on_update() -> None:
    # Given a current http task with a header
    current = {"type": "http", "params": {"url": "https://a", "headers": {"A": "1"}}}

    # When another header is added without --task
    task = build_task(parse("--header", "B=2=3"), current)

    # Then both headers are kept (and only the first = splits)
    assert task == {"type": "http", "params": {"url": "https://a", "headers": {"A": "1", "B": "2=3"}}}


def test_sleep_seconds_keep_fractions() -> None:
    assert build_task(parse("--task", "sleep", "--seconds", "0.5")) == {
        "type": "sleep",
        "params": {"seconds": 0.5},
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "http", "--params", "[1]"], "JSON object"),
        (["--task", "noop", "--param", "novalue"], "KEY=VALUE"),
        (["--task", "http", "--header", "=x"], "KEY=VALUE"),
        (["--task", "fail", "--method", "GET"], "--task http only"),
        (["--params", "{}"], "--task is required"),
    ],
)
def test_task_mistakes_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_task(parse(*argv))


# -- endpoint and auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("http://127.0.0.1:8765", True),
        ("http://127.3.2.1", True),
        ("http://localhost:8765/", True),
        ("http://[::1]:8765", True),
        ("https://abc.execute-api.eu-west-1.amazonaws.com/prod", False),
        ("http://10.0.0.5:8765", False),
        ("http://127.0.0.1.example.com", False),
    ],
)
def test_loopback_endpoints_are_recognised(endpoint: str, loopback: bool) -> None:
    assert is_loopback(endpoint) is loopback


def test_region_comes_from_the_execute_api_host_before_the_environment() -> None:
    env = {"AWS_REGION": "us-west-2"}

    assert region_for("https://abc123.execute-api.eu-west-1.amazonaws.com/prod", env) == "eu-west-1"
    assert region_for("https://api.example.com", env) == "us-west-2"
    assert region_for("https://api.example.com", {"AWS_DEFAULT_REGION": "ap-south-1"}) == "ap-south-1"
    assert region_for("https://api.example.com", {}) is None


def test_default_endpoint_uses_the_port_variable() -> None:
    assert default_endpoint({}) == "http://127.0.0.1:8765"
    assert default_endpoint({"PUNCTUAL_PORT": "9999"}) == "http://127.0.0.1:9999"
    assert default_endpoint({"PUNCTUAL_ENDPOINT": "https://x", "PUNCTUAL_PORT": "1"}) == "https://x"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials from the environment only: no profile or config file of the machine leaks in."""
    for variable in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def test_remote_endpoint_is_signed_with_sigv4_from_the_credential_chain(aws_env: None) -> None:
    # Given a deployed endpoint (never contacted: the signing function is called directly)
    client = PunctualClient.from_endpoint("https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
    assert isinstance(client.auth, SigV4Auth)
    assert client.auth.region == "eu-west-1"
    url = client.url("/jobs", {"limit": 5, "cursor": None})

    # When a request is signed
    headers = client.auth.headers("GET", url, {"Accept": "application/json"}, None)

    # Then it carries a SigV4 Authorization for execute-api in that region, with the env's key
    assert url == "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/jobs?limit=5"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]
    assert "SignedHeaders=accept;host;x-amz-date" in headers["Authorization"]
    assert len(headers["X-Amz-Date"]) == 16
    assert "X-Amz-Security-Token" not in headers


def test_session_token_is_sent_with_temporary_credentials(
    aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")

    headers = sign_request("POST", "https://api.example.com/jobs", {}, b"{}", region="us-east-1")

    assert headers["X-Amz-Security-Token"] == "session-token"
    assert "x-amz-security-token" in headers["Authorization"]


def test_missing_credentials_or_region_are_configuration_errors(
    aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match="region"):
        PunctualClient.from_endpoint("https://api.example.com")

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ConfigurationError, match="credentials"):
        sign_request("GET", "https://api.example.com/jobs", {}, None, region="us-east-1")


def test_loopback_endpoint_uses_the_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUNCTUAL_TOKEN", raising=False)

    assert PunctualClient.from_endpoint("http://localhost:8765").auth == BearerAuth("local")
    assert PunctualClient.from_endpoint("http://[::1]:1", token="t").auth == BearerAuth("t")


def test_remote_endpoint_without_credentials_exits_2(
    aws_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no credentials at all (so nothing is ever sent)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    # When the CLI is pointed at a deployed API
    code = cli.main(["--endpoint", "https://abc.execute-api.eu-west-1.amazonaws.com/prod", "jobs", "list"])

    # Then it explains and exits 2
    assert code == 2
    assert "no AWS credentials" in capsys.readouterr().err


# -- formatting ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "summary"),
    [
        ({"type": "now"}, "now"),
        ({"type": "at", "at": "2026-12-01T09:00:00.000Z"}, "at 2026-12-01 09:00:00Z"),
        ({"type": "cron", "expression": "0 10 * * *"}, "cron '0 10 * * *' UTC"),
        (
            {"type": "rate", "every_seconds": 90, "end_at": "2027-01-01T00:00:00.000Z"},
            "every 1m30s until 2027-01-01 00:00:00Z",
        ),
        ({"type": "weird"}, '{"type":"weird"}'),
        (None, "-"),
    ],
)
def test_schedule_summaries(schedule: dict[str, Any] | None, summary: str) -> None:
    assert job_views.schedule_summary(schedule) == summary


def test_table_aligns_columns_and_does_not_pad_the_last() -> None:
    text = cli_format.table(("A", "BB", "C"), [["xxx", "y", "z"], ["", "long value", ""]])

    assert text.splitlines() == ["A    BB          C", "xxx  y           z", "     long value"]


def test_times_and_durations_read_well() -> None:
    assert cli_format.short_time("2026-12-01T09:00:00.123Z") == "2026-12-01 09:00:00Z"
    assert cli_format.short_time(None) == "-"
    assert cli_format.short_time("garbage") == "garbage"
    assert cli_format.duration(86400 + 60) == "1d1m"
    assert cli_format.duration(None) == "-"
    assert cli_format.lateness(12) == "12ms"
    assert cli_format.lateness(61234) == "61.2s"
