"""The hand-off claim: who enqueues a marker due before the scanner's next tick could read it.

A marker due before now + `Dispatcher.soon` (the scanner's lookahead, a tick and a margin) is filed
under its shard's soon partition, which every tick reads whole: a tick may already have read past
that instant in the minute's bucket (`route`). Of those, one due before the next tick can send it
(`claim_within`: a tick period, the tick's lateness and a margin) carries a claim (`handoff_until`,
HANDOFF_CLAIM ahead): the request enqueues it itself, at once, and until the claim runs out a scanner
tick leaves it alone (`split_claimed`), so that the two do not both send it. The rest wait unclaimed
for the next tick, which reads the soon partitions up to its now + `soon` (all they hold, however
late it comes within its lateness) and sends them packed with the other executions of their
instant: a request sends one execution a message, so a crowded instant created a few minutes ahead
would otherwise reach the workers as thousands of messages of one. What the request fails to
enqueue stays filed with its claim withdrawn, and the scanner enqueues it (late); should the
withdrawal fail too, the claim runs out on its own. The request succeeds either way.

A request that dies between filing and enqueueing leaves its claim to run out, and its marker then
waits for the tick after that: up to a claim and a tick late. Two things take over sooner. A retry of
the request (the same Idempotency-Key) enqueues what is still filed with a claim (`HandOff.resume`).
A local stack that starts again withdraws every claim (`punctual_local.persistence.withdraw_claims`):
the requests that made them died with its previous run. Either may send an execution that was sent already, a duplicate
the worker recognises by the execution's stored status, as it does the scanner's (dispatch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from punctual.domain.models import STORING_SECONDS, DueMarker, Job, JobStatus, marker_for
from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual.ports.store import Store

# How long a marker filed by a request stays that request's to enqueue: API Gateway gives up on a
# request after 29 s. Past it (a request that crashed), the scanner enqueues it.
HANDOFF_CLAIM = timedelta(seconds=30)


class _Dispatched(Protocol):
    failed: list[DueMarker]
    waiting: list[DueMarker]


class Dispatches(Protocol):
    """What hands off to: `punctual.scheduling.dispatch.Dispatcher`."""

    soon: timedelta

    def dispatch(
        self, markers: Sequence[DueMarker], new_jobs: Sequence[Job] = (), *, resent: bool = False
    ) -> _Dispatched: ...


def route(marker: DueMarker, now: datetime, soon: timedelta) -> DueMarker:
    """The marker as it must be filed: under the soon partition if due before now + `soon`."""
    return replace(marker, soon=marker.scheduled_at - now < soon)


def split_claimed(markers: Sequence[DueMarker], now: datetime) -> tuple[list[DueMarker], list[DueMarker]]:
    """The markers a scanner tick may send now, and those an API request is still enqueueing."""
    mine = [m for m in markers if m.handoff_until is None or m.handoff_until <= now]
    claimed = [m for m in markers if m.handoff_until is not None and m.handoff_until > now]
    return mine, claimed


class HandOff:
    """An API request's side of the claim: file markers, claiming those due too soon for the
    scanner, then enqueue what it claimed."""

    def __init__(
        self, store: Store, dispatcher: Dispatches, clock: Clock, claim_within: timedelta | None = None
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._clock = clock
        # None: every marker filed under a soon partition is this request's to enqueue.
        self._claim_within = dispatcher.soon if claim_within is None else min(claim_within, dispatcher.soon)

    def file(self, *markers: DueMarker) -> list[DueMarker]:
        """Store markers (one PutItem for one, BatchWriteItems for more), those due before the
        scanner's next tick can send them with this request's claim; returns them as filed."""
        now = self._clock.now()
        routed = [replace(route(m, now, self._dispatcher.soon), filed_at=now) for m in markers]
        claimed = [
            replace(m, handoff_until=now + HANDOFF_CLAIM)
            if m.soon and m.scheduled_at - now < self._claim_within
            else m
            for m in routed
        ]
        self._put(claimed)
        return claimed

    def enqueue(self, *markers: DueMarker, new_jobs: Sequence[Job] = (), resent: bool = False) -> bool:
        """Enqueue the executions of the markers filed with a claim, all in one dispatch
        (`new_jobs`: jobs just stored, with these markers their first: not read again; `resent`: they
        may have been sent before, so their packs are guarded). False when some were left to the
        scanner (the queue or the store failed them: they are still filed, and sent by its next tick).

        A soon marker filed without a claim is the next tick's to send, once this request's job write
        has landed. A tick that read it before then left it, as `storing`, for STORING_SECONDS after
        its filing; should this request have taken longer than that to get here, a tick may have
        dropped it since, so the request sends it itself, claimed and guarded."""
        now = self._clock.now()
        late = [
            replace(m, handoff_until=now + HANDOFF_CLAIM)
            for m in markers
            if m.handoff_until is None
            and m.soon
            and m.filed_at is not None
            and (now - m.filed_at).total_seconds() >= STORING_SECONDS
        ]
        if late:
            logger.warning(
                "request stored its job after its marker's wait; it enqueues it itself",
                extra={"execution_ids": [m.execution_id for m in late]},
            )
            try:
                self._put(late)
            except Exception:
                # Sent anyway: a duplicate (the worker tells it apart) rather than a run lost.
                logger.exception("could not claim the late markers", extra={"count": len(late)})
            markers = (*[m for m in markers if m.handoff_until is not None], *late)
            resent = True
        claimed = [m for m in markers if m.handoff_until is not None]
        if not claimed:
            return not markers
        try:
            dispatched = (
                self._dispatcher.dispatch(claimed, new_jobs, resent=True)
                if resent
                else self._dispatcher.dispatch(claimed, new_jobs)
            )
            # (one that does not match its job though this request wrote it: another change since)
            unsent = dispatched.failed + dispatched.waiting
        except Exception:
            logger.exception("hand-off failed", extra={"execution_ids": [m.execution_id for m in claimed]})
            unsent = claimed
        if not unsent:
            return True
        ids = [m.execution_id for m in unsent]
        logger.warning("hand-off incomplete; the scanner will enqueue the rest", extra={"execution_ids": ids})
        try:
            # Withdrawn as a claim already run out: a dispatch that failed may have sent some of them,
            # so the scanner sends them guarded (`Dispatcher._guarded`).
            self._put([replace(m, handoff_until=self._clock.now()) for m in unsent])
        except Exception:
            logger.exception("could not withdraw the hand-off claim", extra={"execution_ids": ids})
        return False

    def resume(self, jobs: Sequence[Job]) -> None:
        """A retried request's side (the same Idempotency-Key): enqueue the markers of these jobs'
        next runs that are still filed with a claim. The first attempt filed them and may have died
        before it enqueued them; if it is in fact still enqueueing them, the execution is sent twice."""
        now = self._clock.now()
        due_soon = [
            replace(marker_for(job.id, job.next_run_at, job.schedule_version), soon=True)
            for job in jobs
            if job.status is JobStatus.ACTIVE
            and job.next_run_at is not None
            and job.next_run_at - now < self._dispatcher.soon
        ]
        if due_soon:
            filed = self._store.markers.filed(due_soon)
            self.enqueue(*[m for m in filed if m.handoff_until is not None], resent=True)

    def _put(self, markers: list[DueMarker]) -> None:
        if len(markers) == 1:
            self._store.markers.put(markers[0])
        else:
            self._store.markers.put_many(markers)
