"""Which SNS topics and EventBridge buses job notifications may go to: the deployment's allow-list
(`notification_targets`, for the notifier; the AWS target tasks have their own).

As `lambda_arns` does for the `lambda` task: ARN patterns with `*` for any characters and `?` for one,
as in an IAM policy's Resource, so that one list grants the notifier its permissions (infra) and checks
each job's `notify` rules (here): `arn:aws:sns:eu-west-1:123456789012:alerts-*`,
`arn:aws:events:eu-west-1:123456789012:event-bus/ops`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

_PARTITION = r"(?:aws(?:-cn|-us-gov)?|\*)"
SNS_PATTERN = re.compile(rf"arn:{_PARTITION}:sns:[a-z0-9*?-]+:[0-9*?]+:[A-Za-z0-9_.*?-]{{1,256}}")
BUS_PATTERN = re.compile(
    rf"arn:{_PARTITION}:events:[a-z0-9*?-]+:[0-9*?]+:event-bus/[A-Za-z0-9._/*?-]{{1,256}}"
)


def check_pattern(pattern: str) -> str:
    """A valid allow-list entry, or ValueError saying what one looks like."""
    if not (SNS_PATTERN.fullmatch(pattern) or BUS_PATTERN.fullmatch(pattern)):
        raise ValueError(
            f"{pattern!r} is neither an SNS topic ARN pattern (arn:aws:sns:REGION:ACCOUNT:TOPIC) nor an "
            "EventBridge bus ARN pattern (arn:aws:events:REGION:ACCOUNT:event-bus/NAME), * and ? as wildcards"
        )
    return pattern


def is_allowed(arn: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(arn, pattern) for pattern in patterns)


def topics(patterns: Iterable[str]) -> list[str]:
    return [p for p in patterns if SNS_PATTERN.fullmatch(p)]


def buses(patterns: Iterable[str]) -> list[str]:
    return [p for p in patterns if BUS_PATTERN.fullmatch(p)]


def region(arn: str) -> str:
    return arn.split(":")[3]
