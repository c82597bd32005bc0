"""A request files its marker before the job write that goes with it (so that no stored job is ever
without its marker). A scanner tick that reads the marker in between must leave it for a later tick,
not drop it as the marker of a job that is gone, paused or rescheduled: that lost a run in a burst
of a thousand on the local stack."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from punctual.domain.models import STORING_SECONDS
from punctual.platform.timefmt import to_rfc3339
from tests.integration.test_handoff_window import soon_markers
from tests.world import World


@contextmanager
def tick_before(world: World, repository: Any, method: str, *, advance: float = 0) -> Iterator[list[Any]]:
    """Run a scanner tick (after `advance` seconds) just before `repository.method` writes: as a
    tick reading between a request's marker and its job write would. Yields the ticks' reports."""
    reports: list[Any] = []
    write: Callable[..., Any] = getattr(repository, method)

    def late_write(*args: Any, **kwargs: Any) -> Any:
        world.clock.advance(advance)
        reports.append(world.tick())
        return write(*args, **kwargs)

    setattr(repository, method, late_write)
    try:
        yield reports
    finally:
        setattr(repository, method, write)


def kept_then_run_on_time(world: World, reports: list[Any], job: dict[str, Any], instant: Any) -> None:
    """The tick that read between the marker and the job write sent nothing and kept the marker;
    the job then runs once, on time."""
    [report] = reports
    assert (report["enqueued"], report["skipped"], report["deferred"]) == (0, 0, 1)
    assert len(soon_markers(world)) == 1
    world.run_for((instant - world.clock.now()).total_seconds() + 5)
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert execution["lateness_ms"] < 1000
    assert soon_markers(world) == []


def unclaimed_lead(world: World) -> float:
    """A lead in the hand-off window that the next tick sends (its request does not)."""
    settings = world.punctual.settings
    lead = settings.handoff_claim_seconds + 10
    assert lead < settings.handoff_seconds
    return lead


def test_a_tick_between_a_new_jobs_marker_and_its_job_leaves_the_marker_for_the_next(
    world: World,
) -> None:
    world.run_for(1)
    instant = world.clock.now() + timedelta(seconds=unclaimed_lead(world))
    # When a tick reads the soon partitions after the marker is filed and before the job is stored
    with tick_before(world, world.store.jobs, "put_new") as reports:
        job = world.create({"type": "at", "at": to_rfc3339(instant)})
    # Then that tick sent nothing and kept the marker, and the job runs once, on time
    kept_then_run_on_time(world, reports, job, instant)


def test_a_tick_between_a_resumes_marker_and_its_job_write_leaves_the_marker(world: World) -> None:
    world.run_for(1)
    instant = world.clock.now() + timedelta(seconds=unclaimed_lead(world))
    job = world.create({"type": "at", "at": to_rfc3339(instant)})
    world.clock.advance(1)
    assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
    assert world.tick()["skipped"] == 1  # (the paused run's marker)
    world.clock.advance(1)
    # When a tick reads the resumed run's marker while the job still says PAUSED, at its old version
    with tick_before(world, world.store.jobs, "update") as reports:
        assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200
    # Then the marker stays, and the resumed run comes, on time
    kept_then_run_on_time(world, reports, job, instant)


def test_a_marker_whose_job_never_comes_is_dropped_once_its_request_has_ended(world: World) -> None:
    world.run_for(1)
    instant = world.clock.now() + timedelta(seconds=unclaimed_lead(world))

    # Given a request that died between filing its marker and storing its job
    def died(*_: Any, **__: Any) -> None:
        raise RuntimeError("killed")

    world.store.jobs.put_new = died
    try:
        with pytest.raises(RuntimeError, match="killed"):
            world.create({"type": "at", "at": to_rfc3339(instant)})
    finally:
        del world.store.jobs.put_new
    assert len(soon_markers(world)) == 1
    # Then ticks leave its marker while the request may still be storing
    world.tick()
    assert len(soon_markers(world)) == 1
    # and drop it once the request must have ended
    world.clock.advance(STORING_SECONDS)
    assert world.tick()["skipped"] == 1
    assert soon_markers(world) == []


def test_a_marker_superseded_by_a_later_change_is_dropped_at_once(world: World) -> None:
    world.run_for(1)
    lead = unclaimed_lead(world)
    job = world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=lead))})
    # When the job is rescheduled (a new marker, a new version) a second later
    world.clock.advance(1)
    later = to_rfc3339(world.clock.now() + timedelta(seconds=lead + 5))
    world.api("PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": later}})
    # Then the next tick drops the first marker (its job was written after it) and sends the second
    report = world.tick()
    assert (report["skipped"], report["enqueued"]) == (1, 1)
    assert soon_markers(world) == []


def test_a_request_slower_than_the_wait_sends_its_job_itself(world: World) -> None:
    world.run_for(1)
    lead = unclaimed_lead(world)
    instant = world.clock.now() + timedelta(seconds=lead)
    # When ticks read the marker, then a request takes longer than the wait to store its job (a tick
    # dropped the marker meanwhile)
    with tick_before(world, world.store.jobs, "put_new", advance=STORING_SECONDS) as reports:
        job = world.create({"type": "at", "at": to_rfc3339(instant)})
    assert reports[0]["skipped"] == 1
    # Then the request sent it itself, and it runs once
    world.run_for((instant - world.clock.now()).total_seconds() + 5)
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED"
    assert soon_markers(world) == []
