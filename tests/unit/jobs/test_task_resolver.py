"""The worker's copies of named tasks: kept for their TTL on the injectable clock, read once at a time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.domain.models import Job, JobStatus, TaskRef, TaskSpec
from punctual.domain.named_tasks import NamedTask
from punctual.domain.policies import RetryPolicy
from punctual.domain.schedules import NowSchedule
from punctual.jobs.task_resolver import TaskResolver
from punctual.platform.clock import ManualClock

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)


class CountingStore:
    """Answers one task, slowly, and counts the reads."""

    def __init__(self, task: NamedTask) -> None:
        self.task = task
        self.reads = 0
        self._lock = threading.Lock()

    def get(self, owner: str, name: str, *, consistent: bool = True) -> NamedTask | None:
        with self._lock:
            self.reads += 1
        time.sleep(0.05)
        return self.task if (owner, name) == (self.task.owner, self.task.name) else None


def task(version: int = 1, **changes: Any) -> NamedTask:
    values: dict[str, Any] = {
        "owner": "alice",
        "name": "hook",
        "type": "sleep",
        "params": {"seconds": 0},
        "params_schema": {"type": "object", "properties": {"seconds": {"maximum": 1}}},
        "retry": RetryPolicy(max_attempts=7),
        "timeout_seconds": 9,
        "created_at": NOW,
        "updated_at": NOW,
        "version": version,
        **changes,
    }
    return NamedTask(**values)


def job(params: dict[str, Any]) -> Job:
    return Job(
        id="job_1",
        owner="alice",
        name="j",
        status=JobStatus.ACTIVE,
        task=TaskRef(name="hook", params=params),
        schedule=NowSchedule(type="now"),
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=NOW,
        updated_at=NOW,
        inherits=frozenset({"retry", "timeout_seconds"}),
    )


def test_a_batch_of_records_reads_a_task_once_and_its_copy_lasts_its_ttl() -> None:
    store = CountingStore(task())
    clock = ManualClock(NOW)
    resolver = TaskResolver(store, clock, ttl_seconds=10)  # type: ignore[arg-type]
    # When eight records of a batch resolve the same task at once
    threads = [threading.Thread(target=resolver.definition, args=("alice", "hook")) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then it was read once, and not again within its TTL
    assert store.reads == 1
    clock.advance(9.9)
    resolver.definition("alice", "hook")
    assert store.reads == 1
    # but after it: a change made meanwhile is seen
    store.task = task(version=2, params={"seconds": 0.5})
    clock.advance(0.2)
    resolved = resolver.effective(job({}))
    assert store.reads == 2
    assert resolved is not None and resolved.task_version == 2
    assert resolved.task == TaskSpec(type="sleep", params={"seconds": 0.5})
    # with the task's retry and timeout, the job having none of its own
    assert (resolved.retry.max_attempts, resolved.timeout_seconds) == (7, 9)


def test_a_job_its_task_no_longer_fits_or_that_lost_its_task_resolves_to_a_failure_saying_why() -> None:
    clock = ManualClock(NOW)
    resolver = TaskResolver(CountingStore(task()), clock)  # type: ignore[arg-type]
    unfit = resolver.effective(job({"seconds": 5}))
    assert unfit is not None and isinstance(unfit.task, TaskSpec)
    assert "params.seconds" in unfit.task.params["error"] and "version 1" in unfit.task.params["error"]
    gone = TaskResolver(CountingStore(task(name="other")), clock).effective(job({}))  # type: ignore[arg-type]
    assert gone is not None and isinstance(gone.task, TaskSpec)
    assert "no longer exists" in gone.task.params["error"]


def test_a_copy_read_before_an_instant_does_not_serve_it_once_it_has_come() -> None:
    store = CountingStore(task())
    clock = ManualClock(NOW)
    resolver = TaskResolver(store, clock, ttl_seconds=10)  # type: ignore[arg-type]
    instant = NOW + timedelta(seconds=5)
    # Given a copy read 5 s ahead of an instant (an execution claimed ahead of it), which serves
    # it while the instant is still to come
    early = resolver.effective(job({}), instant)
    assert early is not None and early.task_version == 1 and store.reads == 1
    assert resolver.effective(job({}), instant) is not None and store.reads == 1
    # When the task changes before the instant, and the instant comes
    store.task = task(version=2)
    clock.advance(5)
    first = resolver.effective(job({}), instant)
    # Then the executions due then run the change: one read at the instant, shared by them, and
    # by any of an earlier instant starting after it
    assert first is not None and first.task_version == 2 and store.reads == 2
    assert resolver.effective(job({}), instant) == first
    assert resolver.effective(job({}), instant - timedelta(seconds=3)) == first
    assert store.reads == 2
    # while one of a later instant reads again when it comes
    clock.advance(0.5)
    resolver.effective(job({}), instant + timedelta(seconds=0.5))
    assert store.reads == 3
