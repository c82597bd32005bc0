"""boto3 clients built once per process from Settings (real AWS, or the local stack's moto server)."""

from __future__ import annotations

from typing import Any, cast

import boto3
from botocore.config import Config

from punctual.platform.config import Settings

# Standard retry mode backs off on throttling; what still fails surfaces as a retryable domain error.
# Client-side parameter validation is off: it is a fifth of the scanner's CPU (bench/scanner_throughput),
# and the services validate every request anyway.
_CONFIG = Config(
    retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=64, parameter_validation=False
)


def session(settings: Settings) -> boto3.session.Session:
    return boto3.session.Session(region_name=settings.region)


def dynamodb_resource(settings: Settings) -> Any:
    return session(settings).resource("dynamodb", endpoint_url=settings.endpoint_url, config=_CONFIG)


def dynamodb_client(settings: Settings, aws_session: boto3.session.Session | None = None) -> Any:
    """A plain client, without the resource's type conversion (the store's batch calls use it)."""
    return (aws_session or session(settings)).client(
        "dynamodb", endpoint_url=settings.endpoint_url, config=_CONFIG
    )


def sqs_client(settings: Settings) -> Any:
    return session(settings).client("sqs", endpoint_url=settings.endpoint_url, config=_CONFIG)


def secret_string(settings: Settings, secret_id: str) -> str:
    """A Secrets Manager secret's value (read when first needed, not put in the function's
    environment, where anyone who may read its configuration would see it)."""
    client = session(settings).client("secretsmanager", endpoint_url=settings.endpoint_url, config=_CONFIG)
    return str(client.get_secret_value(SecretId=secret_id)["SecretString"])


def lambda_client(settings: Settings) -> Any:
    return session(settings).client("lambda", endpoint_url=settings.endpoint_url, config=_CONFIG)


def lambda_invoke_client(
    settings: Settings,
    region: str,
    read_timeout_seconds: int,
    aws_session: boto3.session.Session | None = None,
) -> Any:
    """For the `lambda` task, in the function's region: one attempt a call (the worker's retries back
    off and count attempts), waiting as long as the job's timeout for the function's answer."""
    config = Config(
        retries={"total_max_attempts": 1},
        connect_timeout=5,
        read_timeout=read_timeout_seconds,
        tcp_keepalive=True,
    )
    return (aws_session or session(settings)).client(
        "lambda", region_name=region, endpoint_url=settings.endpoint_url, config=config
    )


def target_client(
    settings: Settings,
    service: str,
    region: str,
    read_timeout_seconds: int,
    aws_session: boto3.session.Session | None = None,
    *,
    attempts: int = 1,
) -> Any:
    """For the AWS target tasks (sqs, sns, events, stepfunctions) and the notifier's SNS and
    EventBridge targets, in the resource's region: one attempt a call by default, as for
    `lambda_invoke_client` (the job's retry policy, or the notification's message, retries). The
    execution-events function, whose batch a failure sends round again, asks for a few."""
    config = Config(
        retries={"total_max_attempts": attempts, "mode": "standard"},
        connect_timeout=5,
        read_timeout=read_timeout_seconds,
        tcp_keepalive=True,
    )
    return (aws_session or session(settings)).client(
        cast(Any, service), region_name=region, endpoint_url=settings.endpoint_url, config=config
    )
