"""EventBridge tick (every minute) -> dispatch every execution due before now + lookahead.

With a fan-out above one, the tick scans nothing itself: it starts one asynchronous invocation of
this same function per shard group, and each of those scans its shards.
"""

import json
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import aws, wiring
from punctual.observability import logger, metrics, tracer
from punctual.scanner import fan_out


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    punctual = wiring.default()
    settings = punctual.settings
    shards = event.get("shards")
    if shards is None and settings.scanner_fanout > 1:
        client = aws.lambda_client(settings)

        def invoke(payload: dict[str, Any]) -> None:
            client.invoke(
                FunctionName=context.invoked_function_arn, InvocationType="Event", Payload=json.dumps(payload)
            )

        return {"fanned_out": fan_out(invoke, settings.shard_count, settings.scanner_fanout)}
    report = punctual.scanner(shards=shards).tick()
    return {k: str(v) if k.endswith("minute") else v for k, v in asdict(report).items()}
