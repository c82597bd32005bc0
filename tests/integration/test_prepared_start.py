"""A pack taken under one lease prepares its webhooks before it holds: each connection is open before
the instant, and each request goes out at the instant, never before; a connection the server
closed meanwhile is replaced, and one made for a member that is then skipped is closed.

The receiver listens on 127.0.0.1; the clock is the test's, and the receiver is looked at while the
pack holds (the hold is the clock's sleep), so nothing hangs on timing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual.domain.work import Pack
from punctual.execution.packs import PACK_LEASE_MIN
from punctual.execution.receipts import Disposition
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import PREPARE_AHEAD_SECONDS
from tests.integration.test_packs import take_the_pack
from tests.unit.tasks.connections import Listener, listener, record_sends
from tests.world import World, mocked_world

MEMBERS = 6


class HoldingClock(ManualClock):
    """The test's clock; `at_hold` is called once, as the pack's hold begins (its first sleep)."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.at_hold: Callable[[], None] | None = None

    def sleep(self, seconds: float) -> None:
        hook, self.at_hold = self.at_hold, None
        if hook is not None:
            hook()
        super().sleep(seconds)


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(HoldingClock(clock.now()), shard_count=1) as made:
        yield made


@pytest.fixture
def receiver(world: World) -> Iterator[Listener]:
    with listener(world.clock.now) as found:
        yield found


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch, world: World) -> list[datetime]:
    """When (by the test's clock) any request's bytes were handed to a connection."""
    return record_sends(monkeypatch, world.clock.now)


@pytest.fixture
def senders(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread that handed each of a request's bytes to a connection."""
    return record_sends(monkeypatch, threading.current_thread)


def webhooks_at_one_instant(world: World, url: str) -> tuple[list[dict[str, Any]], Pack, str]:
    at = to_rfc3339(world.clock.now() + timedelta(seconds=240))
    task = {"type": "http", "params": {"url": url}}
    jobs = [world.create({"type": "at", "at": at}, task) for _ in range(MEMBERS)]
    pack, receipt = take_the_pack(world)
    assert len(pack.items) == MEMBERS >= PACK_LEASE_MIN and not pack.guarded
    return jobs, pack, receipt


def take_before_the_instant(
    world: World, pack: Pack, receipt: str, at_hold: Callable[[], None], ahead: float = 2
) -> None:
    clock = world.clock
    assert isinstance(clock, HoldingClock)
    clock.set(pack.scheduled_at - timedelta(seconds=ahead))
    clock.at_hold = at_hold
    assert world.punctual.packs.handle(pack, receipt) is Disposition.DONE
    assert clock.at_hold is None  # (it held)


def statuses(world: World, jobs: list[dict[str, Any]]) -> list[str]:
    return [execution["status"] for job in jobs for execution in world.executions(job["id"])]


def test_a_packs_webhooks_are_connected_before_the_instant_and_called_at_it(
    world: World, receiver: Listener, sends: list[datetime]
) -> None:
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)
    seen: dict[int, datetime] = {}

    def at_hold() -> None:
        # While the pack holds: every member's connection is open, and no request came
        receiver.wait_for(lambda r: len(r.connections) == MEMBERS)
        seen.update({port: c.accepted_at for port, c in receiver.connections.items()})
        assert receiver.requests() == [] and sends == []

    # When the pack is taken 2 seconds before its instant
    take_before_the_instant(world, pack, receipt, at_hold)
    # Then each request came at the instant, on a connection opened before it, and none other
    requests = receiver.requests()
    assert len(requests) == MEMBERS and set(receiver.connections) == set(seen)
    for connection in requests:
        assert connection.accepted_at < pack.scheduled_at <= connection.requested_at  # type: ignore[operator]
    assert len(sends) >= MEMBERS and min(sends) >= pack.scheduled_at
    assert statuses(world, jobs) == ["SUCCEEDED"] * MEMBERS


