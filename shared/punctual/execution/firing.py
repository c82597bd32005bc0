"""A pack held under its lease, at its instant: its members started side by side.

The pack (punctual.execution.packs) was taken, and its members' tasks prepared, before the instant;
a member whose task starts on a thread waits on one from then (`Starters`). At the instant the jobs
that may have changed since they were read are read again: on a first take, those the instant's
change records name (one Query for every pack of the process firing at that instant,
`InstantChanges`), otherwise those whose stamps differ. A member whose job changed is judged on the
job as it now is (skipped if it must not run, started cold if it may), and one past its job's
catch-up window is skipped. The others start at once, each on the task prepared for it: one after
another on the firing thread where the task can start apart from its answer (a webhook's request,
on the connection opened ahead: `Firing._launch`), on the member's own thread otherwise. The answers
of those launched are waited for together, and each is taken as it comes; a member's end is stored
in one write (ExecutionRepository.put_end), the outcomes after all the starts. A member whose run
the pack's last holder ended goes the lone way (Worker.handle), which finds its end.
"""

from __future__ import annotations

import queue
import selectors
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from functools import partial

from punctual.domain.executions import Execution, ExecutionStatus
from punctual.domain.models import (
    CHANGE_RECORDS_LATE,
    Job,
    JobStamp,
    JobStatus,
    TaskRef,
    ends_in_batch,
    ran_on_job,
    skip_reason,
)
from punctual.domain.work import Pack
from punctual.execution import run_policy, run_records
from punctual.execution.receipts import UNEXPECTED_RETRY_SECONDS, Disposition, Member
from punctual.execution.starts_first import StartsFirst
from punctual.execution.worker import Worker
from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual.ports.packs import Taken
from punctual.tasks import Awaited, Prepared

# A pack writes its ends of one batch at one instant to their ends item when it holds at least this
# many (store/batch_ends.py): a write there costs the item's whole size, up to about 14 units for a
# batch of 100, so fewer are cheaper written a unit each on their jobs' items. (A batch's jobs due
# together file one marker group, in one shard: one pack; only a batch due within the hand-off
# window is spread over the shards.)
BATCH_ENDS_MIN = 10
# A pack's launched members whose answers are taken and ends recorded at once, at most: the answers
# wait in their sockets meanwhile, and more threads at once only share the same interpreter.
ANSWERS_AT_ONCE = 16


class Leased:
    """A member to run under the pack's lease: its job as read, as it runs, its execution, its task
    being made ready ahead of the instant (Worker.prepare; None: it starts cold), and the size its
    job's item would have with its end on it (JobStore.completed_bytes of the job as read: sized
    while the pack holds, not at the instant)."""

    def __init__(
        self,
        read: Job | None,
        job: Job,
        execution: Execution,
        prepared: Future[Prepared] | None = None,
        job_item_bytes: int | None = None,
    ) -> None:
        self.read = read
        self.job = job
        self.execution = execution
        self.prepared = prepared
        self.job_item_bytes = job_item_bytes

    def let_go(self) -> None:
        """Its task being prepared for a start that is not coming: what it holds is let go once it is
        ready."""
        if self.prepared is not None:
            self.prepared.add_done_callback(_close_ready)


class InstantChanges:
    """An instant's change records, read once for every pack of this process firing at it.

    A crowded instant is many packs in one process (many messages of one, handed off by requests, in
    the local stack above all), and each reading the records on its own would be a Query each, made
    as each pack's thread gets its turn. The first pack to ask at the instant reads them; the others
    wait for that read, or take its answer if it is made. The read is shared only when it began at or
    after the instant: it then covers every change acknowledged before the instant, as a pack's own
    read would (a change acknowledged after the read began came after the instant). A read that fails
    is not shared: each pack then reads on its own."""

    def __init__(self, read: Callable[[datetime], frozenset[str]], clock: Clock) -> None:
        self.read = read  # (one read of its own)
        self._clock = clock
        self._lock = threading.Lock()
        self._reads: dict[datetime, Future[frozenset[str]]] = {}

    def changed(self, instant: datetime) -> frozenset[str]:
        now = self._clock.now()
        if now < instant:
            return self.read(instant)  # (too early to stand for the instant's other packs)
        with self._lock:
            # (an instant this far past is read by stamps, never by its records: forgotten)
            for old in [at for at in self._reads if now - at >= CHANGE_RECORDS_LATE]:
                del self._reads[old]
            shared = self._reads.get(instant)
            mine = shared is None
            if shared is None:
                shared = self._reads[instant] = Future()
        if mine:
            try:
                shared.set_result(self.read(instant))
            except BaseException as exc:
                with self._lock:
                    del self._reads[instant]
                shared.set_exception(exc)
                raise
        try:
            return shared.result()
        except Exception:
            return self.read(instant)


