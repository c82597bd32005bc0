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

A pack sent unguarded (none of its members can have been sent before) of PACK_LEASE_MIN members or
more is taken under one lease (ports.packs) instead of a claim per member, and nothing of a member is
stored before its end:
- its jobs are read and its lease taken; on a first take nothing more is read (the lease says none
  of them started); a pack taken again (redelivered, or its lease run out) reads its executions, and
  its jobs again (an end the last holder stored on its job may have landed since the first read), and
  a member stored already goes the lone way (its claim, or its end recorded), the others run again
  with the same ids;
- what can be done before the instant is (named tasks resolved, the skip rules, each task prepared:
  a webhook's address checked and its connection opened), then it holds until the instant, never
  early;
- at the instant (punctual.execution.firing) the jobs' stamps, read then, stop a run whose job
  changed meanwhile (a job that completed meanwhile, its run ended by the pack's last holder, sends
  the member the lone way); its members start side by side and each end is stored in one write
  (ExecutionRepository.put_end), the outcomes after all the starts;
- any member that waits (a retry) is sent on in a guarded pack and the message goes: taken again
  only when its worker died.
A member a claim must guard (a manual run, a job whose overlap rule looks at its previous run as
under way) goes the lone way within the pack.
"""

from __future__ import annotations

import math
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta

from punctual.domain.errors import RetryableStoreError, UnreadableItem
from punctual.domain.executions import LEASE_MARGIN, Execution
from punctual.domain.models import Job, JobStatus, skip_reason
from punctual.domain.work import Pack, WorkItem
from punctual.execution import run_policy, run_records
from punctual.execution.config import WorkerConfig
from punctual.execution.firing import BATCH_ENDS_MIN, Firing, Leased, Starters, ended_on_job
from punctual.execution.receipt_reads import Known
from punctual.execution.receipts import (
    THROTTLE_BACKOFF_SECONDS,
    UNEXPECTED_RETRY_SECONDS,
    Disposition,
    Member,
)
from punctual.execution.worker import Worker
from punctual.platform.aws_limits import SQS_MAX_DELAY_SECONDS
from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_rfc3339
from punctual.ports.jobs import JobsRead
from punctual.ports.packs import PackHeld, PackLeases
from punctual.ports.queue import WorkQueue
from punctual.tasks import PREPARE_AHEAD_SECONDS

# Members waiting within this much of the shortest wait stay together; any waiting longer goes alone.
TOGETHER_SECONDS = 10.0
# A pack this large or larger is taken under one lease. One execution alone too: its lease and its
# end on its job's item are two writes, where a claim, an end and the job's completion are three.
PACK_LEASE_MIN = 1
# A pack held by another worker whose lease could not be read is looked at again after this.
HELD_RETRY_SECONDS = 5.0


class PackRunner:
    def __init__(
        self,
        worker: Worker,
        queue: WorkQueue,
        clock: Clock,
        config: WorkerConfig,
        packs: PackLeases | None = None,
    ) -> None:
        """`packs`: the packs' leases (None: every member claims its own execution)."""
        self._worker = worker
        self._queue = queue
        self._clock = clock
        self._config = config
        self._packs = packs
        self._firing = Firing(worker, clock)

    def handle(self, pack: Pack, receipt_handle: str, receive_count: int = 1) -> Disposition:
        leased = self._packs is not None and not pack.guarded and len(pack.items) >= PACK_LEASE_MIN
        # A pack taken under one lease waits as early as a crowded instant's lead sends it (it is
        # taken and its members prepared meanwhile); any other message only the lone allowance.
        allowed = self._config.max_early_wait if leased else self._config.lone_early_wait
        wait = (pack.scheduled_at - self._clock.now()).total_seconds()
        if wait > allowed.total_seconds():
            # Too early for any of them (each would say so): back at its instant, nothing read.
            return self._later(receipt_handle, wait)
        if leased:
            return self._guarded_leased(pack, receipt_handle, receive_count)
        if len(pack.items) == 1:
            return self._worker.handle(pack.items[0], receipt_handle, receive_count)
        return self._each(pack, receipt_handle, receive_count)

    def _each(
        self, pack: Pack, receipt_handle: str, receive_count: int, early_wait: timedelta | None = None
    ) -> Disposition:
        """Each member claims its own execution (`early_wait`: Worker.handle's)."""
        known = self._read_ahead(pack)
        members = [Member() for _ in pack.items]
        with ThreadPoolExecutor(max_workers=min(len(pack.items), self._config.fire_threads)) as pool:
            outcomes = list(
                pool.map(
                    lambda pair: self._worker.handle(
                        pair[0], pair[1], receive_count, known, early_wait=early_wait
                    ),
                    zip(pack.items, members, strict=True),
                )
            )
        return self._settle(pack, receipt_handle, members, outcomes, keep=True)

    def _settle(
        self,
        pack: Pack,
        receipt_handle: str,
        members: list[Member],
        outcomes: list[Disposition],
        *,
        keep: bool,
    ) -> Disposition:
        """The message's fate from its members'. `keep`: when every member waits about as long, the
        message itself comes back (otherwise, as for a leased pack, they are sent on)."""
        waiting = [
            (item, member.later or 0.0)
            for item, member, outcome in zip(pack.items, members, outcomes, strict=True)
            if outcome is Disposition.LATER
        ]
        if not waiting:
            return Disposition.DONE
        shortest = min(seconds for _, seconds in waiting)
        together = [item for item, seconds in waiting if seconds <= shortest + TOGETHER_SECONDS]
        if keep and len(together) == len(pack.items):
            return self._later(receipt_handle, shortest)
        return self._spill(pack, receipt_handle, together, shortest, waiting)

    # ------------------------------------------------------------------ one lease for the pack
    def _guarded_leased(self, pack: Pack, receipt_handle: str, receive_count: int) -> Disposition:
        """`_leased`, its failures turned into a later look, as for a lone execution (Worker.handle)."""
        try:
            return self._leased(pack, receipt_handle, receive_count)
        except PackHeld as held:
            now = self._clock.now()
            wait = (
                HELD_RETRY_SECONDS if held.lease_until is None else (held.lease_until - now).total_seconds()
            )
            return self._later(receipt_handle, max(1.0, wait + 1))
        except (UnreadableItem, RetryableStoreError) as exc:
            logger.warning("pack's reads failed; message returns later", extra={"error": str(exc)})
            return self._later(receipt_handle, THROTTLE_BACKOFF_SECONDS * 2 ** min(receive_count, 6))
        except Exception:
            logger.exception("pack failed unexpectedly; message returns later", extra={"pack_id": pack.id})
            return self._later(receipt_handle, UNEXPECTED_RETRY_SECONDS * 2 ** min(receive_count, 6))

    def _leased(self, pack: Pack, receipt_handle: str, receive_count: int) -> Disposition:
        store = self._worker.store
        now = self._clock.now()
        read = self._read_jobs(pack)
        members = [Member() for _ in pack.items]
        outcomes: list[Disposition | None] = [None] * len(pack.items)
        leased: dict[int, Leased] = {}
        for n, item in enumerate(pack.items):
            if item.manual or item.job_id in read.unreadable:
                continue  # the lone way: its claim guards it, or it fails there as unreadable
            stored = read.found.get(item.job_id)
            job = self._worker.effective(stored, item.scheduled_at)
            execution = run_records.unstored_execution(item, job, now, store.retention)
            if execution is None:
                outcomes[n] = Disposition.DONE
            elif job is not None and run_policy.early_claim(job, execution):
                leased[n] = Leased(stored, job, execution)
        if not leased:
            # (as early as it came: its lead sent it so)
            return self._each(pack, receipt_handle, receive_count, self._config.max_early_wait)
        starts = max(now, pack.scheduled_at)
        longest = max(m.job.timeout_seconds for m in leased.values())
        lease_until = starts + timedelta(seconds=longest) + LEASE_MARGIN
        packs = self._packs
        assert packs is not None
        holder = secrets.token_hex(8)
        taken = packs.take(pack.id, holder, lease_until, now)
        try:
            if not taken.first:
                self._drop_stored(pack, leased)
            for n, member in list(leased.items()):
                # What stops a run is known before its instant: the job as read, its skip rules.
                reason = skip_reason(member.job, member.execution)
                if reason is not None:
                    del leased[n]
                    outcomes[n] = self._worker.end_unstarted(
                        member.job, member.execution, reason, members[n], by_policy=False
                    )
            for member in leased.values():
                member.job_item_bytes = store.jobs.completed_bytes(member.read)
        except Exception:
            self._give_back(packs, pack, holder)
            raise
        # A pack taken further ahead than its members may be made ready (its lead and the early
        # wait) holds until then: a webhook's connection opened sooner would not be, and its member
        # would start cold.
        ahead = (pack.scheduled_at - self._clock.now()).total_seconds() - PREPARE_AHEAD_SECONDS
        if ahead > 0:
            self._clock.sleep(ahead)
        with ThreadPoolExecutor(max_workers=min(len(pack.items), self._config.fire_threads)) as pool:
            # What a start can do ahead (a webhook's address checked, its connection opened) is done
            # while the pack holds, side by side; never a byte of a request. Each member waits at its
            # start for its own, not for the others'.
            for member in leased.values():
                member.prepared = pool.submit(self._worker.prepare, member.job, member.execution)
            # (those the lone way wait as early as their pack does: it came this early on purpose)
            early = self._config.max_early_wait
            alone: dict[int, Future[Disposition]] = {
                n: pool.submit(self._worker.handle, item, members[n], receive_count, early_wait=early)
                for n, item in enumerate(pack.items)
                if n not in leased and outcomes[n] is None
            }
            # (after the work above: see Starters)
            starters = Starters(
                pool,
                {n: member.prepared for n, member in leased.items()},
                self._firing.starts_at(pack.scheduled_at),
                self._clock,
            )
            try:
                wait = (pack.scheduled_at - self._clock.now()).total_seconds()
                if wait > 0:
                    self._clock.sleep(wait)  # never early
                fired = self._firing.fire(pack, leased, members, lease_until, receive_count, taken, starters)
                if any(m.job.policy.max_lateness_seconds is not None for m in leased.values()):
                    # (after the starts: a run started again after this worker dies is no late first start)
                    self._note_started(packs, pack, holder)
            except Exception:
                for member in leased.values():
                    member.let_go()
                self._give_back(packs, pack, holder)  # (none of them started)
                raise
            finally:
                starters.let_go()  # (nothing, once they have their work)
            for n, future in alone.items():
                outcomes[n] = future.result()
            for n, future in fired.items():
                outcomes[n] = future.result()
        self._write_deferred(members, outcomes)
        _log_succeeded(pack, members)
        return self._settle(
            pack, receipt_handle, members, [o or Disposition.DONE for o in outcomes], keep=False
        )

    def _read_jobs(self, pack: Pack) -> JobsRead:
        """The members' jobs, read eventually consistent (half the read units) and again consistently
        where that read would stop a member: missing (created within the last second), or not active
        at its version (changed within it). A change that such a read misses and that lets a member
        through is one of the last second or so: a change to a job whose run a message may carry
        writes a change record first (`dispatched_runs`), and an earlier one is at least the hand-off
        window older than this read, made at most the lead before the instant. The pack reads the
        instant's change records at its instant, reading those jobs again consistently (Firing)."""
        store = self._worker.store
        # (nor their runs' ends in their batches' ends items: a pack's first take ran none of them, and
        # one taken again reads its members' jobs again, with them: `_drop_stored`)
        read = store.jobs.get_many([item.job_id for item in pack.items], consistent=False, ends=False)
        again = {
            item.job_id
            for item in pack.items
            if not item.manual
            and item.job_id not in read.unreadable
            and _stops(read.found.get(item.job_id), item)
        }
        if not again:
            return read
        fresh = store.jobs.get_many(sorted(again), ends=False)
        found = {k: v for k, v in read.found.items() if k not in again}
        return JobsRead({**found, **fresh.found}, {**read.unreadable, **fresh.unreadable})

    def _write_deferred(self, members: list[Member], outcomes: list[Disposition | None]) -> None:
        """The ends its members deferred (Attempts.run's `defer`), each batch's of one instant in one
        write to its ends item (store/batch_ends.py). One that item does not take goes on its job's item
        (`write_deferred`). A member whose end could not be written comes back with the message, to run
        again with the same id (at least once)."""
        groups: dict[tuple[str, datetime], dict[int, tuple[Job, Execution]]] = {}
        for n, member in enumerate(members):
            if member.deferred is not None:
                job, execution = member.deferred
                assert job.listed_in is not None
                groups.setdefault((job.listed_in, execution.scheduled_at), {})[n] = member.deferred
        store = self._worker.store
        for (batch_id, instant), ends in groups.items():
            owner = next(iter(ends.values()))[0].owner
            if len(ends) < BATCH_ENDS_MIN:
                # (few of a batch: the item may hold many more, whose size each write pays)
                for n, (job, execution) in ends.items():
                    self._write_apart(members, outcomes, n, job, execution)
                continue
            try:
                apart = store.batch_ends.write(
                    batch_id, instant, owner, {execution.job_id: execution for _, execution in ends.values()}
                )
            except Exception:
                logger.warning("batch's ends not written; they run again", exc_info=True)
                apart = None
            for n, (job, execution) in ends.items():
                if apart is None:
                    _again(members, outcomes, n)
                elif job.id in apart:
                    self._write_apart(members, outcomes, n, job, execution)

    def _write_apart(
        self,
        members: list[Member],
        outcomes: list[Disposition | None],
        n: int,
        job: Job,
        execution: Execution,
    ) -> None:
        """A deferred end written on its job's item, as any leased run's (or the member comes back)."""
        try:
            self._worker.write_deferred(job, execution)
        except Exception:
            logger.warning("deferred end not written; it runs again", extra={"execution_id": execution.id})
            _again(members, outcomes, n)

    def _note_started(self, packs: PackLeases, pack: Pack, holder: str) -> None:
        try:
            packs.mark_started(pack.id, holder)
        except Exception:
            logger.warning("pack's start not noted on its lease", extra={"pack_id": pack.id})

    def _give_back(self, packs: PackLeases, pack: Pack, holder: str) -> None:
        """A pack none of whose members started: its message, back after a failure, need not wait for
        the lease to run out."""
        try:
            packs.release(pack.id, holder)
        except Exception:
            logger.warning("pack's lease not given back; it runs out instead", extra={"pack_id": pack.id})

    def _drop_stored(self, pack: Pack, leased: dict[int, Leased]) -> None:
        """A pack taken again: members stored already (ended, or waiting to retry) go the lone way
        (which records an end not recorded on its job); the others run again, with the same ids. Their
        jobs are read again, after the take: the last holder may have stored an end on its job since
        the first read, and the run goes on from this read."""
        store = self._worker.store
        refs = {
            n: (pack.items[n].job_id, pack.items[n].scheduled_at, pack.items[n].execution_id) for n in leased
        }
        stored, unreadable = store.executions.get_many(refs.values())
        jobs = store.jobs.get_many(dict.fromkeys(ref[0] for ref in refs.values()))
        for n, ref in refs.items():
            read = jobs.found.get(ref[0])
            job = self._worker.effective(read, ref[1])
            if (
                ref in stored
                or ref in unreadable
                or ref[0] in jobs.unreadable
                or job is None
                or ended_on_job(read, ref[2])
            ):
                del leased[n]
                continue
            # (no longer a timeout than the lease was sized for)
            timeout = min(job.timeout_seconds, leased[n].job.timeout_seconds)
            leased[n] = Leased(read, replace(job, timeout_seconds=timeout), leased[n].execution)

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


def _again(members: list[Member], outcomes: list[Disposition | None], n: int) -> None:
    """A member whose end was not written: it comes back, to run again with the same id."""
    members[n].succeeded = None
    members[n].later = float(UNEXPECTED_RETRY_SECONDS)
    outcomes[n] = Disposition.LATER


def _stops(job: Job | None, item: WorkItem) -> bool:
    """Whether a job as read stops its scheduled member from running."""
    return job is None or job.status is not JobStatus.ACTIVE or job.schedule_version != item.schedule_version


def _log_succeeded(pack: Pack, members: list[Member]) -> None:
    """One INFO line for the members that ran under the pack's lease and succeeded: each
    `[execution_id, task, lateness_ms, took_ms]` (its job's id is its execution id's first part). A line
    each cost ten times the bytes, and CloudWatch Logs bills by the byte; a failure or a retry keeps a
    line of its own, with its error."""
    ended = [m.succeeded for m in members if m.succeeded is not None]
    if not ended:
        return
    logger.info(
        "pack succeeded",
        extra={
            "pack_id": pack.id,
            "scheduled_at": to_rfc3339(pack.scheduled_at),
            "succeeded": [[f["execution_id"], f["task"], f["lateness_ms"], f.get("took_ms")] for f in ended],
        },
    )


def _delay(seconds: float) -> int:
    """A message's delay for a wait (a longer wait is looked at again after SQS's longest delay)."""
    return max(0, min(SQS_MAX_DELAY_SECONDS, math.ceil(seconds)))
