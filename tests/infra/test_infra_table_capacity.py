"""The table is on-demand by default; deployed provisioned, it and each index are auto scaled, the
indexes within their own bounds."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from aws_cdk import App

from infra.app import build
from punctual.platform import resources

TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"
# The provisioned fixture's bounds (conftest.PROVISIONED_CONTEXT).
WRITES = (200, 9000)
READS = (150, 6000)
INDEX_WRITES = (20, 3000)
INDEX_READS = (5, 500)
TARGET_UTILISATION = 60


def _table(stack) -> tuple[str, dict[str, Any]]:
    ((logical_id, table),) = stack.of_type("AWS::DynamoDB::Table").items()
    return logical_id, table["Properties"]


def _scalable_targets(stack) -> dict[str, tuple[str, str]]:
    """Logical id of each scalable target -> (what it scales: "table" or an index name, its dimension)."""
    table_id, _ = _table(stack)
    found = {}
    for logical_id, target in stack.of_type(TARGET).items():
        props = target["Properties"]
        separator, parts = props["ResourceId"]["Fn::Join"]
        assert separator == "" and parts[:2] == ["table/", {"Ref": table_id}]
        scaled = "table" if len(parts) == 2 else parts[2].removeprefix("/index/")
        found[logical_id] = (scaled, props["ScalableDimension"])
    return found


def test_default_table_is_on_demand_with_no_auto_scaling(synthesized):
    _, props = _table(synthesized)
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in props
    assert [i for i in props["GlobalSecondaryIndexes"] if "ProvisionedThroughput" in i] == []
    assert synthesized.of_type(TARGET) == {}
    assert synthesized.of_type(POLICY) == {}


def test_provisioned_table_and_indexes_start_at_their_own_minimums(provisioned):
    _, props = _table(provisioned)
    assert props["BillingMode"] == "PROVISIONED"
    assert props["ProvisionedThroughput"] == {"ReadCapacityUnits": READS[0], "WriteCapacityUnits": WRITES[0]}
    indexes = {i["IndexName"]: i["ProvisionedThroughput"] for i in props["GlobalSecondaryIndexes"]}
    index_starting = {"ReadCapacityUnits": INDEX_READS[0], "WriteCapacityUnits": INDEX_WRITES[0]}
    assert indexes == {index.name: index_starting for index in resources.TABLE.indexes}


def test_provisioned_capacity_scales_the_table_and_each_index_within_their_own_bounds(provisioned):
    # Given the table and index bounds of the provisioned fixture, when its scalable targets are read
    targets = _scalable_targets(provisioned)
    bounds = {
        targets[k]: (v["Properties"]["MinCapacity"], v["Properties"]["MaxCapacity"])
        for k, v in provisioned.of_type(TARGET).items()
    }
    # Then the table's writes and reads are scaled within the table bounds, and every index's within
    # the index bounds
    expected = {
        ("table", "dynamodb:table:WriteCapacityUnits"): WRITES,
        ("table", "dynamodb:table:ReadCapacityUnits"): READS,
    }
    for index in resources.TABLE.indexes:
        expected[(index.name, "dynamodb:index:WriteCapacityUnits")] = INDEX_WRITES
        expected[(index.name, "dynamodb:index:ReadCapacityUnits")] = INDEX_READS
    assert bounds == expected
    # by Application Auto Scaling's service-linked role for DynamoDB, not a role of the stack's
    for target in provisioned.of_type(TARGET).values():
        props = target["Properties"]
        assert props["ServiceNamespace"] == "dynamodb"
        assert props["RoleARN"]["Fn::Join"][1][-1].endswith(
            ":role/aws-service-role/dynamodb.application-autoscaling.amazonaws.com/"
            "AWSServiceRoleForApplicationAutoScaling_DynamoDBTable"
        )


def test_each_scalable_target_tracks_its_own_utilisation_at_the_target(provisioned):
    targets = _scalable_targets(provisioned)
    tracked: dict[str, tuple[str, float]] = {}
    for policy in provisioned.of_type(POLICY).values():
        props = policy["Properties"]
        assert props["PolicyType"] == "TargetTrackingScaling"
        config = props["TargetTrackingScalingPolicyConfiguration"]
        target = props["ScalingTargetId"]["Ref"]
        assert target not in tracked, f"two policies on {targets[target]}"
        tracked[target] = (
            config["PredefinedMetricSpecification"]["PredefinedMetricType"],
            config["TargetValue"],
        )
    expected = {
        logical_id: (
            "DynamoDBWriteCapacityUtilization"
            if dimension.endswith(":WriteCapacityUnits")
            else "DynamoDBReadCapacityUtilization",
            TARGET_UTILISATION,
        )
        for logical_id, (_, dimension) in targets.items()
    }
    assert tracked == expected


def _without_capacity(stack) -> dict[str, Any]:
    """The template's resources without the scaling ones and the table's capacity settings."""
    found = {k: v for k, v in copy.deepcopy(stack.resources).items() if v["Type"] not in (TARGET, POLICY)}
    table_id, _ = _table(stack)
    props = found[table_id]["Properties"]
    del props["BillingMode"]
    props.pop("ProvisionedThroughput", None)
    for index in props["GlobalSecondaryIndexes"]:
        index.pop("ProvisionedThroughput", None)
    return found


def test_provisioned_changes_nothing_but_the_capacity(synthesized, provisioned):
    # The table keeps its logical id, encryption, recovery, expiry, protection and indexes: switching
    # modes updates it in place, its data kept. Nothing else in the stack changes.
    assert _table(provisioned)[0] == _table(synthesized)[0]
    assert _without_capacity(provisioned) == _without_capacity(synthesized)


def test_synth_tells_whoever_deploys_provisioned_about_bursts(provisioned):
    # `cdk synth` and `cdk deploy` print the info messages of the stack's metadata
    metadata = json.loads((provisioned.outdir / f"{provisioned.stack_name}.metadata.json").read_text())
    entries = metadata[f"/{provisioned.stack_name}/Storage/Table"]
    infos = [entry["data"] for entry in entries if entry["type"] == "aws:cdk:info"]
    assert len(infos) == 1, infos
    assert "steady load" in infos[0] and "table_capacity=on_demand" in infos[0]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"table_capacity": "reserved"}, "table_capacity 'reserved' is not one of on_demand, provisioned"),
        (
            {"table_capacity": "provisioned", "table_min_write_units": "500", "table_max_write_units": "100"},
            r"table_min_write_units \(500\) is above table_max_write_units \(100\)",
        ),
        (
            {"table_capacity": "provisioned", "table_target_utilisation": "95"},
            "table_target_utilisation must be between 20 and 90 percent",
        ),
        (
            {"table_capacity": "provisioned", "index_min_read_units": "50", "index_max_read_units": "40"},
            r"index_min_read_units \(50\) is above index_max_read_units \(40\)",
        ),
    ],
)
def test_bad_capacity_settings_fail_the_synth(tmp_path, context, message):
    app = App(outdir=str(tmp_path), context=context)
    with pytest.raises(ValueError, match=message):
        build(app)
