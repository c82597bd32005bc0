"""The DynamoDB table, built from `punctual.platform.resources.TABLE`: on-demand, or provisioned with auto scaling.

The trade-off between the two (steady load against bursts) is told at `DeploySettings.table_capacity`.
"""

from __future__ import annotations

from typing import Any, cast

from aws_cdk import Acknowledgment, Annotations, CfnElement, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.settings import ProvisionedCapacity
from punctual.platform import resources


def _string(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Storage(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        deletion_protection: bool,
        provisioned: ProvisionedCapacity | None = None,
        stream: bool = False,
        list_indexes: int = len(resources.LIST_INDEXES),
        retired_indexes: int = 0,
    ) -> None:
        """`provisioned`: the capacity and its auto scaling bounds; None (the default) for on-demand.
        `stream`: the table's stream (new and old images), which execution events are made from.
        `list_indexes`: how many of the list indexes to deploy (an existing table gains one a deployment).
        `retired_indexes`: how many of an earlier version's list indexes to keep (the first ones: an
        existing table drops one a deployment; docs/upgrading.md)."""
        super().__init__(scope, id)
        definition = resources.TABLE
        left_out = resources.LIST_INDEXES[list_indexes:]
        if not 0 <= retired_indexes <= len(resources.RETIRED_LIST_INDEXES):
            raise ValueError(f"retired_indexes must be between 0 and {len(resources.RETIRED_LIST_INDEXES)}")
        self.indexes = tuple(index for index in definition.indexes if index not in left_out)
        self.indexes += resources.RETIRED_LIST_INDEXES[:retired_indexes]
        billing_mode = dynamodb.BillingMode.PAY_PER_REQUEST
        capacity: dict[str, Any] = {}
        index_capacity: dict[str, Any] = {}
        if provisioned is not None:
            # The table and its indexes start at their minimums. CloudFormation sets the capacity again
            # only when the template's value changes: a deployment that changes a minimum resets the
            # live capacity to it, until auto scaling catches up.
            billing_mode = dynamodb.BillingMode.PROVISIONED
            capacity = {
                "read_capacity": provisioned.min_read_units,
                "write_capacity": provisioned.min_write_units,
            }
            index_capacity = {
                "read_capacity": provisioned.index_min_read_units,
                "write_capacity": provisioned.index_min_write_units,
            }
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_string(definition.partition_key),
            sort_key=_string(definition.sort_key),
            billing_mode=billing_mode,
            **capacity,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if stream else None,
            deletion_protection=deletion_protection,
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else RemovalPolicy.DESTROY,
        )
        for index in self.indexes:
            # (one attribute or several: the list indexes key by a job's own attributes, which adds no
            # byte to its item)
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_keys=[_string(name) for name in index.partition_keys],
                sort_keys=[_string(name) for name in index.sort_keys],
                projection_type=dynamodb.ProjectionType(index.projection),
                **index_capacity,
            )
        if provisioned is not None:
            # The CDK leaves PROVISIONED, CloudFormation's default, out of the template; written out,
            # the template says what it deploys.
            cast(dynamodb.CfnTable, self.table.node.default_child).billing_mode = "PROVISIONED"
            self._auto_scale(provisioned)

    def _auto_scale(self, capacity: ProvisionedCapacity) -> None:
        """Target tracking on the table's and each index's write and read capacity, each index
        within the index bounds.

        The scaling targets use Application Auto Scaling's service-linked role for DynamoDB, which
        the CDK refers to by its ARN: no IAM role or policy is created here.
        """
        scaled: list[dynamodb.IScalableTableAttribute] = [
            self.table.auto_scale_write_capacity(
                min_capacity=capacity.min_write_units, max_capacity=capacity.max_write_units
            ),
            self.table.auto_scale_read_capacity(
                min_capacity=capacity.min_read_units, max_capacity=capacity.max_read_units
            ),
        ]
        for index in self.indexes:
            scaled += [
                self.table.auto_scale_global_secondary_index_write_capacity(
                    index.name,
                    min_capacity=capacity.index_min_write_units,
                    max_capacity=capacity.index_max_write_units,
                ),
                self.table.auto_scale_global_secondary_index_read_capacity(
                    index.name,
                    min_capacity=capacity.index_min_read_units,
                    max_capacity=capacity.index_max_read_units,
                ),
            ]
        for attribute in scaled:
            attribute.scale_on_utilization(target_utilization_percent=capacity.target_utilisation)
        # Printed by `cdk synth` and `cdk deploy`, where the choice is made.
        Annotations.of(self.table).add_info(
            "Provisioned capacity suits a steady load: auto scaling takes minutes to follow a rise, and "
            "requests over the provisioned capacity are throttled meanwhile (executions late). For bursts, "
            "such as a million executions due in one minute, deploy on-demand (table_capacity=on_demand) "
            "or raise table_min_write_units and table_min_read_units to cover them (index_min_write_units "
            "for bursts of job creations); `punctual capacity --provisioned` prints the bounds for a load."
        )

    def grant_read_write(self, function: lambda_.Function) -> None:
        if function.role is None:
            raise ValueError("the function must have a role to grant to")
        self.table.grant_read_write_data(function)
        stack = Stack.of(self)
        logical_id = stack.resolve(stack.get_logical_id(cast(CfnElement, self.table.node.default_child)))
        Validations.of(function.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
                reason="The grant covers this table's own global secondary indexes "
                f"({', '.join(i.name for i in self.indexes)}), which the store queries.",
            )
        )
