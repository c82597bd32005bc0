"""EventBridge tick (every minute) -> dispatch every execution due before now + lookahead.

With a fan-out above one, the tick scans nothing itself: it starts one asynchronous invocation of
this same function per shard group, and each of those scans its shards.
The tick's own invocation (not the shard groups') then runs the burst forecast, when it is on
(punctual.scheduling.prescaling): counting the coming minutes and warming the worker mapping's pollers.
"""

import json
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import wiring
from punctual.platform import aws
from punctual.platform.observability import logger, metrics, tracer
from punctual.scheduling.scanner import fan_out


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

        started = fan_out(invoke, settings.shard_count, settings.scanner_fanout)
        forecast(punctual)
        return {"fanned_out": started}
    report = punctual.scanner(shards=shards).tick()
    if shards is None:
        forecast(punctual)
    return {k: str(v) if k.endswith("minute") else v for k, v in asdict(report).items()}


def forecast(punctual: wiring.Punctual) -> None:
    """The burst forecast, after the tick's own work: a failure there is logged, never the tick's."""
    planner = punctual.burst_planner()
    if planner is None:
        return
    try:
        planner.run()
    except Exception:
        logger.exception("burst forecast failed; the next tick runs it again")
