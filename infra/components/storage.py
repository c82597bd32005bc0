"""The DynamoDB table, built from `punctual.resources.TABLE`."""

from __future__ import annotations

from typing import cast

from aws_cdk import Acknowledgment, CfnElement, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from punctual import resources


def _string(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Storage(Construct):
    def __init__(self, scope: Construct, id: str, *, deletion_protection: bool) -> None:
        super().__init__(scope, id)
        definition = resources.TABLE
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_string(definition.partition_key),
            sort_key=_string(definition.sort_key),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            deletion_protection=deletion_protection,
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else RemovalPolicy.DESTROY,
        )
        for index in definition.indexes:
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string(index.partition_key),
                sort_key=_string(index.sort_key),
                projection_type=dynamodb.ProjectionType(index.projection),
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
                f"({', '.join(i.name for i in resources.TABLE.indexes)}), which the store queries.",
            )
        )