class Starters:
    """A pack's members at the instant: those that start on a thread wait on one of the pack's from
    before it; those launched (`Firing._launch`) hold none, their answers read by one thread.

    Work handed to a thread at the instant waits for its turn in the interpreter behind every member
    already started, and a thread made then waits to be started: a crowded instant's packs, each
    handing out hundreds, would start their last members seconds late. So a member that starts on a
    thread waits on it from before the instant (the threads that prepared the members, reused: no
    more threads than the pack had). In a pack larger than ANSWERS_AT_ONCE, a member whose task is
    expected to launch (Prepared.launches) gives its thread back instead: hundreds of threads woken
    at the instant, each only to wait again for its answer, cost the firing thread the interpreter
    it needs for the starts. At the instant the pack says what each does (start, take its answer, go
    the lone way, or nothing: ended) and lets them all go at once. The answers of those launched are
    waited for together on one thread (`_read_answers`), after the instant's starts, and taken as
    they come, at most ANSWERS_AT_ONCE at a time.

    The pool's earlier work (the preparing, members going the lone way) is given to it first, and a
    pool hands out its work in order: no waiting member holds a thread that work needs.

    A member counts as starting in `starts` (shared by every pack due at the same instant in the
    environment) from when it is on its thread until its task starts, or until the word if it has
    nothing to start; the pack's launches count as one start, from when it holds until they are sent.
    So the ends of the members that started wait for the starts of the instant's other members, in
    this pack and in the others: not for a member still waiting for a thread (in a pack larger than
    its threads), which waits for an end, nor for a pack holding for a later instant."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        members: Mapping[int, Future[Prepared] | None],
        starts: StartsFirst,
        clock: Clock,
    ) -> None:
        self.starts = starts
        self._pool = pool
        self._clock = clock
        self._go = threading.Event()
        self._lock = threading.Lock()
        self._work: dict[int, Callable[[], Disposition]] = {}
        self._leaves: dict[int, Callable[[], None]] = {}
        self._starting: set[int] = set()
        self._spared: set[int] = set()  # members that gave their thread back
        # (a pack of no more members than its takers keeps them on their threads: the answers'
        # reader would be one thread more, made at the instant)
        self._sparing = len(members) > ANSWERS_AT_ONCE
        self.outcomes: dict[int, Future[Disposition]] = {n: Future() for n in members}
        self._launching = starts.enter()
        for n, prepared in members.items():
            pool.submit(self._wait, n, prepared)

    def _wait(self, n: int, prepared: Future[Prepared] | None) -> None:
        if self._sparing and prepared is not None and _launches(prepared):
            with self._lock:
                if not self._go.is_set():
                    self._spared.add(n)
                    return  # (its work, at the word, goes to the answers' reader or to the pool)
        leave = self._leaves[n] = self.starts.enter()
        try:
            self._go.wait()
            if n not in self._starting:
                leave()  # (nothing to start: no end waits for its work)
            self._run(n)
        finally:
            leave()

    def _run(self, n: int) -> None:
        outcome = self.outcomes[n]
        try:
            outcome.set_result(self._work[n]())
        except BaseException as exc:
            outcome.set_exception(exc)

    def _run_spared(self, n: int) -> None:
        try:
            self._run(n)
        finally:
            self._leaves.get(n, _nothing)()

    def started(self, n: int) -> Callable[[], None]:
        """What member `n`, on its thread, calls as its task starts."""
        return self._leaves.get(n, _nothing)

    def go(
        self,
        work: dict[int, Callable[[], Disposition]],
        starting: Iterable[int] = (),
        answers: Mapping[int, Awaited | None] | None = None,
    ) -> None:
        """Each member's work (every member's), and the word. `starting`: the members whose work
        starts their task (the others' ends need not wait for them). `answers`: the members
        launched, by where their answers come (their work takes it)."""
        answers = answers or {}
        with self._lock:
            self._work.update(work)
            self._starting.update(starting)
            read = {n: answers[n] for n in self._spared if n in answers}
            spared = [n for n in self._spared if n not in answers]
            for n in spared:
                if n in self._starting:
                    self._leaves[n] = self.starts.enter()
            self._go.set()
        for n in spared:
            self._pool.submit(self._run_spared, n)
        if read:
            # (a thread of its own: one of the pool's would be one fewer to take the answers on)
            threading.Thread(target=self._read_answers, args=(read,), name="answers", daemon=True).start()
        self._launching()

    def let_go(self) -> None:
        """The word, for members not given work (none started: the pack failed before its starts):
        their threads end, doing nothing."""
        with self._lock:
            for n in self.outcomes:
                self._work.setdefault(n, partial(_given, Disposition.LATER))
            spared = [n for n in self._spared if not self._go.is_set()]
            self._go.set()
        for n in spared:
            self._pool.submit(self._run_spared, n)
        self._launching()

    def _read_answers(self, answers: dict[int, Awaited | None]) -> None:
        """The launched members' answers, each handed on as it comes (or as its timeout ends) to a
        few takers on the pool's threads (ANSWERS_AT_ONCE at most), which take them one after
        another: after the instant's starts, each answer waiting in its socket meanwhile. A taker
        with more to take goes on without a wait, and this thread wakes once for all that came
        together. Whatever goes wrong here, every member is handed on."""
        came: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        takers = min(ANSWERS_AT_ONCE, len(answers))
        for _ in range(takers):
            self._pool.submit(self._take_answers, came)
        left = dict(answers)

        def hand(n: int) -> None:
            del left[n]
            came.put(n)

        try:
            self.starts.wait()
            with selectors.DefaultSelector() as selector:
                waiting = {n: awaited for n, awaited in answers.items() if awaited is not None}
                for n in answers.keys() - waiting.keys():
                    hand(n)
                for n, awaited in waiting.items():
                    selector.register(awaited.sock, selectors.EVENT_READ, n)
                deadlines = deque(sorted((awaited.by, n) for n, awaited in waiting.items()))
                while left:
                    now = self._clock.now()
                    while deadlines and (deadlines[0][0] <= now or deadlines[0][1] not in left):
                        _, n = deadlines.popleft()
                        if n in left:
                            selector.unregister(waiting[n].sock)
                            hand(n)
                    if not left:
                        break
                    wait = (deadlines[0][0] - now).total_seconds() if deadlines else None
                    for key, _ in selector.select(wait):
                        selector.unregister(key.fileobj)
                        hand(key.data)
        finally:
            for n in list(left):
                hand(n)
            for _ in range(takers):
                came.put(None)

    def _take_answers(self, came: queue.SimpleQueue[int | None]) -> None:
        while (n := came.get()) is not None:
            self._run_spared(n)


def _launches(prepared: Future[Prepared]) -> bool:
    """Whether a member's task, once made ready, is expected to launch (it waits for that here)."""
    try:
        return prepared.result().launches()
    except Exception:
        return False


def _nothing() -> None:
    pass


def _given(result: Disposition) -> Disposition:
    return result


class Firing:
    def __init__(self, worker: Worker, clock: Clock) -> None:
        self._worker = worker
        self._clock = clock
        self._changes = InstantChanges(lambda at: worker.store.changes.changed(at), clock)
        # The starts under way in this process (a Lambda environment, whose invocation fires up to a
        # batch of packs at once), by instant: the ends of an instant's packs wait for all of its
        # starts (StartsFirst). Kept while a pack of the instant holds it.
        self._starts: weakref.WeakValueDictionary[datetime, StartsFirst] = weakref.WeakValueDictionary()
        self._starts_lock = threading.Lock()

    def starts_at(self, instant: datetime) -> StartsFirst:
        """The starts of the packs due at `instant` in this process."""
        with self._starts_lock:
            starts = self._starts.get(instant)
            if starts is None:
                starts = self._starts[instant] = StartsFirst()
            return starts

    def _retasked(self, leased: dict[int, Leased], changed: set[str]) -> dict[int, Job]:
        """The members whose named task changed since the pack resolved it, ahead of the instant, as
        they run now. A change to a task writes no change record (it does not know its jobs'
        instants): at the instant each task is read again, once a process (the resolver keeps what
        it reads then), by resolving one of its members; only if its version moved are the others
        resolved again. A read that fails leaves the copy resolved ahead: the pack is not held up."""
        groups: dict[tuple[str, str], list[int]] = {}
        for n, member in leased.items():
            read = member.read
            if read is not None and isinstance(read.task, TaskRef) and member.execution.job_id not in changed:
                groups.setdefault((read.owner, read.task.name), []).append(n)
        again: dict[int, Job] = {}
        for (_, name), numbers in groups.items():
            first = leased[numbers[0]]
            try:
                now = self._worker.effective(first.read, first.execution.scheduled_at)
            except Exception as exc:  # (any failure: the copy read ahead runs, as it would have)
                logger.warning(
                    "named task not read again at the instant", extra={"task": name, "error": str(exc)}
                )
                continue
            if now is None or (now.task_version == first.job.task_version and now.task == first.job.task):
                continue
            again[numbers[0]] = now
            for n in numbers[1:]:
                resolved = self._worker.effective(leased[n].read, leased[n].execution.scheduled_at)
                if resolved is not None:
                    again[n] = resolved
        return again

    def fire(
        self,
        pack: Pack,
        leased: dict[int, Leased],
        members: list[Member],
        lease_until: datetime,
        receive_count: int,
        taken: Taken,
        starters: Starters,
    ) -> dict[int, Future[Disposition]]:
        """At the instant: whatever changed in their jobs since read stops a run (a job completed
        meanwhile by its run, which the pack's last holder ended: that member goes the lone way, which
        finds it ended); the others start side by side, their outcomes written after all their starts.
        `taken`: the pack's lease; on its first take no other holder can have ended a member, and
        taken over from a holder that noted their start, a member that starts again is not judged by
        its catch-up window (that is for a first start: a worker that died after starting it must
        not leave it recorded SKIPPED). `starters`: the members, waiting since the pack held."""
        if not leased:
            starters.go({})
            return {}
        store = self._worker.store
        changed = self._changed(pack, leased, taken.first)
        again = store.jobs.get_many(changed).found if changed else {}
        # (a change recorded that left the job as read, its stamp the same, stops nothing)
        read = {m.execution.job_id: m.read for m in leased.values()}
        changed = {
            job_id
            for job_id in changed
            if (now := again.get(job_id)) is None
            or (was := read.get(job_id)) is None
            or JobStamp.of(now) != JobStamp.of(was)
        }
        retasked = self._retasked(leased, changed)
        ready: dict[int, Leased] = {}
        results: dict[int, Disposition] = {}
        alone: list[int] = []
        began = self._clock.now()
        for n, member in leased.items():
            job = member.job
            if n in retasked:
                # (its named task changed before the instant: it runs the new version, cold, within
                # the timeout its lease was sized for)
                job = replace(
                    retasked[n], timeout_seconds=min(retasked[n].timeout_seconds, job.timeout_seconds)
                )
            if member.execution.job_id in changed:
                if ended_on_job(again.get(member.execution.job_id), member.execution.id):
                    alone.append(n)
                    continue
                now_job = self._worker.effective(
                    again.get(member.execution.job_id), member.execution.scheduled_at
                )
                reason = skip_reason(now_job, member.execution)
                if reason is not None or now_job is None:
                    results[n] = self._worker.end_unstarted(
                        now_job, member.execution, reason or "job deleted", members[n], by_policy=False
                    )
                    continue
                # (no longer a timeout than the lease was sized for)
                job = replace(now_job, timeout_seconds=min(now_job.timeout_seconds, job.timeout_seconds))
            late = None if taken.started_before else run_policy.too_late(job, member.execution, began)
            if late is not None:
                results[n] = self._worker.end_unstarted(
                    job, member.execution, late, members[n], by_policy=True
                )
                continue
            # (prepared for the job as read: one changed since starts cold)
            prepared = None if member.execution.job_id in changed or n in retasked else member.prepared
            ready[n] = Leased(member.read, job, member.execution, prepared, member.job_item_bytes)
        for n, member in leased.items():
            if n not in ready or ready[n].prepared is None:
                member.let_go()  # (its start is not coming, or comes cold)
        launched = self._launch(ready, lease_until)
        deferring = _deferring(ready)
        work: dict[int, Callable[[], Disposition]] = {
            n: partial(
                self._start, member, members[n], lease_until, starters, n, launched.get(n), n in deferring
            )
            for n, member in ready.items()
        }
        for n in alone:
            work[n] = partial(self._worker.handle, pack.items[n], members[n], receive_count)
        for n, result in results.items():
            work[n] = partial(_given, result)
        # (a member launched has started: no end waits for its thread)
        starters.go(
            work,
            starting=[n for n in ready if n not in launched],
            answers={n: _awaited(ready[n]) for n in launched},
        )
        return dict(starters.outcomes)

    def _changed(self, pack: Pack, leased: dict[int, Leased], first: bool) -> set[str]:
        """The members' jobs that may have changed since they were read: on a first take at about its
        instant, those the instant's change records name (one Query for the instant's packs: a
        request records a change to a job whose run may be in a message before it writes it);
        otherwise, or fired late, those whose stamps differ (a read per member)."""
        store = self._worker.store
        job_ids = {m.execution.job_id for m in leased.values()}
        unread = {m.execution.job_id for m in leased.values() if m.read is None}
        late = self._clock.now() - pack.scheduled_at >= CHANGE_RECORDS_LATE
        if first and not late:
            return (set(self._changes.changed(pack.scheduled_at)) & job_ids) | unread
        stamps, _ = store.jobs.stamps(job_ids)
        return unread | {
            m.execution.job_id
            for m in leased.values()
            if m.read is not None and stamps.get(m.read.id) != JobStamp.of(m.read)
        }

    def _launch(self, ready: dict[int, Leased], lease_until: datetime) -> dict[int, Execution]:
        """The members whose tasks were made ready, started one after another on this thread without
        waiting for their answers (a webhook's request sent on the connection opened ahead): their
        answers are then taken as they come (`Starters`). Handing each start to a thread of its own
        at the instant made a crowded instant's last start wait for every thread before it to get its
        turn in the interpreter. What cannot start so starts on its thread, as it would have."""
        launched: dict[int, Execution] = {}
        for n, member in ready.items():
            prepared = member.prepared
            if prepared is None or not prepared.done() or prepared.exception() is not None:
                continue  # (not ready yet: it starts on its thread when it is)
            running = _running(member, lease_until, self._clock.now())
            try:
                if self._worker.launch(member.job, running, prepared.result()):
                    launched[n] = running
            except Exception:
                logger.exception(
                    "member not launched; it starts on its thread", extra={"execution_id": running.id}
                )
        return launched

    def _start(
        self,
        member: Leased,
        receipt: Member,
        lease_until: datetime,
        starters: Starters,
        n: int,
        launched: Execution | None = None,
        deferred: bool = False,
    ) -> Disposition:
        """Member `n` on its thread: its task started (or, `launched`, its answer taken) and its end
        recorded."""
        prepared = None
        try:
            if launched is not None:
                # Its answer can wait in its socket while the instant's other members start.
                starters.starts.wait()
            prepared = None if member.prepared is None else member.prepared.result()
            running = launched or _running(member, lease_until, self._clock.now())
            defer = receipt.defer if deferred else None
            return self._worker.run_leased(
                member.job, running, starters.started(n), starters.starts.wait, receipt, prepared, defer
            )
        except Exception:
            # Its end not stored: it runs again, on its own, with its claim.
            logger.exception("member failed unexpectedly", extra={"execution_id": member.execution.id})
            receipt.later = float(UNEXPECTED_RETRY_SECONDS)
            return Disposition.LATER
        finally:
            if prepared is not None:
                prepared.close()


def _deferring(ready: dict[int, Leased]) -> set[int]:
    """The members whose ends may go in their batch's ends item, written by the pack once all its
    members have ended (packs.py): judged on the job as stored (`ends_in_batch`, as a change to it
    judges), at least BATCH_ENDS_MIN of one batch at one instant (fewer are cheaper written apart),
    and each with the pack's longest timeout: its end then comes no later than its own run's could,
    which a pause and a resume count on (`models.in_flight`)."""
    if not ready:
        return set()
    longest = max(member.job.timeout_seconds for member in ready.values())
    keys: dict[tuple[str, datetime], set[int]] = {}
    for n, member in ready.items():
        read = member.read
        if (
            read is not None
            and read.listed_in is not None
            and ends_in_batch(read)
            and member.job.timeout_seconds >= longest
        ):
            keys.setdefault((read.listed_in, member.execution.scheduled_at), set()).add(n)
    return {n for group in keys.values() if len(group) >= BATCH_ENDS_MIN for n in group}


def _awaited(member: Leased) -> Awaited | None:
    """Where a launched member's answer comes."""
    assert member.prepared is not None
    return member.prepared.result().awaited()


def _running(member: Leased, lease_until: datetime, began: datetime) -> Execution:
    """A member's execution as it starts at `began`, RUNNING in memory only (its end stores it)."""
    return replace(
        member.execution,
        status=ExecutionStatus.RUNNING,
        attempts=1,
        started_at=began,
        lateness_ms=run_records.lateness_ms(member.execution, began),
        lease_until=lease_until,
        task_version=member.job.task_version,
        job_item_bytes=member.job_item_bytes,  # (its end may go on its job's item)
    )


def ended_on_job(job: Job | None, execution_id: str) -> bool:
    """Whether a member's job, read after its pack was taken, says its run ended: the job carries it
    (stored with its completion), or it is a one-time job completed (by its run, ended on an item of
    its own). Either way the lone way finds the end, and records what is missing."""
    if job is None:
        return False
    return ran_on_job(job, execution_id) or (job.status is JobStatus.COMPLETED and not job.recurring)


def _close_ready(done: Future[Prepared]) -> None:
    if done.exception() is None:
        done.result().close()
