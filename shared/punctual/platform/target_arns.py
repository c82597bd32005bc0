"""Which AWS resources a deployment lets jobs reach, by ARN pattern: `*` any characters and `?` one,
as in an IAM policy's Resource, so that one list both checks each job and scopes an IAM grant (infra).
None by default.

Two uses, one matcher:

- the AWS target tasks (`sqs`, `sns`, `eventbridge`, `stepfunctions`), one setting each
  (`sqs_queues`, `sns_topics`, `eventbridge_buses`, `state_machines`): checked by the API and the
  worker, granted to the worker: `arn:aws:sqs:eu-west-1:123456789012:orders-*`;
- job notifications (`notify` rules) to SNS topics and EventBridge buses, one setting for both
  (`notification_targets`): checked by the API and the notifier, granted to the notifier:
  `arn:aws:sns:eu-west-1:123456789012:alerts-*`, `arn:aws:events:eu-west-1:123456789012:event-bus/ops`.

The settings are distinct (a topic a task may publish to is not thereby one notifications may go
to, nor the reverse), the ARN and pattern checks are the targets' below, shared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

_PARTITION = r"aws(?:-cn|-us-gov)?"
_REGION = r"[a-z]{2}(?:-[a-z]+)+-\d"


@dataclass(frozen=True)
class Target:
    type: str  # the task type
    setting: str  # the allow-list's name in Settings, DeploySettings and CDK context
    env: str  # its environment variable
    param: str  # the task parameter that names the resource
    action: str  # the IAM action the worker is granted on the allowed resources
    arn: re.Pattern[str]
    pattern: re.Pattern[str]
    example: str
    local: str  # the local stack's pattern: everything in its moto

    def check_pattern(self, pattern: str) -> str:
        if not self.pattern.fullmatch(pattern):
            raise ValueError(f"{pattern!r} is not an ARN pattern for {self.setting} (e.g. {self.example})")
        return pattern

    def is_allowed(self, arn: str, patterns: Iterable[str]) -> bool:
        return is_allowed(arn, patterns)

    def patterns_in(self, patterns: Iterable[str]) -> list[str]:
        """Those of `patterns` that are this target's (a mixed list's share, e.g. for its IAM grant)."""
        return [p for p in patterns if self.pattern.fullmatch(p)]


def is_allowed(arn: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(arn, pattern) for pattern in patterns)


def _target(
    type: str, setting: str, param: str, action: str, service: str, resource: str, wild: str, example: str
) -> Target:
    return Target(
        type=type,
        setting=setting,
        env=f"PUNCTUAL_{setting.upper()}",
        param=param,
        action=action,
        arn=re.compile(rf"arn:{_PARTITION}:{service}:{_REGION}:\d{{12}}:{resource}"),
        pattern=re.compile(rf"arn:(?:{_PARTITION}|\*):{service}:[a-z0-9*?-]+:[0-9*?]+:{wild}"),
        example=example,
        local=f"arn:aws:{service}:*:*:*",
    )


SQS = _target(
    "sqs",
    "sqs_queues",
    "queue_arn",
    "sqs:SendMessage",
    "sqs",
    r"[A-Za-z0-9_-]{1,75}(?:\.fifo)?",
    r"[A-Za-z0-9_.*?-]{1,80}",
    "arn:aws:sqs:us-east-1:123456789012:orders-*",
)
SNS = _target(
    "sns",
    "sns_topics",
    "topic_arn",
    "sns:Publish",
    "sns",
    r"[A-Za-z0-9_-]{1,251}(?:\.fifo)?",
    r"[A-Za-z0-9_.*?-]{1,256}",
    "arn:aws:sns:us-east-1:123456789012:alerts",
)
EVENTBRIDGE = _target(
    "eventbridge",
    "eventbridge_buses",
    "event_bus_arn",
    "events:PutEvents",
    "events",
    r"event-bus/[A-Za-z0-9._/-]{1,256}",
    r"(?:event-bus/[A-Za-z0-9._/*?-]{1,256}|\*)",
    "arn:aws:events:us-east-1:123456789012:event-bus/default",
)
STEPFUNCTIONS = _target(
    "stepfunctions",
    "state_machines",
    "state_machine_arn",
    "states:StartExecution",
    "states",
    r"stateMachine:[A-Za-z0-9_-]{1,80}",
    r"(?:stateMachine:[A-Za-z0-9_*?-]{1,80}|\*)",
    "arn:aws:states:us-east-1:123456789012:stateMachine:nightly-*",
)
TARGETS = (SQS, SNS, EVENTBRIDGE, STEPFUNCTIONS)

# What job notifications may go to besides webhooks: one allow-list (`notification_targets`) mixing
# both kinds, each entry checked against either's pattern.
NOTIFICATION_TARGETS = (SNS, EVENTBRIDGE)


def check_notification_pattern(pattern: str) -> str:
    """A valid `notification_targets` entry, or ValueError saying what one looks like."""
    if not any(target.pattern.fullmatch(pattern) for target in NOTIFICATION_TARGETS):
        raise ValueError(
            f"{pattern!r} is neither an SNS topic ARN pattern (e.g. {SNS.example}) nor an EventBridge "
            f"bus ARN pattern (e.g. {EVENTBRIDGE.example}), * and ? as wildcards"
        )
    return pattern


def region(arn: str) -> str:
    return arn.split(":")[3]


def account(arn: str) -> str:
    return arn.split(":")[4]


def resource_name(arn: str) -> str:
    return arn.split(":", 5)[5]
