"""The burst forecast and the worker's provisioned pollers as deployment settings: the mapping's
mode, the one permission the scanner gets to set its pollers, the functions' configuration, the alarm."""

from __future__ import annotations

from typing import Any

import pytest

from infra.settings import DeploySettings
from punctual.platform import observability as obs
from punctual.platform import resources
from punctual.platform.config import Settings
from punctual.scheduling.prescaling import PollerPolicy, pollers_for_instant


def _work_mapping(synthesized) -> tuple[str, dict[str, Any]]:
    worker, _ = synthesized.function("worker")
    (found,) = [
        (k, m["Properties"])
        for k, m in synthesized.of_type("AWS::Lambda::EventSourceMapping").items()
        if m["Properties"]["FunctionName"] == {"Ref": worker}
    ]
    return found


def _statements_with(synthesized, action: str) -> list[tuple[str, dict[str, Any]]]:
    """(policy logical id, statement) of every statement in the stack that allows `action`."""
    found = []
    for logical_id, policy in synthesized.of_type("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if action in ([actions] if isinstance(actions, str) else actions):
                found.append((logical_id, statement))
    return found


def _alarm_names(synthesized) -> set[str]:
    return {a["Properties"]["AlarmName"] for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()}


def test_by_default_the_mapping_is_standard_and_nothing_is_forecast(synthesized):
    _, mapping = _work_mapping(synthesized)
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 20}
    assert "ProvisionedPollerConfig" not in mapping
    assert _statements_with(synthesized, "lambda:UpdateEventSourceMapping") == []
    variables = synthesized.function("scanner")[1]["Environment"]["Variables"]
    assert not any(k.startswith("PUNCTUAL_BURST") for k in variables)
    assert resources.ENV_WORKER_MAPPING_ID not in variables
    assert f"{synthesized.stack_name}-BurstOverCapacity" not in _alarm_names(synthesized)


def test_provisioned_mode_sets_the_pollers_and_drops_maximum_concurrency(warmed):
    _, mapping = _work_mapping(warmed)
    assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": 10, "MaximumPollers": 300}
    assert "ScalingConfig" not in mapping  # the two are exclusive
    assert mapping["BatchSize"] == 1 and mapping["MaximumBatchingWindowInSeconds"] == 0


def test_only_the_scanner_may_set_the_pollers_and_of_that_one_mapping(warmed):
    mapping_id, _ = _work_mapping(warmed)
    scanner, _ = warmed.function("scanner")
    (statement,) = [
        s for s in warmed.statements_of("scanner") if "lambda:UpdateEventSourceMapping" in s["Action"]
    ]
    assert sorted(statement["Action"]) == ["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"]
    assert statement["Effect"] == "Allow"
    resource = statement["Resource"]
    assert "*" not in str(resource)
    assert {"Ref": mapping_id} in resource["Fn::Join"][1]
    assert ":event-source-mapping:" in str(resource)
    # and no other role may change a mapping
    assert len(_statements_with(warmed, "lambda:UpdateEventSourceMapping")) == 1
    for name in ("api", "worker", "dead_letter"):
        assert not any("EventSourceMapping" in str(s["Action"]) for s in warmed.statements_of(name)), name
    del scanner


def test_the_scanner_is_told_the_mapping_and_the_limits(warmed):
    mapping_id, _ = _work_mapping(warmed)
    variables = warmed.function("scanner")[1]["Environment"]["Variables"]
    assert variables[resources.ENV_WORKER_MAPPING_ID] == {"Ref": mapping_id}
    settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
    assert settings.burst_forecast_minutes == 5
    assert (settings.burst_pollers_floor, settings.burst_pollers_ceiling) == (10, 150)
    assert settings.burst_worker_concurrency == 3000  # 300 pollers x 10 invokes
    assert settings.burst_lambda_concurrency == 3000
    assert settings.burst_table_write_units == 40_000
    # The mapping's id goes to the scanner only
    for name in ("api", "worker", "dead_letter"):
        assert resources.ENV_WORKER_MAPPING_ID not in warmed.function(name)[1]["Environment"]["Variables"]


