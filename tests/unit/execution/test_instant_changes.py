"""An instant's change records are read once for the process's packs firing at it, never shared from
before it (punctual/execution/firing.py, InstantChanges)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from punctual.domain.models import CHANGE_RECORDS_LATE
from punctual.execution.firing import InstantChanges
from punctual.platform.clock import ManualClock

INSTANT = datetime(2026, 12, 4, 10, 0, 5, tzinfo=UTC)


class Records:
    """Change records by instant, and every read made (the instant, and the clock's time then)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.by_instant: dict[datetime, frozenset[str]] = {INSTANT: frozenset({"job_a"})}
        self.reads: list[tuple[datetime, datetime]] = []
        self.failures = 0
        self.gate: threading.Event | None = None

    def changed(self, instant: datetime) -> frozenset[str]:
        self.reads.append((instant, self.clock.now()))
        if self.gate is not None:
            self.gate.wait(5)
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the store is away")
        return self.by_instant.get(instant, frozenset())


def test_packs_firing_at_one_instant_share_one_read() -> None:
    # Given 50 packs of one process at their instant, the first read still under way
    clock = ManualClock(INSTANT)
    records = Records(clock)
    records.gate = threading.Event()
    changes = InstantChanges(records.changed, clock)
    answers: list[frozenset[str]] = []
    threads = [threading.Thread(target=lambda: answers.append(changes.changed(INSTANT))) for _ in range(50)]
    for thread in threads:
        thread.start()
    # When the read answers
    records.gate.set()
    for thread in threads:
        thread.join(5)
    # Then one read was made, at the instant, and every pack has its answer
    assert records.reads == [(INSTANT, INSTANT)]
    assert answers == [frozenset({"job_a"})] * 50
    # and a pack that fires later takes the same answer without a read
    clock.advance(2)
    assert changes.changed(INSTANT) == frozenset({"job_a"}) and len(records.reads) == 1


def test_a_read_before_the_instant_is_never_shared() -> None:
    # Given a pack that asks a moment before its instant (a clock that ran ahead)
    clock = ManualClock(INSTANT - timedelta(milliseconds=300))
    records = Records(clock)
    changes = InstantChanges(records.changed, clock)
    changes.changed(INSTANT)
    # When a change is recorded and the instant comes
    records.by_instant[INSTANT] = frozenset({"job_a", "job_b"})
    clock.set(INSTANT)
    # Then a pack at the instant reads again, and sees it
    assert changes.changed(INSTANT) == frozenset({"job_a", "job_b"})
    assert [at for _, at in records.reads] == [INSTANT - timedelta(milliseconds=300), INSTANT]


def test_a_failed_read_is_not_shared_each_pack_then_reads_its_own() -> None:
    # Given the first read at the instant fails, while other packs wait for it
    clock = ManualClock(INSTANT)
    records = Records(clock)
    records.failures = 1
    records.gate = threading.Event()
    changes = InstantChanges(records.changed, clock)
    failed: list[BaseException] = []
    answers: list[frozenset[str]] = []

    def first() -> None:
        try:
            changes.changed(INSTANT)
        except ConnectionError as exc:
            failed.append(exc)

    leader = threading.Thread(target=first)
    leader.start()
    while not records.reads:
        pass
    waiters = [threading.Thread(target=lambda: answers.append(changes.changed(INSTANT))) for _ in range(3)]
    for thread in waiters:
        thread.start()
    records.gate.set()
    for thread in [leader, *waiters]:
        thread.join(5)
    # Then the first pack's read failed as its own would, and each other read on its own
    assert len(failed) == 1
    assert answers == [frozenset({"job_a"})] * 3
    assert len(records.reads) == 1 + 3
    # and the next pack reads afresh rather than meeting the failure
    assert changes.changed(INSTANT) == frozenset({"job_a"}) and len(records.reads) == 5


@pytest.mark.parametrize("later", [CHANGE_RECORDS_LATE, CHANGE_RECORDS_LATE * 10])
def test_reads_of_instants_long_past_are_forgotten(later: timedelta) -> None:
    # Given an instant read at its time
    clock = ManualClock(INSTANT)
    records = Records(clock)
    changes = InstantChanges(records.changed, clock)
    changes.changed(INSTANT)
    # When the clock passes it by the lateness after which packs read stamps instead, and another
    # instant is read
    clock.advance(later.total_seconds())
    changes.changed(clock.now())
    # Then only the newer read is kept
    assert list(changes._reads) == [clock.now()]
