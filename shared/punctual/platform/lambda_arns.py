"""Which Lambda functions the `lambda` task may invoke: the deployment's allow-list of ARN patterns.

A pattern is a function ARN in which `*` stands for any characters and `?` for one, as in an IAM
policy's Resource, so that the same list grants the worker its permission (infra) and checks each
job (here): `arn:aws:lambda:eu-west-1:123456789012:function:reports-*`. A pattern names functions,
not versions or aliases: it lets a job invoke any version or alias of the functions it matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

_PARTITION = r"aws(?:-cn|-us-gov)?"
# arn:partition:lambda:region:account:function:name[:version or alias]
FUNCTION_ARN = re.compile(
    rf"arn:{_PARTITION}:lambda:[a-z]{{2}}(?:-[a-z]+)+-\d:\d{{12}}:function:[A-Za-z0-9_-]{{1,64}}"
    r"(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?"
)
PATTERN = re.compile(
    rf"arn:(?:{_PARTITION}|\*):lambda:[a-z0-9*?-]+:[0-9*?]+:function:[A-Za-z0-9_*?-]{{1,64}}"
)


def check_pattern(pattern: str) -> str:
    """A valid allow-list entry, or ValueError saying what one looks like."""
    if not PATTERN.fullmatch(pattern):
        raise ValueError(
            f"{pattern!r} is not a Lambda function ARN pattern "
            "(arn:aws:lambda:REGION:ACCOUNT:function:NAME, with * or ? as wildcards, no version or alias)"
        )
    return pattern


def unqualified(arn: str) -> str:
    """The function's ARN without a version or alias."""
    return ":".join(arn.split(":")[:7])


def region(arn: str) -> str:
    return arn.split(":")[3]


def is_allowed(arn: str, patterns: Iterable[str]) -> bool:
    function = unqualified(arn)
    return any(fnmatchcase(function, pattern) for pattern in patterns)


def iam_resources(patterns: Iterable[str]) -> list[str]:
    """The IAM resources that let the worker invoke what the patterns allow, versions and aliases too."""
    resources: list[str] = []
    for pattern in patterns:
        resources += [pattern, f"{pattern}:*"]
    return resources
