"""EventBridge tick (every minute) -> dispatch every execution due before now + lookahead."""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import wiring
from punctual.observability import logger, metrics, tracer


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    punctual = wiring.default()
    shards = event.get("shards")  # a fan-out invocation scans a group of shards
    scanner = punctual.scanner(shards=shards, group=event.get("group", "all"))
    report = scanner.tick()
    return {k: str(v) if k.endswith("minute") else v for k, v in asdict(report).items()}
