"""Deployment settings, read from CDK context (cdk.json, overridden with `-c key=value`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from punctual import resources
from punctual.config import Settings

# Context values given on the command line arrive as strings; cdk.json gives JSON types.
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class DeploySettings:
    stack_name: str = resources.APP_NAME
    # Sized for the promise: 10,000 executions a second and a 1,000,000-execution minute drained in
    # under 30 s (docs/scaling.md, `punctual capacity --jobs-per-second 10000 --burst 1000000`).
    # Shard count may grow between deployments, never shrink: markers keep the shard they were filed in.
    shard_count: int = 64
    # Scanner invocations per tick, each scanning its share of the shards (1: no fan-out).
    scanner_fanout: int = 64
    lookahead_seconds: int = 90
    retention_days: int = 30
    webhook_allowed_networks: tuple[str, ...] = ()
    alarm_email: str | None = None
    # Off only for throwaway test stacks: the table and the logs are then deleted with the stack.
    deletion_protection: bool = True
    worker_max_concurrency: int = 20
    # AWS's public Powertools layer (account 017000801446); 32 carries Powertools 3.28.0.
    powertools_layer_version: int = 32
    log_level: str = "INFO"
    log_retention_days: int = 30
    api_throttle_rate: int = 50
    api_throttle_burst: int = 100

    def __post_init__(self) -> None:
        # The functions validate their configuration at cold start; fail at synth instead.
        self.function_settings()
        if not 2 <= self.worker_max_concurrency <= 1000:
            raise ValueError("worker_max_concurrency must be between 2 and 1000 (SQS event source limit)")
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"log_level {self.log_level!r} is not a Python logging level")

    def function_settings(self) -> Settings:
        """The functions' own settings model, filled from this deployment's values."""
        return Settings(
            shard_count=self.shard_count,
            scanner_fanout=self.scanner_fanout,
            lookahead_seconds=self.lookahead_seconds,
            retention_days=self.retention_days,
            webhook_allowed_networks=self.webhook_allowed_networks,
        )

    @classmethod
    def from_context(cls, value: Callable[[str], Any]) -> DeploySettings:
        """Read from a context lookup such as `app.node.try_get_context`."""
        values: dict[str, Any] = {}
        for key, kind in (
            ("stack_name", str),
            ("shard_count", int),
            ("scanner_fanout", int),
            ("lookahead_seconds", int),
            ("retention_days", int),
            ("worker_max_concurrency", int),
            ("powertools_layer_version", int),
            ("log_level", str),
            ("log_retention_days", int),
            ("api_throttle_rate", int),
            ("api_throttle_burst", int),
        ):
            if value(key) not in (None, ""):
                values[key] = kind(value(key))
        if value("deletion_protection") is not None:
            values["deletion_protection"] = _as_bool("deletion_protection", value("deletion_protection"))
        values["alarm_email"] = str(value("alarm_email") or "").strip() or None
        values["webhook_allowed_networks"] = _as_list(value("webhook_allowed_networks"))
        return cls(**values)


def _as_bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"context {key}={raw!r} is not a boolean")


def _as_list(raw: Any) -> tuple[str, ...]:
    """A JSON list (cdk.json) or a comma-separated string (`-c webhook_allowed_networks=a,b`)."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())
