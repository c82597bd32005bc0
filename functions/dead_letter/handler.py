"""SQS dead-letter queue -> mark each execution (each of a pack's) FAILED (and complete its one-time job), keep it for
its owner to redrive, and notify."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import wiring
from punctual.domain.work import read_body
from punctual.execution.dead_letters import dead_letter
from punctual.platform.observability import logger, metrics, tracer

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    punctual = wiring.default()
    # A pack's executions each (those that ended are left as they are, dead_letters.dead_letter).
    for item in read_body(record.body).items:
        dead_letter(punctual.store, punctual.clock, item, punctual.hooks)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
