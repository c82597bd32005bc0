"""What becomes of a work message once handled: deleted, or back after a delay set on its visibility
(or, for a pack's member, noted on its receipt for the pack to decide, punctual.execution.packs); and
how long a message waits after a failure its handling met.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

from punctual.domain.errors import RetryableStoreError, UnreadableItem
from punctual.domain.executions import Execution
from punctual.domain.models import Job
from punctual.platform.observability import logger
from punctual.platform.resources import WORK_QUEUE
from punctual.ports.queue import WorkQueue

THROTTLE_BACKOFF_SECONDS = 5
MAX_THROTTLE_BACKOFF_SECONDS = 900
UNREADABLE_RETRY_SECONDS = 300
# An unexpected error (a store or network failure no rule covers, a bug) brings the message back after
# this, doubling with each receive up to the work queue's visibility timeout: a passing fault costs
# seconds, not the 6.5 minutes a message left to its visibility timeout would, and a lasting one ends
# in the dead-letter queue after its receives (about 2 h 10 min rather than 2 h 45).
UNEXPECTED_RETRY_SECONDS = 5


class Disposition(Enum):
    """What becomes of a work message once handled."""

    DONE = "done"  # delete the message
    LATER = "later"  # leave it: it comes back when its visibility timeout (set here) ends


@dataclass
class Member:
    """A pack member's receipt: when the member must be looked at again is noted here (for the pack
    to decide, punctual.execution.packs) rather than set on a message's visibility."""

    later: float | None = None
    # A success's log fields, for its pack's one log line (Attempts.run's `noted`).
    succeeded: dict[str, Any] | None = None
    # A run whose end its pack writes with its batch's others once they have all ended (Attempts.run's
    # `defer`): its job as run, and the end.
    deferred: tuple[Job, Execution] | None = None

    def note(self, fields: dict[str, Any]) -> None:
        self.succeeded = fields

    def defer(self, job: Job, execution: Execution) -> None:
        self.deferred = (job, execution)


# A message's receipt handle, or a pack member's.
Receipt = str | Member


def later(queue: WorkQueue, receipt: Receipt, seconds: float) -> Disposition:
    """The message (or pack member) comes back in `seconds`."""
    if isinstance(receipt, Member):
        receipt.later = seconds
    else:
        queue.change_visibility(receipt, seconds)
    return Disposition.LATER


def doubling(first_seconds: int, receive_count: int, most_seconds: int) -> int:
    """A delay that doubles with each receive of a message, from its first up to its most."""
    return min(most_seconds, first_seconds * 2 ** max(0, receive_count - 1))


def failure_delay(exc: Exception, execution_id: str, receive_count: int, rng: random.Random) -> float:
    """How long a message whose handling raised `exc` waits before it comes back (the failure
    logged); called while `exc` is handled."""
    if isinstance(exc, UnreadableItem):
        # Written by a newer version (a deployment under way, say): leave it as it is, and the
        # message for a worker that can read it; after its receives it goes to the dead-letter queue.
        logger.error("execution cannot be read; message returns later", extra={"error": str(exc)})
        return UNREADABLE_RETRY_SECONDS
    if isinstance(exc, RetryableStoreError):
        # Throttled: come back sooner than the visibility timeout, backing off with each receive
        # so that a long throttle does not use up the receives and dead-letter the execution.
        delay = doubling(THROTTLE_BACKOFF_SECONDS, receive_count, MAX_THROTTLE_BACKOFF_SECONDS)
        logger.warning("store busy; message returns later", extra={"error": str(exc), "delay_seconds": delay})
        return delay * (1 + rng.random() / 2)
    delay = doubling(UNEXPECTED_RETRY_SECONDS, receive_count, WORK_QUEUE.visibility_timeout_seconds)
    logger.exception(
        "execution failed unexpectedly; message returns later",
        extra={"execution_id": execution_id, "delay_seconds": delay},
    )
    return delay
