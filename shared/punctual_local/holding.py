"""SQS's DelaySeconds, done by the local stack instead of moto.

moto keeps a queue's messages in one list and rescans all of it on every receive and every delete,
and each send wakes every waiting long poll to rescan it too. The work queue holds its delayed
messages for up to the scanner's lookahead or the API's hand-off window, so at 20 jobs/s moto's list
held a couple of thousand messages and those rescans kept the stack's core busy. Nor does moto's
long poll wake when a delayed message comes due.

HoldingSqs stands in for the SQS client: a message sent with a delay is kept here and sent to moto,
without a delay, when that delay is over. moto then only ever holds messages that are visible or
being processed, and a long poll wakes for a released message at once. Everything after the send is
moto's: visibility timeouts, receive counts, redrive to the dead-letter queue.

Held messages are not saved here, nor are moto's: the work queue's messages are journaled in front
of this client (queue_journal.JournaledSqs), and the stack holds each one not deleted again when it
starts (`hold`), for what is left of its delay.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from punctual.platform import randomness
from punctual.platform.clock import Clock
from punctual.platform.observability import logger

# Released this much before the delay ends: one release sends everything due within it in batches
# (so that a poller receives them ten at a time rather than one by one, each holding a container
# while it waits), and the worker waits out what is left, so nothing starts early.
RELEASE_AHEAD_SECONDS = 1.0
RETRY_SECONDS = 0.5
SEND_BATCH = 10
# How far ahead `on_coming` hears how many messages are about to be released (so that pollers for
# them are started in time), and how often it hears it again while any are held.
COMING_SECONDS = 5.0
COMING_EVERY_SECONDS = 0.5


@dataclass(order=True)
class _Held:
    release_at: float  # clock epoch seconds
    order: int
    queue_url: str = field(compare=False)
    entry: dict[str, Any] = field(compare=False)  # a SendMessageBatch entry, without DelaySeconds


class HoldingSqs:
    """An SQS client whose delayed sends wait here; every other call goes to the wrapped client."""

    def __init__(self, sqs: Any, clock: Clock, on_coming: Callable[[str, int], None] | None = None) -> None:
        self._sqs = sqs
        self._clock = clock
        # Told, for a queue, how many held messages are released within COMING_SECONDS.
        self._on_coming = on_coming
        self._held: list[_Held] = []  # a heap, earliest release first
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)

    @property
    def held(self) -> int:
        with self._changed:
            return len(self._held)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        now = self._clock.now().timestamp()
        direct = [e for e in Entries if not e.get("DelaySeconds")]
        delayed = [e for e in Entries if e.get("DelaySeconds")]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if direct:
            response = dict(self._sqs.send_message_batch(QueueUrl=QueueUrl, Entries=direct))
            response.setdefault("Successful", [])
            response.setdefault("Failed", [])
        with self._changed:
            for entry in delayed:
                release_at = now + int(entry["DelaySeconds"])
                plain = {k: v for k, v in entry.items() if k != "DelaySeconds"}
                heapq.heappush(self._held, _Held(release_at, next(self._order), QueueUrl, plain))
            self._changed.notify()
        response["Successful"] += [
            {
                "Id": entry["Id"],
                "MessageId": str(randomness.uuid4()),
                "MD5OfMessageBody": hashlib.md5(entry["MessageBody"].encode()).hexdigest(),
            }
            for entry in delayed
        ]
        return response

    def hold(self, queue_url: str, entries: list[tuple[dict[str, Any], float]]) -> None:
        """Hold these SendMessageBatch entries (without Id and DelaySeconds) until their epoch
        seconds: those past are released at once (messages sent again after a restart)."""
        with self._changed:
            for entry, release_at in entries:
                heapq.heappush(self._held, _Held(release_at, next(self._order), queue_url, entry))
            self._changed.notify()

    # --------------------------------------------------------------- releases
    def start(self) -> None:
        self._thread = threading.Thread(target=self._release_loop, name="sqs-delays", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop releasing; what is still held is journaled and held again at the next start."""
        with self._changed:
            self._stopped = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(5)

    def release_due(self) -> float | None:
        """Send what is due; returns the seconds until the next release (None: nothing held)."""
        now = self._clock.now().timestamp()
        with self._changed:
            due: list[_Held] = []
            while self._held and self._held[0].release_at <= now + RELEASE_AHEAD_SECONDS:
                due.append(heapq.heappop(self._held))
        if self._on_coming is not None:
            self._tell_coming(due, now)
        for batch in _batches(due):
            self._send(batch)
        with self._changed:
            if not self._held:
                return None
            wait = self._held[0].release_at - RELEASE_AHEAD_SECONDS - now
            return min(wait, COMING_EVERY_SECONDS) if self._on_coming is not None else wait

    def _tell_coming(self, due: list[_Held], now: float) -> None:
        coming: dict[str, int] = {}
        with self._changed:
            soon = [h for h in self._held if h.release_at <= now + COMING_SECONDS]
        for held in due + soon:
            coming[held.queue_url] = coming.get(held.queue_url, 0) + 1
        assert self._on_coming is not None
        for queue_url, count in coming.items():
            try:
                self._on_coming(queue_url, count)
            except Exception:
                logger.exception("could not prepare for the coming messages")

    def _release_loop(self) -> None:
        while True:
            try:
                wait = self.release_due()
            except Exception:
                logger.exception("could not release delayed messages; retrying")
                wait = RETRY_SECONDS
            with self._changed:
                if self._stopped:
                    return
                # A send that arrives meanwhile may be due sooner: it notifies, and the loop looks again.
                self._changed.wait(None if wait is None else max(0.0, wait))
                if self._stopped:
                    return

    def _send(self, batch: list[_Held]) -> None:
        by_id = {str(i): held for i, held in enumerate(batch)}
        entries = [{**held.entry, "Id": entry_id} for entry_id, held in by_id.items()]
        try:
            response = self._sqs.send_message_batch(QueueUrl=batch[0].queue_url, Entries=entries)
            failed = [by_id[f["Id"]] for f in response.get("Failed", [])]
        except Exception as exc:
            logger.warning("could not release delayed messages; retrying", extra={"error": str(exc)})
            failed = batch
        if failed:
            retry_at = self._clock.now().timestamp() + RETRY_SECONDS
            with self._changed:
                for held in failed:
                    held.release_at = retry_at
                    heapq.heappush(self._held, held)


