"""Put one execution of a job on the local stack's dead-letter queue, as SQS does once a message has
used up its deliveries (a worker crashing on it, say), to try `punctual dead-letters` on this machine.

    python examples/dead_letter.py MOTO_URL JOB_ID

MOTO_URL is the AWS line of the local stack's banner. Prints the dead-lettered execution's id once
the stack's dead-letter handler has taken the message (it then shows in `punctual dead-letters list`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import boto3

DEAD_LETTER_QUEUE = "punctual-dead-letter"
WAIT_SECONDS = 30


def main(moto_url: str, job_id: str) -> str:
    sqs = boto3.client(
        "sqs",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="test",  # moto takes any credentials
        aws_secret_access_key="test",
    )
    now_ms = int(time.time() * 1000)
    # The id of an extra run ("r..."), as `punctual jobs run` would draw it.
    execution_id = f"{job_id}.{now_ms:x}.rdemo{now_ms % 10_000:04d}"
    message = {
        "job_id": job_id,
        "execution_id": execution_id,
        "scheduled_ms": now_ms,
        "manual": True,
        "schedule_version": 1,
    }
    queue = sqs.get_queue_url(QueueName=DEAD_LETTER_QUEUE)["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(message))
    deadline = time.monotonic() + WAIT_SECONDS
    while _waiting(sqs, queue):
        if time.monotonic() > deadline:
            sys.exit(f"the local stack has not taken the message in {WAIT_SECONDS} s: is it running?")
        time.sleep(0.2)
    return execution_id


def _waiting(sqs: Any, queue: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(main(sys.argv[1], sys.argv[2]))
