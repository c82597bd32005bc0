"""The public API: API Gateway (REST, IAM authorization) in front of the API function."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.components.functions import FunctionFactory, retention
from infra.components.queues import Queues
from infra.components.storage import Storage

STAGE_NAME = "v1"


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        factory: FunctionFactory,
        storage: Storage,
        queues: Queues,
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
            # API Gateway gives up on an integration after 29 s.
            timeout=Duration.seconds(29),
            environment={"PUNCTUAL_CURSOR_SECRET": cursor_secret.secret_value.unsafe_unwrap()},
        )
        storage.grant_read_write(self.function)
        # Executions due before the scanner's next tick are handed to the queue by the API itself.
        queues.work_queue.grant_send_messages(self.function)

        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(log_retention_days), removal_policy=removal_policy
        )
        self.rest_api = apigateway.LambdaRestApi(
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
        self._acknowledge()

    def _acknowledge(self) -> None:
        reasons = {
            "AwsSolutions-APIG2": "Requests are validated by the API function (pydantic), which answers "
            "400/422 naming the offending field as API.md requires; a gateway validator cannot.",
            "AwsSolutions-APIG3": "Every method requires SigV4 (IAM) and the stage is throttled; a WAF web "
            "ACL is left to the deploying account's edge policy.",
            "AwsSolutions-COG4": "The API authorizes with IAM (SigV4): the owner is the caller's IAM "
            "principal, as API.md specifies. Cognito is not used.",
        }
        for rule, reason in reasons.items():
            Validations.of(self.rest_api).acknowledge(Acknowledgment(id=rule, reason=reason))
        Validations.of(self.rest_api).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                reason="API Gateway's account-wide logging role uses the AWS managed policy made for it; "
                "access logs need it.",
            )
        )
