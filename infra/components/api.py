"""The public API: API Gateway (an HTTP API by default, or a REST API; IAM authorization either way)
in front of the API function, which answers the events of either."""

from __future__ import annotations

import json
from typing import Any, Protocol

import jsii
from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigatewayv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.components.functions import FunctionFactory, retention
from infra.components.queues import Queues
from infra.components.storage import Storage
from infra.settings import HTTP_API, REST_API

# Either type serves its API under this stage: clients call https://<api>.execute-api.<region>.<suffix>/v1/.
STAGE_NAME = "v1"

# An HTTP API's access log, one JSON object a request, with the $context variables HTTP APIs offer
# (REST-only ones such as $context.resourcePath would not be filled). identity.* name the IAM caller.
HTTP_ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "caller": "$context.identity.caller",
        "user": "$context.identity.user",
        "userArn": "$context.identity.userArn",
        "requestTime": "$context.requestTime",
        "httpMethod": "$context.httpMethod",
        "routeKey": "$context.routeKey",
        "path": "$context.path",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
        "error": "$context.error.message",
        "authorizerError": "$context.authorizer.error",
    }
)


class ApiMetrics(Protocol):
    """The API's CloudWatch metrics, whatever its type: a REST API (namespace AWS/ApiGateway,
    dimension ApiName) or an HTTP API's stage (AWS/ApiGateway, ApiId and Stage) both offer these."""

    def metric_count(self, **props: Any) -> cloudwatch.Metric: ...

    def metric_client_error(self, **props: Any) -> cloudwatch.Metric: ...

    def metric_server_error(self, **props: Any) -> cloudwatch.Metric: ...

    def metric_latency(self, **props: Any) -> cloudwatch.Metric: ...


# An interface, not a struct, in jsii: Python must implement it (a dict is refused).
@jsii.implements(apigatewayv2.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup, log_format: str) -> None:
        self._destination = apigatewayv2.LogGroupLogDestination(log_group)
        self._format = apigateway.AccessLogFormat.custom(log_format)

    @property
    def destination(self) -> apigatewayv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return self._format


