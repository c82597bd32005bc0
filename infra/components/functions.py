"""Lambda defaults in one place: every Punctual function is made by `FunctionFactory.create`."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Acknowledgment, ArnFormat, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.components.bundling import lambda_code
from punctual.platform import observability, resources

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
POWERTOOLS_LAYER_ACCOUNT = "017000801446"  # AWS's account for the public Powertools layers

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention(days: int) -> logs.RetentionDays:
    try:
        return _RETENTION[days]
    except KeyError:
        raise ValueError(f"log retention of {days} days is not one of {sorted(_RETENTION)}") from None


def powertools_layer_name() -> str:
    """The layer built for exactly this runtime and architecture, e.g. ...-python312-arm64."""
    return f"AWSLambdaPowertoolsPythonV3-{RUNTIME.name.replace('.', '')}-{ARCHITECTURE.name}"


class FunctionFactory:
    """Makes the stack's functions: same code asset, runtime, layer, tracing and logging."""

    def __init__(
        self,
        scope: Construct,
        *,
        environment: Mapping[str, str],
        log_level: str,
        log_retention_days: int,
        powertools_layer_version: int,
        removal_policy: RemovalPolicy,
    ) -> None:
        self._code = lambda_code(RUNTIME)
        self._layer = lambda_.LayerVersion.from_layer_version_arn(
            scope,
            "PowertoolsLayer",
            Stack.of(scope).format_arn(
                service="lambda",
                account=POWERTOOLS_LAYER_ACCOUNT,
                resource="layer",
                resource_name=f"{powertools_layer_name()}:{powertools_layer_version}",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
        )
        self._environment = {
            "POWERTOOLS_SERVICE_NAME": observability.SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": observability.NAMESPACE,
            "LOG_LEVEL": log_level.upper(),
            "POWERTOOLS_LOG_LEVEL": log_level.upper(),
            **environment,
        }
        self._retention = retention(log_retention_days)
        self._removal_policy = removal_policy
        self.functions: dict[str, lambda_.Function] = {}

    def create(
        self,
        scope: Construct,
        id: str,
        name: str,
        *,
        description: str,
        timeout: Duration,
        memory_size: int = 512,
        environment: Mapping[str, str] | None = None,
    ) -> lambda_.Function:
        """A function running `resources.FUNCTIONS[name]`, with its own role and log group."""
        group = Construct(scope, id)
        log_group = logs.LogGroup(
            group, "Logs", retention=self._retention, removal_policy=self._removal_policy
        )
        # A role without the AWS managed basic-execution policy: it may write to its own log
        # group only, and each construct adds the grants its function needs.
        role = iam.Role(
            group,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Punctual {name} function",
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            group,
            "Function",
            description=description,
            code=self._code,
            handler=resources.FUNCTIONS[name],
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            layers=[self._layer],
            memory_size=memory_size,
            timeout=timeout,
            tracing=lambda_.Tracing.ACTIVE,
            environment={**self._environment, **(environment or {})},
            role=role,
            log_group=log_group,
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level "
                "permissions; CDK adds them for active tracing.",
            )
        )
        Validations.of(function).acknowledge(
            Acknowledgment(
                id="AwsSolutions-L1",
                reason=f"Pinned to {RUNTIME.name}: the Powertools layer and the dependencies are "
                "built and tested for it. Move runtime and layer together.",
            )
        )
        self.functions[name] = function
        return function