def test_a_coming_minute_over_capacity_alarms(warmed, alarm_email):
    (alarm,) = [
        a["Properties"]
        for a in warmed.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"] == f"{warmed.stack_name}-BurstOverCapacity"
    ]
    assert (alarm["Namespace"], alarm["MetricName"]) == (obs.NAMESPACE, obs.BURST_LOAD_PERCENT)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": obs.SERVICE}]
    assert alarm["Statistic"] == "Maximum" and alarm["Period"] == 60
    assert alarm["Threshold"] == 100
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] and alarm["OKActions"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worker_min_pollers": 1}, "between 2 and 200"),
        ({"worker_min_pollers": 201}, "between 2 and 200"),
        ({"worker_min_pollers": 10, "worker_max_pollers": 5}, "worker_max_pollers"),
        ({"worker_min_pollers": 10, "worker_max_pollers": 2001}, "worker_max_pollers"),
        ({"burst_forecast_minutes": 16}, "burst_forecast_minutes"),
        ({"worker_prescale": True, "burst_forecast_minutes": 5}, "provisioned mode"),
        ({"worker_prescale": True, "worker_min_pollers": 10}, "forecast"),
        (
            {
                "worker_prescale": True,
                "worker_min_pollers": 10,
                "burst_forecast_minutes": 5,
                "worker_prescale_max_pollers": 201,
            },
            "at most 200",
        ),
        (
            {
                "worker_prescale": True,
                "worker_min_pollers": 10,
                "burst_forecast_minutes": 5,
                "worker_prescale_max_pollers": 5,
            },
            "worker_prescale_max_pollers",
        ),
    ],
)
def test_poller_settings_are_checked(values: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        DeploySettings(**values)


def test_poller_settings_from_the_command_line():
    context = {"worker_min_pollers": "20", "burst_forecast_minutes": "3", "worker_prescale": "yes"}
    settings = DeploySettings.from_context(context.get)
    assert settings.worker_pollers() == (20, 210)
    assert settings.worker_prescale and settings.burst_forecast_minutes == 3
    assert DeploySettings().worker_pollers() is None
    # The forecast alone (standard mode): the limits are the mapping's maximum concurrency
    alone = DeploySettings(burst_forecast_minutes=5, worker_max_concurrency=500).function_settings()
    assert alone.burst_worker_concurrency == 500
    assert (alone.burst_pollers_floor, alone.burst_pollers_ceiling) == (2, 2)


def test_the_functions_are_told_the_lead_bound_and_what_it_is_chosen_for(synthesized, warmed):
    # Given the default stack: standard mode, the lead bound 15 s
    for name in ("scanner", "api", "worker"):
        variables = synthesized.function(name)[1]["Environment"]["Variables"]
        settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
        assert (settings.lead_max_seconds, settings.worker_ready_pollers) == (15, 0), name
        assert settings.burst_worker_concurrency == 20
    # and pre-scaled: the pollers it raises to are ready for a crowded instant, within 300 x 10 invokes
    variables = warmed.function("scanner")[1]["Environment"]["Variables"]
    settings = Settings.from_env({k: v for k, v in variables.items() if isinstance(v, str)})
    assert (settings.worker_ready_pollers, settings.burst_worker_concurrency) == (150, 3000)


def test_the_default_maximum_pollers_hold_a_million_at_one_instant():
    # Every pack of an instant holds an invoke from its lead until it has fired: 2,048 packs, 205 pollers
    defaults = DeploySettings()
    functions = DeploySettings(worker_min_pollers=2).function_settings()
    policy = PollerPolicy(floor=2, ceiling=200, pack_size=functions.pack_size, shards=defaults.shard_count)
    assert pollers_for_instant(1_000_000, policy) == 205 <= defaults.worker_max_pollers


def test_the_lead_bound_is_checked():
    with pytest.raises(ValueError, match="lead_max_seconds"):
        DeploySettings(lead_max_seconds=16)
    assert DeploySettings(lead_max_seconds=0).function_settings().lead_max_seconds == 0
