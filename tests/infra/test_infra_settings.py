"""Deployment settings come from CDK context: cdk.json types or the CLI's strings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infra.settings import DeploySettings, ProvisionedCapacity


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


def test_the_table_is_on_demand_unless_provisioned_is_asked_for():
    empty: dict[str, str] = {}
    settings = DeploySettings.from_context(empty.get)
    assert settings.table_capacity == "on_demand"
    assert settings.provisioned_capacity() is None


def test_provisioned_capacity_comes_from_cli_strings():
    context = {
        "table_capacity": "provisioned",
        "table_min_write_units": "200",
        "table_max_write_units": "9000",
        "table_min_read_units": "150",
        "table_max_read_units": "6000",
        "table_target_utilisation": "60",
        "index_min_write_units": "20",
        "index_max_write_units": "3000",
        "index_min_read_units": "5",
        "index_max_read_units": "500",
    }
    settings = DeploySettings.from_context(context.get)
    assert settings.provisioned_capacity() == ProvisionedCapacity(
        min_write_units=200,
        max_write_units=9000,
        min_read_units=150,
        max_read_units=6000,
        target_utilisation=60,
        index_min_write_units=20,
        index_max_write_units=3000,
        index_min_read_units=5,
        index_max_read_units=500,
    )


def test_cdk_json_types_are_taken_as_they_are():
    # cdk.json gives numbers, not strings
    context = {"table_capacity": "provisioned", "index_min_write_units": 30, "index_max_read_units": 700}
    capacity = DeploySettings.from_context(context.get).provisioned_capacity()
    assert capacity is not None
    assert (capacity.index_min_write_units, capacity.index_max_read_units) == (30, 700)


def test_provisioned_defaults_are_a_small_floor_the_default_quota_as_ceiling_and_70_percent():
    context = {"table_capacity": "provisioned"}
    assert DeploySettings.from_context(context.get).provisioned_capacity() == ProvisionedCapacity(
        min_write_units=100,
        max_write_units=40_000,
        min_read_units=100,
        max_read_units=40_000,
        target_utilisation=70,
        index_min_write_units=15,
        index_max_write_units=40_000,
        index_min_read_units=10,
        index_max_read_units=40_000,
    )


def test_the_index_minimums_default_below_the_tables():
    # The by_owner index takes 1 of a one-time execution's 7 write units and only list requests read
    # it: by default it does not pay the table's floor a second time
    settings = DeploySettings()
    assert settings.index_min_write_units < settings.table_min_write_units
    assert settings.index_min_read_units < settings.table_min_read_units


def test_cdk_json_lists_every_capacity_setting_at_its_default():
    # The context `cdk synth` reads is the documented default, key by key
    context = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())["context"]
    defaults = DeploySettings()
    names = [n for n in vars(defaults) if n.startswith(("table_", "index_"))]
    assert len(names) == 10
    assert {n: context[n] for n in names} == {n: getattr(defaults, n) for n in names}


@pytest.mark.parametrize("utilisation", ["20", "90"])
def test_target_utilisation_bounds_are_inclusive(utilisation):
    context = {"table_capacity": "provisioned", "table_target_utilisation": utilisation}
    capacity = DeploySettings.from_context(context.get).provisioned_capacity()
    assert capacity is not None and capacity.target_utilisation == int(utilisation)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"table_capacity": "reserved"}, "table_capacity 'reserved' is not one of on_demand, provisioned"),
        ({"table_capacity": "PAY_PER_REQUEST"}, "is not one of on_demand, provisioned"),
        (
            {"table_min_write_units": "500", "table_max_write_units": "499"},
            r"table_min_write_units \(500\) is above table_max_write_units \(499\)",
        ),
        (
            {"table_min_read_units": "7", "table_max_read_units": "6"},
            r"table_min_read_units \(7\) is above table_max_read_units \(6\)",
        ),
        ({"table_min_write_units": "0"}, "table_min_write_units must be at least 1"),
        ({"table_min_read_units": "-5"}, "table_min_read_units must be at least 1"),
        (
            {"index_min_write_units": "41", "index_max_write_units": "40"},
            r"index_min_write_units \(41\) is above index_max_write_units \(40\)",
        ),
        (
            {"index_min_read_units": "11", "index_max_read_units": "10"},
            r"index_min_read_units \(11\) is above index_max_read_units \(10\)",
        ),
        ({"index_min_write_units": "0"}, "index_min_write_units must be at least 1"),
        ({"index_min_read_units": "0"}, "index_min_read_units must be at least 1"),
        ({"index_max_read_units": "few"}, "context index_max_read_units='few' is not an integer"),
        ({"table_target_utilisation": "19"}, "table_target_utilisation must be between 20 and 90 percent"),
        ({"table_target_utilisation": "91"}, "table_target_utilisation must be between 20 and 90 percent"),
        ({"table_max_write_units": "lots"}, "context table_max_write_units='lots' is not an integer"),
    ],
)
def test_bad_capacity_bounds_fail_with_a_message_naming_the_setting(context, message):
    # Checked in either mode: a bad bound in cdk.json is a mistake before anyone switches to it
    for mode in ("on_demand", "provisioned"):
        with pytest.raises(ValueError, match=message):
            DeploySettings.from_context({"table_capacity": mode, **context}.get)


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
        {"retired_indexes": "3"},
        {"retired_indexes": "-1"},
    ],
)
def test_bad_values_fail_at_synth_not_at_cold_start(context):
    with pytest.raises(ValueError):
        DeploySettings.from_context(context.get)


def test_the_api_is_an_http_api_unless_rest_is_asked_for():
    # Given no api_type, then an HTTP API; given `-c api_type=rest`, a REST API
    empty: dict[str, str] = {}
    assert DeploySettings.from_context(empty.get).api_type == "http"
    assert DeploySettings.from_context({"api_type": "rest"}.get).api_type == "rest"
    assert DeploySettings.from_context({"api_type": "http"}.get).api_type == "http"


def test_cdk_json_gives_the_default_api_type():
    context = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())["context"]
    assert context["api_type"] == DeploySettings().api_type == "http"


@pytest.mark.parametrize("api_type", ["websocket", "REST", "v2", "http "])
def test_an_unknown_api_type_fails_with_a_message_naming_the_choices(api_type):
    with pytest.raises(ValueError, match=rf"api_type {api_type!r} is not one of http, rest"):
        DeploySettings.from_context({"api_type": api_type}.get)


def test_the_upgrade_guides_context_values_are_read_by_the_app():
    # Given every `-c key=value` docs/upgrading.md asks a deployment for
    guide = (Path(__file__).resolve().parents[2] / "docs" / "upgrading.md").read_text()
    given = re.findall(r"-c (\w+)=(\w+)", guide)
    assert ("retired_indexes", "2") in given and ("retired_indexes", "1") in given
    # When the app reads its context (each as the CDK CLI passes it: a string)
    asked: list[str] = []
    DeploySettings.from_context(asked.append)
    for key, value in given:
        settings = DeploySettings.from_context({key: value}.get)
        # Then each is a key the app asks for, taken as given
        assert key in asked and str(getattr(settings, key)).lower() == value.lower(), key


def test_an_existing_tables_earlier_list_indexes_are_dropped_by_default():
    empty: dict[str, str] = {}
    assert DeploySettings.from_context(empty.get).retired_indexes == 0
    assert DeploySettings.from_context({"retired_indexes": "2"}.get).retired_indexes == 2
