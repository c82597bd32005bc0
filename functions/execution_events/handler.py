"""The table's stream -> one EventBridge event per execution status change, on the stack's bus."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.notify.execution_events import publish
from punctual.platform import aws
from punctual.platform.config import settings
from punctual.platform.observability import logger, metrics, tracer

_EVENTS: list[Any] = []


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config = settings()
    if not _EVENTS:
        _EVENTS.append(aws.target_client(config, "events", config.region, 10, attempts=3))
    return publish(event.get("Records", []), _EVENTS[0], config.event_bus_name, config.execution_events)
