"""SQS work queue -> run each pack of executions; partial batch responses keep the ones to retry.

The records of a batch run concurrently (in threads), and a pack's executions side by side
(punctual.execution.packs), so a slow task does not hold back the others due at the same instant.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import wiring
from punctual.domain.work import read_body
from punctual.execution.receipts import Disposition
from punctual.platform.observability import log_request_id, metrics, tracer

# A batch whose records all wait (retries, early messages) is not a function error.
# One thread per record of a batch (the event source mapping's batch size): asyncio's default pool
# has fewer threads than that on a small Lambda, which would run slow tasks in waves.
_THREADS = ThreadPoolExecutor(max_workers=10)
processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class TryLater(Exception):
    """Reported as a batch item failure: the message returns when the visibility set for it ends."""


def handle_record(record: SQSRecord) -> None:
    outcome = wiring.default().packs.handle(
        read_body(record.body),
        record.receipt_handle,
        receive_count=int(record.attributes.approximate_receive_count or 1),
    )
    if outcome is Disposition.LATER:
        raise TryLater(record.message_id)


async def record_handler(record: SQSRecord) -> None:
    await asyncio.get_running_loop().run_in_executor(_THREADS, handle_record, record)


@log_request_id
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return async_process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
