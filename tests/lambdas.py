"""A Lambda function in moto for the `lambda` task's tests: moto, without Docker, answers each
invocation with the event it was given."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

TRUST_LAMBDA = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def create_echo_function(name: str, session: Any, endpoint_url: str | None = None) -> str:
    """Creates function `name` (and its role) in moto; returns its ARN."""
    iam = session.client("iam", endpoint_url=endpoint_url)
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(TRUST_LAMBDA))["Role"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return event\n")
    function = session.client("lambda", endpoint_url=endpoint_url).create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Arn"],
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )
    return str(function["FunctionArn"])