def _batches(due: list[_Held]) -> list[list[_Held]]:
    """Up to SEND_BATCH messages per call, one queue per call."""
    by_queue: dict[str, list[_Held]] = {}
    for held in due:
        by_queue.setdefault(held.queue_url, []).append(held)
    return [
        messages[start : start + SEND_BATCH]
        for messages in by_queue.values()
        for start in range(0, len(messages), SEND_BATCH)
    ]


class ComingCounts:
    """Held messages about to come due on each queue, as several holders report them (the stack's own
    and the API process's): `prepare` hears their sum. A holder reports while it holds messages
    coming due, every COMING_EVERY_SECONDS; a report older than two of those no longer counts."""

    def __init__(
        self,
        prepare: Callable[[str, int], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._prepare = prepare
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], tuple[int, float]] = {}  # (holder, queue) -> (count, when)

    def reporter(self, holder: str) -> Callable[[str, int], None]:
        """The `on_coming` of one holder."""
        return lambda queue_url, count: self.report(holder, queue_url, count)

    def report(self, holder: str, queue_url: str, count: int) -> None:
        now = self._monotonic()
        with self._lock:
            self._latest[(holder, queue_url)] = (count, now)
            total = sum(
                n
                for (_, queue), (n, when) in self._latest.items()
                if queue == queue_url and now - when <= 2 * COMING_EVERY_SECONDS
            )
        self._prepare(queue_url, total)
