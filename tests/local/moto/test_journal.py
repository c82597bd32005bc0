"""The local stack's journal and snapshots on disk: torn records, versions, compaction, a full disk
and its recovery."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from punctual_local.moto.compactor import compact
from punctual_local.moto.data_files import (
    SNAPSHOT_NAME,
    SegmentRead,
    SnapshotWriter,
    StoreError,
    read_segment,
    read_snapshot,
    segment_path,
    segments,
    snapshot_header,
)
from punctual_local.moto.faults import FillableDisk
from punctual_local.moto.journal import Journal, StorageFailed


def key(n: int) -> bytes:
    return json.dumps(["t", {"S": f"k{n}"}, None]).encode()


def item(n: int, value: str = "v") -> bytes:
    return json.dumps({"pk": {"S": f"k{n}"}, "v": {"S": value}}).encode()


def journal_of(directory: Path, number: int, records: list[tuple[bytes, bytes]]) -> Path:
    journal = Journal(directory, number)
    sequence = 0
    for k, v in records:
        sequence = journal.append(k, v)
    journal.wait(sequence)
    journal.close()
    return segment_path(directory, number)


def test_a_torn_last_record_is_ignored_and_every_record_before_it_kept(tmp_path: Path) -> None:
    # Given a segment of three records whose last one was cut short by a crash mid-write
    path = journal_of(tmp_path, 1, [(key(n), item(n)) for n in range(3)])
    whole = path.read_bytes()
    path.write_bytes(whole[:-5])

    # When it is read
    read = SegmentRead()
    found = list(read_segment(path, read))

    # Then the first two come back and the torn bytes are counted, not read
    assert found == [(key(0), item(0)), (key(1), item(1))]
    assert read.records == 2
    assert read.torn_bytes == len(item(2)) + len(key(2)) + 1 + 8 - 5


def test_a_last_record_with_a_wrong_checksum_is_ignored(tmp_path: Path) -> None:
    # Given a segment whose last record's bytes are damaged (its length still whole)
    path = journal_of(tmp_path, 1, [(key(n), item(n)) for n in range(3)])
    damaged = bytearray(path.read_bytes())
    damaged[-3] ^= 0xFF
    path.write_bytes(bytes(damaged))

    # Then only the records before it are read
    assert [k for k, _ in read_segment(path)] == [key(0), key(1)]


def test_a_segment_cut_inside_its_header_reads_as_empty(tmp_path: Path) -> None:
    path = journal_of(tmp_path, 1, [])
    path.write_bytes(path.read_bytes()[:6])
    read = SegmentRead()
    assert list(read_segment(path, read)) == []
    assert read.torn_bytes == 6


def test_data_written_by_a_newer_format_is_refused_with_a_message(tmp_path: Path) -> None:
    newer = {"format": "punctual-local-snapshot", "version": 3, "through": 0, "items": 0}
    (tmp_path / SNAPSHOT_NAME).write_text(json.dumps(newer) + "\n")
    with pytest.raises(StoreError, match="newer Punctual"):
        snapshot_header(tmp_path / SNAPSHOT_NAME)


def test_compaction_folds_the_journal_into_the_snapshot_and_removes_its_segments(tmp_path: Path) -> None:
    # Given a snapshot of k0..k4, then segments that change k1, delete k2, add k9, change k1 again
    writer = SnapshotWriter(tmp_path, 0)
    for n in range(5):
        writer.add(key(n), item(n))
    writer.commit()
    journal_of(tmp_path, 1, [(key(1), item(1, "a")), (key(2), b""), (key(9), item(9))])
    journal_of(tmp_path, 2, [(key(1), item(1, "b"))])
    journal_of(tmp_path, 3, [(key(3), b"")])

    # When segments up to 2 are compacted
    snapshot = compact(tmp_path, 2)

    # Then the snapshot holds the last write of each key, through segment 2, and segment 3 stays
    assert (snapshot.through, snapshot.items) == (2, 5)
    assert snapshot_header(tmp_path / SNAPSHOT_NAME).items == 5
    assert dict(read_snapshot(tmp_path / SNAPSHOT_NAME)) == {
        key(0): item(0),
        key(1): item(1, "b"),
        key(3): item(3),
        key(4): item(4),
        key(9): item(9),
    }
    assert [n for n, _ in segments(tmp_path)] == [3]


def test_concurrent_writers_share_fsyncs_and_each_returns_once_its_record_is_written(tmp_path: Path) -> None:
    # Given a journal, and 8 threads each appending 50 records and waiting for each
    journal = Journal(tmp_path, 1)

    def write(thread: int) -> None:
        for n in range(50):
            journal.wait(journal.append(key(thread * 1000 + n), item(n)))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal.close()

    # Then all 400 are on disk, in fewer batches (fsyncs) than records
    assert len(list(read_segment(segment_path(tmp_path, 1)))) == 400
    assert journal.stats.records == 400
    assert journal.stats.batches <= 400


def records_on_disk(directory: Path, number: int = 1) -> list[bytes]:
    return [k for k, _ in read_segment(segment_path(directory, number))]


def test_a_write_the_disk_refuses_is_never_acknowledged_and_writes_are_refused_until_a_recovery(
    tmp_path: Path,
) -> None:
    # Given a journal on a disk that fills up after the segment's header
    disk = FillableDisk()
    journal = Journal(tmp_path, 1, opener=disk.open)
    disk.full = True

    # When a record is appended, Then waiting for it fails with the disk's reason
    sequence = journal.append(key(1), item(1))
    with pytest.raises(StorageFailed, match="No space left on device"):
        journal.wait(sequence)
    # And later writes are refused at once, saying why, until the journal is given another try
    with pytest.raises(StorageFailed, match="No space left"):
        journal.append(key(2), item(2))
    assert journal.failure is not None and "errno 28" in journal.failure
    journal.close()


def test_once_the_disk_takes_writes_again_the_journal_does_without_a_restart(tmp_path: Path) -> None:
    # Given a journal with one record on disk, whose next batch of two the full disk cut short
    disk = FillableDisk()
    journal = Journal(tmp_path, 1, opener=disk.open)
    journal.wait(journal.append(key(0), item(0)))
    disk.full = True
    first, last = journal.append_all([(key(1), item(1)), (key(2), item(2))])
    with pytest.raises(StorageFailed):
        journal.wait(last, first=first)
    # (the first of the two reached the file whole: only the batch's last byte is missing)
    assert len(segment_path(tmp_path, 1).read_bytes()) > 200

    # When space is freed and the journal is given another try
    disk.full = False
    journal.recover()
    # (it still says why writes failed: only a write shows that the disk takes them again)
    assert journal.failure is None and journal.refusing is not None and "errno 28" in journal.refusing

    # Then the next write is durable, and the segment holds only what was answered as durable
    journal.wait(journal.append(key(3), item(3)))
    journal.close()
    assert records_on_disk(tmp_path) == [key(0), key(3)]
    assert journal.failure is None and journal.refusing is None


def test_a_recovery_on_a_disk_still_full_keeps_saying_why_writes_fail(tmp_path: Path) -> None:
    # Given a journal whose write the full disk refused
    disk = FillableDisk()
    journal = Journal(tmp_path, 1, opener=disk.open)
    disk.full = True
    with pytest.raises(StorageFailed):
        journal.wait(journal.append(key(1), item(1)))
    # When it recovers (cutting a file back takes no space) while the disk is still full
    journal.recover()
    # Then it still says why until a write succeeds, and the next write fails the same way
    assert journal.refusing is not None and "No space left" in journal.refusing
    with pytest.raises(StorageFailed, match="No space left"):
        journal.wait(journal.append(key(2), item(2)))
    assert journal.refusing is not None and "No space left" in journal.refusing
    journal.close()


def test_a_record_lost_to_a_full_disk_stays_lost_after_the_journal_recovers(tmp_path: Path) -> None:
    # Given a record lost to a full disk whose writer had not yet waited for it
    disk = FillableDisk()
    failed = threading.Event()
    journal = Journal(tmp_path, 1, opener=disk.open, on_failure=lambda durable: failed.set())
    disk.full = True
    lost = journal.append(key(1), item(1))
    assert failed.wait(5)
    # When the journal recovers and later records reach the disk
    disk.full = False
    for _ in range(50):  # (until the failure's records are taken back)
        try:
            journal.recover()
            break
        except StorageFailed:
            threading.Event().wait(0.01)
    journal.wait(journal.append(key(2), item(2)))
    # Then waiting for the lost record still fails, though records after it are on disk
    with pytest.raises(StorageFailed, match="No space left"):
        journal.wait(lost)
    journal.close()


def test_the_writes_a_failure_lost_are_taken_back_before_their_writers_are_told(tmp_path: Path) -> None:
    # Given a journal whose owner takes a while to take back the lost writes
    disk = FillableDisk()
    taken_back: list[int] = []

    def take_back(durable: int) -> None:
        threading.Event().wait(0.2)
        taken_back.append(durable)

    journal = Journal(tmp_path, 1, opener=disk.open, on_failure=take_back)
    journal.wait(journal.append(key(0), item(0)))
    disk.full = True

    # When a write fails, Then its writer hears of it only once the writes after the last durable
    # record (the first, sequence 1) were taken back
    with pytest.raises(StorageFailed):
        journal.wait(journal.append(key(1), item(1)))
    assert taken_back == [1]
    journal.close()


def test_records_appended_together_reach_the_disk_in_one_batch(tmp_path: Path) -> None:
    # Given a disk that holds the batch being written
    disk: list[HeldDisk] = []
    journal = Journal(tmp_path, 1, opener=lambda path, mode: disk.append(HeldDisk(path, mode)) or disk[-1])
    journal.append(key(0), item(0))
    assert disk[0].writing.wait(5)
    # When 30 records are appended together meanwhile
    first, last = journal.append_all([(key(n), item(n)) for n in range(1, 31)])
    disk[0].release.set()
    journal.wait(last, first=first)
    journal.close()
    # Then they were written in one batch after the held one
    assert (journal.stats.batches, journal.stats.largest_batch) == (2, 30)


class HeldDisk:
    """A file that takes its header, then holds every later write until released."""

    def __init__(self, path: Path, mode: str) -> None:
        self._file: IO[bytes] = open(path, mode)  # noqa: SIM115
        self.writes = 0
        self.writing = threading.Event()
        self.release = threading.Event()

    def write(self, data: bytes) -> int:
        self.writes += 1
        if self.writes > 1:
            self.writing.set()
            assert self.release.wait(10)
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def test_an_append_wakes_the_writer_thread_not_the_writers_waiting_for_their_batch(tmp_path: Path) -> None:
    disk: list[HeldDisk] = []
    journal = Journal(tmp_path, 1, opener=lambda path, mode: disk.append(HeldDisk(path, mode)) or disk[-1])
    wakes = [0]
    real_wait = journal._written.wait

    def counted_wait(timeout: float | None = None) -> bool:
        woke = real_wait(timeout)
        wakes[0] += 1
        return woke

    journal._written.wait = counted_wait  # type: ignore[method-assign]
    # Given 20 writers waiting for their records while the disk holds the batch being written
    first = journal.append(key(0), item(0))
    assert disk[0].writing.wait(5)
    waiters = [
        threading.Thread(target=journal.wait, args=(journal.append(key(n), item(n)),)) for n in range(1, 21)
    ]
    for waiter in waiters:
        waiter.start()
    # When 200 more records are appended meanwhile
    for n in range(21, 221):
        journal.append(key(n), item(n))
    wakes_while_held = wakes[0]
    disk[0].release.set()
    journal.wait(first)
    for waiter in waiters:
        waiter.join(10)
    journal.close()
    # Then no waiter woke for an append, and each woke about once per batch written after
    assert wakes_while_held == 0
    assert wakes[0] <= 3 * len(waiters)
    assert len(list(read_segment(segment_path(tmp_path, 1)))) == 221
