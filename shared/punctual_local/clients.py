"""What the stack's processes share to reach moto: AWS clients made for it, its storage status, and the
checkout's handlers on the import path."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config

from punctual_local.loopback_http import use_loopback_http
from punctual_local.moto.gate import mark_api_reads

REGION = "us-east-1"
# Unsigned: moto checks no signature (loopback_http.use_loopback_http gives its requests the header
# moto reads the service and region from). Unvalidated, as the deployed clients are (punctual.platform.aws):
# the store builds its own requests, and moto checks them anyway.
_CLIENT_CONFIG = Config(
    retries={"max_attempts": 3, "mode": "standard"},
    max_pool_connections=256,
    signature_version=UNSIGNED,
    parameter_validation=False,
)


class StackError(Exception):
    """The stack cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class MotoClients:
    session: Any
    dynamodb_client: Any
    dynamodb: Any  # the resource
    sqs: Any


def connect(moto_url: str, *, api_reads: bool = False) -> MotoClients:
    """Clients of moto at `moto_url`; `api_reads` (the API's process): their DynamoDB calls in
    `gate.api_read` blocks are marked as the API's reads for moto's gate."""
    session = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
    )
    dynamodb_client = session.client("dynamodb", endpoint_url=moto_url, config=_CLIENT_CONFIG)
    sqs = session.client("sqs", endpoint_url=moto_url, config=_CLIENT_CONFIG)
    dynamodb = session.resource("dynamodb", endpoint_url=moto_url, config=_CLIENT_CONFIG)
    for client in (dynamodb_client, sqs, dynamodb.meta.client):
        use_loopback_http(client)
    if api_reads:
        mark_api_reads(dynamodb_client)
        mark_api_reads(dynamodb.meta.client)
    return MotoClients(session, dynamodb_client, dynamodb, sqs)


# Asked only after a write failed: a loaded machine can take seconds to answer, and no answer reads as
# "no disk failure", which turns the client's 503 (retry later) into a 502.
STATUS_TIMEOUT_SECONDS = 10.0


def storage_failure(moto_url: str) -> Callable[[], str | None]:
    """Why moto's process refuses writes (its disk failed), or None; asked after a failed write, each
    time: moto takes writes again by itself once its disk does."""

    def ask() -> str | None:
        try:
            with urllib.request.urlopen(
                f"{moto_url}/_punctual/status", timeout=STATUS_TIMEOUT_SECONDS
            ) as answer:
                failure = json.loads(answer.read()).get("failure")
        except (OSError, ValueError):
            return None
        return str(failure) if failure else None

    return ask


def source_root() -> Path:
    """The checkout holding functions/ (the handlers), which is not part of the installed package."""
    import punctual

    for root in (Path(punctual.__file__).resolve().parents[2], Path.cwd()):
        if (root / "functions" / "__init__.py").is_file():
            return root
    raise StackError("the Lambda handlers (functions/) were not found: run from a Punctual source checkout")


def add_source_root() -> None:
    root = str(source_root())
    if root not in sys.path:
        sys.path.insert(0, root)
