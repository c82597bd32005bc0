"""Deployment settings come from CDK context: cdk.json types or the CLI's strings."""

from __future__ import annotations

import pytest

from infra.settings import DeploySettings


def test_cli_strings_are_parsed():
    context = {
        "shard_count": "8",
        "scanner_fanout": "2",
        "deletion_protection": "false",
        "webhook_allowed_networks": "10.0.0.0/8, 172.16.0.0/12",
        "alarm_email": " ops@example.com ",
    }
    settings = DeploySettings.from_context(context.get)
    assert settings.shard_count == 8
    assert settings.scanner_fanout == 2
    assert settings.deletion_protection is False
    assert settings.webhook_allowed_networks == ("10.0.0.0/8", "172.16.0.0/12")
    assert settings.alarm_email == "ops@example.com"


def test_defaults_protect_the_data_send_no_email_and_fan_the_scanner_out():
    empty: dict[str, str] = {}
    settings = DeploySettings.from_context(empty.get)
    assert settings.scanner_fanout == 64
    assert settings.function_settings().scanner_fanout == 64
    assert settings.deletion_protection is True
    assert settings.alarm_email is None
    assert settings.webhook_allowed_networks == ()


@pytest.mark.parametrize(
    "context",
    [
        {"shard_count": "0"},
        {"scanner_fanout": "0"},
        {"scanner_fanout": "1001"},
        {"lookahead_seconds": "2"},
        {"webhook_allowed_networks": "not-a-network"},
        {"deletion_protection": "maybe"},
        {"worker_max_concurrency": "1"},
        {"log_level": "LOUD"},
    ],
)
def test_bad_values_fail_at_synth_not_at_cold_start(context):
    with pytest.raises(ValueError):
        DeploySettings.from_context(context.get)
