"""Taking a work message's pack: its executions started side by side, the message kept or let go as one.

Each member is run as a lone execution is (`Worker.handle`): it claims its own execution, so a pack
received twice (a duplicate, or a redelivery after a worker died part-way) runs nothing twice, and
runs again, with the same execution ids, only the members that had not ended. What a member would
have done to its message (come back later: early, held by another worker's lease, retried, held by
its job's policy) is noted instead, and the pack decides once:
- every member ended: the message is deleted;
- every member waits about as long: the message comes back then (its visibility set once);
- otherwise the members that wait are sent on in packs of their own (guarded: they were sent before),
  those that wait about the shortest time together, each of the others alone, and the message is
  deleted. Nothing that ended is looked at again, and a slow retry does not hold up the rest.
A pack of one is its execution's message, as before packs.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

from punctual.execution.worker import Disposition, Known, Member, Worker, WorkerConfig
from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual.store.queue import MAX_DELAY_SECONDS, Pack, WorkItem, WorkQueue

# Members started at once: each webhook start holds a socket, and Lambda allows 1,024 descriptors.
FIRE_THREADS = 400
# Members waiting within this much of the shortest wait stay together; any waiting longer goes alone.
TOGETHER_SECONDS = 10.0


class PackRunner:
    def __init__(self, worker: Worker, queue: WorkQueue, clock: Clock, config: WorkerConfig) -> None:
        self._worker = worker
        self._queue = queue
        self._clock = clock
        self._config = config

    def handle(self, pack: Pack, receipt_handle: str, receive_count: int = 1) -> Disposition:
        wait = (pack.scheduled_at - self._clock.now()).total_seconds()
        if wait > self._config.max_early_wait.total_seconds():
            # Too early for any of them (each would say so): back at its instant, nothing read.
            return self._later(receipt_handle, wait)
        if len(pack.items) == 1:
            return self._worker.handle(pack.items[0], receipt_handle, receive_count)
        known = self._read_ahead(pack)
        members = [Member() for _ in pack.items]
        with ThreadPoolExecutor(max_workers=min(len(pack.items), FIRE_THREADS)) as pool:
            outcomes = list(
                pool.map(
                    lambda pair: self._worker.handle(pair[0], pair[1], receive_count, known),
                    zip(pack.items, members, strict=True),
                )
            )
        waiting = [
            (item, member.later or 0.0)
            for item, member, outcome in zip(pack.items, members, outcomes, strict=True)
            if outcome is Disposition.LATER
        ]
        if not waiting:
            return Disposition.DONE
        shortest = min(seconds for _, seconds in waiting)
        together = [item for item, seconds in waiting if seconds <= shortest + TOGETHER_SECONDS]
        if len(together) == len(pack.items):
            return self._later(receipt_handle, shortest)
        return self._spill(pack, receipt_handle, together, shortest, waiting)

    def _read_ahead(self, pack: Pack) -> Known | None:
        try:
            return self._worker.read_ahead(pack.items)
        except Exception:
            # Each member reads its own (and fails on its own) instead.
            logger.warning("pack's reads failed; its members read their own", exc_info=True)
            return None

    def _spill(
        self,
        pack: Pack,
        receipt_handle: str,
        together: list[WorkItem],
        shortest: float,
        waiting: list[tuple[WorkItem, float]],
    ) -> Disposition:
        """Send the members that wait on, apart from those that ended; the message goes once they are
        sent (if any cannot be, it comes back whole after the shortest wait: what ended stays ended)."""
        kept = {item.execution_id for item in together}
        packs = [(Pack(pack.scheduled_at, tuple(together), pack.shard, guarded=True), _delay(shortest))]
        packs += [
            (Pack(pack.scheduled_at, (item,), pack.shard, guarded=True), _delay(seconds))
            for item, seconds in waiting
            if item.execution_id not in kept
        ]
        logger.info(
            "pack's waiting members sent on",
            extra={"pack_id": pack.id, "waiting": len(waiting), "messages": len(packs)},
        )
        if self._queue.send_packs(packs):
            return self._later(receipt_handle, shortest)
        return Disposition.DONE

    def _later(self, receipt_handle: str, seconds: float) -> Disposition:
        self._queue.change_visibility(receipt_handle, seconds)
        return Disposition.LATER


def _delay(seconds: float) -> int:
    """A message's delay for a wait (a longer wait is looked at again after SQS's longest delay)."""
    return max(0, min(MAX_DELAY_SECONDS, math.ceil(seconds)))
