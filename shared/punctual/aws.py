"""boto3 clients built once per process from Settings (real AWS, or the local stack's moto server)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from punctual.config import Settings

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


def dynamodb_client(settings: Settings) -> Any:
    """A plain client, without the resource's type conversion (the store's batch calls use it)."""
    return session(settings).client("dynamodb", endpoint_url=settings.endpoint_url, config=_CONFIG)


def sqs_client(settings: Settings) -> Any:
    return session(settings).client("sqs", endpoint_url=settings.endpoint_url, config=_CONFIG)


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


def client_in(
    settings: Settings, service: str, region: str, aws_session: boto3.session.Session | None = None
) -> Any:
    """A client of `service` in `region` (the notifier's SNS and EventBridge targets), a few seconds'
    patience: a delivery that cannot get through is retried later, by its message."""
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=10)
    made: Any = (aws_session or session(settings)).client(
        service,  # type: ignore[call-overload]  # (boto3's stubs want a literal service name)
        region_name=region,
        endpoint_url=settings.endpoint_url,
        config=config,
    )
    return made