class Api(Construct):
    """The API function behind API Gateway. `url` is the base URL clients call (with a trailing
    slash) and `metrics` the gateway's metrics, for either `api_type`."""

    url: str
    metrics: ApiMetrics

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        factory: FunctionFactory,
        storage: Storage,
        queues: Queues,
        api_type: str,
        throttle_rate: int,
        throttle_burst: int,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, id)
        # Signs pagination cursors. CloudFormation resolves the reference at deploy time, so the
        # value appears in neither the template nor the repository.
        cursor_secret = secretsmanager.Secret(
            self,
            "CursorSecret",
            description="Punctual: HMAC key that signs list cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=48
            ),
            removal_policy=removal_policy,
        )
        Validations.of(cursor_secret).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason="A cursor-signing key needs no rotation schedule: rotating it only invalidates "
                "outstanding cursors, and it protects no credential.",
            )
        )
        self.function = factory.create(
            self,
            "Handler",
            "api",
            description="Punctual API: jobs, executions, schedule previews",
            # API Gateway gives up on an integration after 29 s (REST) or 30 s (HTTP).
            timeout=Duration.seconds(29),
            environment={"PUNCTUAL_CURSOR_SECRET": cursor_secret.secret_value.unsafe_unwrap()},
        )
        storage.grant_read_write(self.function)
        # Executions due before the scanner's next tick are handed to the queue by the API itself.
        queues.work_queue.grant_send_messages(self.function)

        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(log_retention_days), removal_policy=removal_policy
        )
        self.rest_api: apigateway.RestApi | None = None
        self.http_api: apigatewayv2.HttpApi | None = None
        if api_type == REST_API:
            self.rest_api = self._rest_api(access_logs, throttle_rate, throttle_burst)
            self.url, self.metrics = self.rest_api.url, self.rest_api
        elif api_type == HTTP_API:
            self.http_api, stage = self._http_api(access_logs, throttle_rate, throttle_burst)
            # The stage's URL has no trailing slash; clients join paths onto the base URL.
            self.url, self.metrics = f"{stage.url}/", stage
        else:
            raise ValueError(f"api_type {api_type!r} is not one of {HTTP_API}, {REST_API}")

    def _http_api(
        self, access_logs: logs.LogGroup, throttle_rate: int, throttle_burst: int
    ) -> tuple[apigatewayv2.HttpApi, apigatewayv2.HttpStage]:
        http_api = apigatewayv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"{Stack.of(self).stack_name}-api",
            description="Punctual job scheduler API (IAM/SigV4 authorization)",
            # The owner of every request is its IAM principal (requestContext.authorizer.iam.userArn).
            default_authorizer=authorizers.HttpIamAuthorizer(),
            create_default_stage=False,
        )
        integration = integrations.HttpLambdaIntegration(
            "Function",
            self.function,
            payload_format_version=apigatewayv2.PayloadFormatVersion.VERSION_2_0,
        )
        # {proxy+} needs at least one path segment: the root gets its own route, as in the REST API.
        # (HTTP APIs take no WAF web ACL, resource policy or X-Ray tracing: api_type=rest has them.)
        for path in ("/", "/{proxy+}"):
            http_api.add_routes(path=path, methods=[apigatewayv2.HttpMethod.ANY], integration=integration)
        stage = http_api.add_stage(
            "Stage",
            stage_name=STAGE_NAME,
            auto_deploy=True,
            throttle=apigatewayv2.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
            # HTTP APIs write access logs through API Gateway's service-linked role: no account role.
            access_log_settings=_AccessLogSettings(access_logs, HTTP_ACCESS_LOG_FORMAT),
        )
        return http_api, stage

    def _rest_api(
        self, access_logs: logs.LogGroup, throttle_rate: int, throttle_burst: int
    ) -> apigateway.RestApi:
        rest_api = apigateway.LambdaRestApi(
            self,
            "RestApi",
            # Also the ApiName dimension of its metrics: unique per stack.
            rest_api_name=f"{Stack.of(self).stack_name}-api",
            description="Punctual job scheduler API (IAM/SigV4 authorization)",
            handler=self.function,
            proxy=True,
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            # The owner of every request is its IAM principal (requestContext.identity.userArn).
            default_method_options=apigateway.MethodOptions(
                authorization_type=apigateway.AuthorizationType.IAM
            ),
            # Access logs need the account's API Gateway CloudWatch role; create it if missing.
            cloud_watch_role=True,
            deploy_options=apigateway.StageOptions(
                stage_name=STAGE_NAME,
                throttling_rate_limit=throttle_rate,
                throttling_burst_limit=throttle_burst,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                tracing_enabled=True,
            ),
        )
        self._acknowledge_rest(rest_api)
        return rest_api

    @staticmethod
    def _acknowledge_rest(rest_api: apigateway.RestApi) -> None:
        reasons = {
            "AwsSolutions-APIG2": "Requests are validated by the API function (pydantic), which answers "
            "400/422 naming the offending field as docs/api.md requires; a gateway validator cannot.",
            "AwsSolutions-APIG3": "Every method requires SigV4 (IAM) and the stage is throttled; a WAF web "
            "ACL is left to the deploying account's edge policy.",
            "AwsSolutions-COG4": "The API authorizes with IAM (SigV4): the owner is the caller's IAM "
            "principal, as docs/api.md specifies. Cognito is not used.",
        }
        for rule, reason in reasons.items():
            Validations.of(rest_api).acknowledge(Acknowledgment(id=rule, reason=reason))
        Validations.of(rest_api).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                reason="API Gateway's account-wide logging role uses the AWS managed policy made for it; "
                "access logs need it.",
            )
        )
