"""Settings come from the environment, with defaults that work locally."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from punctual.platform import resources
from punctual.platform.config import Settings


def test_empty_environment_gives_working_local_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.table_name == resources.TABLE.name
    assert settings.queue_url == ""
    assert settings.endpoint_url is None
    assert settings.region == "us-east-1"
    assert settings.shard_count == 16
    assert settings.webhook_allowed_networks == ()
    assert settings.cursor_secret  # cursors are signed even locally


def test_environment_overrides_and_numbers_are_parsed() -> None:
    settings = Settings.from_env(
        {
            resources.ENV_TABLE_NAME: "punctual-prod",
            resources.ENV_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/1/work",
            resources.ENV_DLQ_URL: "https://sqs.eu-west-1.amazonaws.com/1/dlq",
            "PUNCTUAL_AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "PUNCTUAL_SHARD_COUNT": "64",
            "PUNCTUAL_LOOKAHEAD_SECONDS": "120",
            "PUNCTUAL_TICK_SECONDS": "30",
            "PUNCTUAL_RETENTION_DAYS": "7",
            "PUNCTUAL_CURSOR_SECRET": "s3cret",
            "PUNCTUAL_RESULT_MAX_BYTES": "1024",
            "AWS_REGION": "eu-west-1",
        }
    )
    assert settings.table_name == "punctual-prod"
    assert settings.queue_url.endswith("/work") and settings.dlq_url.endswith("/dlq")
    assert settings.endpoint_url == "http://127.0.0.1:5000"
    assert (settings.shard_count, settings.lookahead_seconds, settings.tick_seconds) == (64, 120, 30)
    assert (settings.retention_days, settings.result_max_bytes) == (7, 1024)
    assert settings.cursor_secret == "s3cret"
    assert settings.region == "eu-west-1"


def test_empty_variables_leave_the_defaults() -> None:
    settings = Settings.from_env({"PUNCTUAL_SHARD_COUNT": "", "PUNCTUAL_AWS_ENDPOINT_URL": ""})
    assert settings.shard_count == 16
    assert settings.endpoint_url is None


@pytest.mark.parametrize(
    ("environ", "region"),
    [
        (
            {"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2"},
            "eu-west-3",
        ),  # Lambda sets AWS_REGION
        ({"AWS_DEFAULT_REGION": "us-west-2"}, "us-west-2"),
    ],
)
def test_region_prefers_aws_region(environ: dict[str, str], region: str) -> None:
    assert Settings.from_env(environ).region == region


def test_allowed_networks_are_a_comma_separated_list() -> None:
    settings = Settings.from_env({"PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS": " 127.0.0.0/8, ::1/128 ,,10.1.0.0/16"})
    assert settings.webhook_allowed_networks == ("127.0.0.0/8", "::1/128", "10.1.0.0/16")


@pytest.mark.parametrize(
    ("environ", "field"),
    [
        ({"PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8,localhost"}, "webhook_allowed_networks"),
        ({"PUNCTUAL_SHARD_COUNT": "0"}, "shard_count"),
        ({"PUNCTUAL_SHARD_COUNT": "many"}, "shard_count"),
        ({"PUNCTUAL_LOOKAHEAD_SECONDS": "901"}, "lookahead_seconds"),
        ({"PUNCTUAL_TICK_SECONDS": "0"}, "tick_seconds"),
    ],
)
def test_bad_values_fail_at_start_naming_the_setting(environ: dict[str, str], field: str) -> None:
    # A misconfigured function should fail at cold start, not schedule wrongly.
    with pytest.raises(ValidationError) as caught:
        Settings.from_env(environ)
    assert caught.value.errors()[0]["loc"][0] == field


def test_from_env_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUNCTUAL_SHARD_COUNT", "3")
    monkeypatch.setenv("PUNCTUAL_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8")
    settings = Settings.from_env()
    assert settings.shard_count == 3
    assert settings.webhook_allowed_networks == ("127.0.0.0/8",)


def test_handoff_covers_lookahead_plus_a_tick_plus_margin() -> None:
    # The API enqueues anything due before the scanner's next reach; shrinking it would drop runs.
    settings = Settings.from_env({"PUNCTUAL_LOOKAHEAD_SECONDS": "90", "PUNCTUAL_TICK_SECONDS": "60"})
    assert settings.handoff_seconds > settings.lookahead_seconds + settings.tick_seconds


def test_a_left_over_record_queued_variable_changes_nothing() -> None:
    # (every execution stored as QUEUED before its send: no longer a setting, locally or on AWS)
    assert Settings.from_env({"PUNCTUAL_RECORD_QUEUED": "true"}) == Settings.from_env({})