def test_a_pack_taken_early_opens_its_connections_only_as_early_as_they_are_kept(
    world: World, receiver: Listener, senders: list[threading.Thread]
) -> None:
    # Given a pack taken 20 seconds before its instant (its lead and the early wait), further ahead
    # than a connection is opened for a start (PREPARE_AHEAD_SECONDS)
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)
    ahead = PREPARE_AHEAD_SECONDS + 5

    clock = world.clock
    assert isinstance(clock, HoldingClock)

    def at_hold() -> None:
        # While it holds that far ahead: no connection is open yet
        assert receiver.connections == {}
        # (and at its next hold, until the instant, it waits for every connection: on a busy
        # machine a member not prepared by then starts cold, on its own thread, as it should)
        clock.at_hold = lambda: receiver.wait_for(lambda r: len(r.connections) == MEMBERS)

    take_before_the_instant(world, pack, receipt, at_hold, ahead=ahead)
    # Then each member's connection was opened within PREPARE_AHEAD_SECONDS of the instant, and each
    # request went out on it from the thread that fired the pack (none started cold)
    opened_from = pack.scheduled_at - timedelta(seconds=PREPARE_AHEAD_SECONDS)
    assert len(receiver.connections) == MEMBERS
    assert all(c.accepted_at >= opened_from for c in receiver.connections.values())  # type: ignore[operator]
    assert senders and set(senders) == {threading.current_thread()}
    assert statuses(world, jobs) == ["SUCCEEDED"] * MEMBERS


def test_connections_the_server_closed_during_the_hold_are_replaced(world: World, receiver: Listener) -> None:
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)

    def at_hold() -> None:
        # Given a server that lets go of every idle connection while the pack holds
        receiver.wait_for(lambda r: len(r.connections) == MEMBERS)
        assert receiver.close_idle() == MEMBERS
        receiver.wait_for(lambda r: all(c.ended_unused for c in r.connections.values()))

    take_before_the_instant(world, pack, receipt, at_hold)
    # Then each member connected afresh at its start and succeeded
    assert len(receiver.requests()) == MEMBERS and len(receiver.connections) == 2 * MEMBERS
    assert statuses(world, jobs) == ["SUCCEEDED"] * MEMBERS


def test_a_member_skipped_at_the_instant_closes_its_prepared_connection(
    world: World, receiver: Listener
) -> None:
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)

    def at_hold() -> None:
        # Given a job paused while its pack holds, its connection already open
        receiver.wait_for(lambda r: len(r.connections) == MEMBERS)
        assert world.api("POST", f"/jobs/{jobs[0]['id']}/pause").status == 200

    take_before_the_instant(world, pack, receipt, at_hold)
    # Then it was not called and its connection was closed; the others were called
    assert len(receiver.requests()) == MEMBERS - 1
    receiver.wait_for(lambda r: sum(c.ended_unused for c in r.connections.values()) == 1)
    assert len(receiver.connections) == MEMBERS
    assert world.executions(jobs[0]["id"])[0]["status"] == "CANCELLED"
    assert statuses(world, jobs[1:]) == ["SUCCEEDED"] * (MEMBERS - 1)


def test_a_member_slow_to_prepare_holds_up_no_other(world: World, receiver: Listener) -> None:
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)
    worker = world.punctual.worker
    real = worker.prepare
    slow = pack.items[0].execution_id

    def prepare(job: Any, execution: Any) -> Any:
        # Given a member whose preparing (a lookup, say) ends only once the others have called
        if execution.id == slow:
            receiver.wait_for(lambda r: len(r.requests()) == MEMBERS - 1)
        return real(job, execution)

    worker.prepare = prepare  # type: ignore[method-assign]
    take_before_the_instant(world, pack, receipt, lambda: None)
    # Then the others started without it, and it started once it was ready
    assert len(receiver.requests()) == MEMBERS
    assert statuses(world, jobs) == ["SUCCEEDED"] * MEMBERS


def test_a_packs_requests_are_sent_one_after_another_by_the_thread_that_fires_it(
    world: World, receiver: Listener, senders: list[threading.Thread]
) -> None:
    # Given a pack of webhooks, their connections opened while it holds
    jobs, pack, receipt = webhooks_at_one_instant(world, receiver.url)
    # When it is taken and fires at its instant, once every connection is open (on a busy machine a
    # member not prepared by then starts cold, on its own thread, as it should)
    take_before_the_instant(
        world, pack, receipt, lambda: receiver.wait_for(lambda r: len(r.connections) == MEMBERS)
    )
    # Then every request went from the thread that took it (none handed to a member's thread to
    # wait for its turn), and each member's thread took its answer and stored its end
    assert len(receiver.requests()) == MEMBERS
    assert senders and set(senders) == {threading.current_thread()}
    assert statuses(world, jobs) == ["SUCCEEDED"] * MEMBERS
