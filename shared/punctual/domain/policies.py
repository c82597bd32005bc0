"""The rules a job is given beside its task and schedule: how its attempts are retried
(`RetryPolicy`), when its executions may start (`JobPolicy`) and whom its executions' events are told
to (`NotifyRule`). Validated request input, frozen once accepted, kept apart from the records that
hold them (`punctual.domain.models`). Plain Python, no AWS."""

from __future__ import annotations

import random
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from punctual.domain.schedules import _Schedule, is_recurring
from punctual.domain.validation import JSON_NUMBER, PLAIN_TEXT
from punctual.platform import target_arns


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter between attempts of one execution."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: Annotated[int, JSON_NUMBER] = Field(default=3, ge=1, le=10)
    backoff_seconds: Annotated[float, JSON_NUMBER] = Field(default=2, ge=0, le=3600)
    max_backoff_seconds: Annotated[float, JSON_NUMBER] = Field(default=300, ge=0, le=12 * 3600)

    def delay_after(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based): half fixed, half jitter."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * (2 ** (attempt - 1)))
        draw = (rng or random).random()
        return ceiling / 2 + draw * ceiling / 2


class Overlap(StrEnum):
    ALLOW = "allow"  # start each run at its time, whatever the previous one is doing
    SKIP = "skip"  # do not start while the previous run is under way: SKIPPED
    BUFFER_ONE = "buffer_one"  # wait for the previous run to end; one waits at most, later ones SKIPPED


MAX_FLEXIBLE_WINDOW_SECONDS = 900
MAX_PAUSE_AFTER_FAILURES = 1000
MAX_LATENESS_SECONDS = 366 * 24 * 3600


class JobPolicy(BaseModel):
    """When a job's executions may start, beyond its schedule. The defaults change nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_lateness_seconds: Annotated[int | None, JSON_NUMBER] = Field(
        default=None,
        ge=1,
        le=MAX_LATENESS_SECONDS,
        description=(
            "Catch-up window: an execution that would start more than this many seconds after its "
            "instant (after an outage, a restart, a long queue) is SKIPPED instead of run late. "
            "Null: always run, however late."
        ),
    )
    overlap: Overlap = Field(
        default=Overlap.ALLOW,
        description=(
            "Recurring jobs: `allow` starts each run on time; `skip` does not start a run while the job's "
            "previous run is under way (SKIPPED); `buffer_one` starts it once the previous run ends, "
            "and skips any later run that would also have to wait."
        ),
    )
    flexible_window_seconds: Annotated[int, JSON_NUMBER] = Field(
        default=0,
        ge=0,
        le=MAX_FLEXIBLE_WINDOW_SECONDS,
        description=(
            "Recurring jobs: start each run at a point within this many seconds after its time, the same "
            "for a given job and instant, so jobs on the same round minute do not all start in the "
            "same second (never past the next run's time). `next_run_at` shows the spread instant."
        ),
    )
    max_runs: Annotated[int | None, JSON_NUMBER] = Field(
        default=None,
        ge=1,
        le=1_000_000_000,
        description="Recurring jobs: after this many scheduled runs the job completes. Null: no limit.",
    )
    pause_after_failures: Annotated[int | None, JSON_NUMBER] = Field(
        default=None,
        ge=1,
        le=MAX_PAUSE_AFTER_FAILURES,
        description=(
            "Pause the job once this many of its executions in a row have FAILED (extra runs and "
            "retries of executions count), with a pause note saying so. Null: never."
        ),
    )

    @property
    def is_default(self) -> bool:
        return self == JobPolicy()


class NotifyEvent(StrEnum):
    """What a job's `notify` rules may ask to hear of, about each of its executions."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"  # ended FAILED, its attempts used up, a failure that no retry helps, or dead-lettered
    DEAD_LETTERED = "dead_lettered"  # ended FAILED because its message exhausted its deliveries
    LATE = "late"  # started more than the rule's `late_after_seconds` after its time
    SKIPPED = "skipped"  # SKIPPED by the job's policy (catch-up window, overlap)


MAX_NOTIFY_RULES = 10
MAX_LATE_AFTER_SECONDS = 7 * 24 * 3600
NOTIFY_TARGET_MAX_LENGTH = 2048


class TargetKind(StrEnum):
    WEBHOOK = "webhook"
    SNS = "sns"
    EVENTBRIDGE = "eventbridge"


def target_kind(to: str) -> TargetKind:
    """What a notification target names: a webhook URL, an SNS topic ARN or an EventBridge bus ARN.
    ValueError otherwise."""
    if to.startswith(("http://", "https://")):
        return TargetKind.WEBHOOK
    # (The ARN forms the sns and eventbridge tasks accept: punctual.platform.target_arns.)
    if target_arns.SNS.arn.fullmatch(to):
        return TargetKind.SNS
    if target_arns.EVENTBRIDGE.arn.fullmatch(to):
        return TargetKind.EVENTBRIDGE
    raise ValueError(
        "expected a webhook URL (http:// or https://), an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC) "
        "or an EventBridge event bus ARN (arn:aws:events:REGION:ACCOUNT:event-bus/NAME)"
    )


class NotifyRule(BaseModel):
    """Tell `to` of the job's executions' events named in `on`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on: list[NotifyEvent] = Field(
        min_length=1,
        max_length=len(NotifyEvent),
        description="Events to tell of: succeeded, failed, dead_lettered, late, skipped. A dead-lettered "
        "execution is told once to a rule, as dead_lettered if it asks for that, else as failed.",
    )
    to: Annotated[str, PLAIN_TEXT] = Field(
        min_length=1,
        max_length=NOTIFY_TARGET_MAX_LENGTH,
        description="A webhook URL (a signed POST when the job has a signing secret), an SNS topic ARN "
        "or an EventBridge event bus ARN; ARNs only those the deployment allows (notification_targets).",
    )
    late_after_seconds: Annotated[int | None, JSON_NUMBER] = Field(
        default=None,
        ge=1,
        le=MAX_LATE_AFTER_SECONDS,
        description="With `late` (and only then, where it is required): an execution is late when it "
        "starts more than this many seconds after its scheduled time.",
    )

    @field_validator("on")
    @classmethod
    def _distinct(cls, value: list[NotifyEvent]) -> list[NotifyEvent]:
        if len(set(value)) != len(value):
            raise ValueError("names an event twice")
        return value

    @field_validator("to")
    @classmethod
    def _target(cls, value: str) -> str:
        target_kind(value)
        return value

    @model_validator(mode="after")
    def _threshold(self) -> NotifyRule:
        late = NotifyEvent.LATE in self.on
        if late and self.late_after_seconds is None:
            raise ValueError(
                "late_after_seconds: required when `on` includes late (seconds after the scheduled time)"
            )
        if not late and self.late_after_seconds is not None:
            raise ValueError("late_after_seconds: applies only to a rule whose `on` includes late")
        return self

    @property
    def kind(self) -> TargetKind:
        return target_kind(self.to)


def check_policy(policy: JobPolicy, schedule: _Schedule) -> None:
    """Refuse (ValueError naming the field) what only a recurring schedule has a use for."""
    if is_recurring(schedule):
        return
    for name, default in (("overlap", Overlap.ALLOW), ("flexible_window_seconds", 0), ("max_runs", None)):
        if getattr(policy, name) != default:
            raise ValueError(f"policy.{name}: only a recurring (cron or rate) schedule has one")
