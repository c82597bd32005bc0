"""The table's stream -> execution status changes on the stack's bus, grouped by owner and status."""

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import wiring
from punctual.platform import aws
from punctual.platform.config import settings
from punctual.platform.observability import logger, metrics, tracer

_PUBLISH: list[Callable[[list[dict[str, Any]]], dict[str, Any]]] = []


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config = settings()
    if not _PUBLISH:
        events = aws.target_client(config, "events", config.region, 10, attempts=3)
        _PUBLISH.append(wiring.execution_events(events, config))
    return _PUBLISH[0](event.get("Records", []))
