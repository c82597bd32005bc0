"""Which jobs an API request enqueues itself: only those due before the scanner's next tick can send
them. The rest of the hand-off window waits, unclaimed, for that tick, which sends each instant's
executions packed together rather than a message a request."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from punctual.platform.timefmt import to_rfc3339
from tests.world import World


def soon_markers(world: World) -> list[dict[str, Any]]:
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("DUE#SOON#")]


def sent_while(world: World, action: Any) -> Counter[str]:
    with world.counting_calls() as calls:
        action()
    return Counter({k: v for k, v in calls.items() if k.startswith("sqs.Send")})


def test_the_window_a_request_enqueues_is_a_tick_its_lateness_and_a_margin() -> None:
    from punctual.platform.config import Settings

    # A rate(1 minute) rule fires within its minute: the next tick may be two periods away
    assert Settings().handoff_claim_seconds == 60 + 60 + 15
    assert Settings().handoff_seconds == 180
    # The local stack's ticker keeps time
    assert (
        Settings(tick_seconds=10, tick_lateness_seconds=0, lookahead_seconds=20).handoff_claim_seconds == 25
    )
    # Never more than the hand-off window itself
    assert Settings(tick_seconds=300, lookahead_seconds=5).handoff_claim_seconds == 5 + 300 + 30


def test_a_job_due_before_the_next_tick_is_sent_by_its_request(world: World) -> None:
    world.run_for(5)
    claim = world.punctual.settings.handoff_claim_seconds
    at = to_rfc3339(world.clock.now() + timedelta(seconds=claim - 5))
    # When a job is created due just inside the window a request enqueues
    sent = sent_while(world, lambda: world.create({"type": "at", "at": at}))
    # Then the request sent its message, and its marker (claimed) is gone once sent
    assert sent == Counter({"sqs.SendMessageBatch": 1})
    assert soon_markers(world) == []


def test_jobs_due_after_the_next_tick_wait_for_it_and_go_packed(world: World) -> None:
    # Given a minute just started
    world.run_for(1)
    settings = world.punctual.settings
    lead = settings.handoff_claim_seconds + 20
    assert lead < settings.handoff_seconds
    instant = world.clock.now() + timedelta(seconds=lead)
    # When ten jobs due at one instant beyond the window a request enqueues (but within the hand-off
    # window) are created one request each
    jobs: list[dict[str, Any]] = []
    sent = sent_while(
        world, lambda: jobs.extend(world.create({"type": "at", "at": to_rfc3339(instant)}) for _ in range(10))
    )
    # Then no request sent anything: their markers wait unclaimed under the soon partitions
    assert sent == Counter()
    markers = soon_markers(world)
    assert len(markers) == 10
    assert not any("handoff_until_ms" in m for m in markers)
    # and the ticks before the instant send them, one message per shard for the instant
    shards = len({m["pk"]["S"] for m in markers})
    with world.counting_calls() as calls:
        world.run_for(lead + 5)
    entries = calls["sqs.SendMessageBatch"]
    assert 1 <= entries <= shards
    # and every job ran once, on time
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["lateness_ms"] < 1000
    assert soon_markers(world) == []


def run_with_ticks_at(world: World, ticks: list[datetime], until: datetime) -> None:
    """Let time pass with the scanner ticking only at `ticks` (EventBridge fires a rate(1 minute) rule
    anywhere within its minute: two ticks may be two periods apart); the workers poll all along."""
    while world.clock.now() < until:
        if ticks and world.clock.now() >= ticks[0]:
            ticks.pop(0)
            world.tick()
        world.drain()
        world.clock.advance(1)
    world.drain()


def test_what_waits_for_the_next_tick_runs_on_time_when_ticks_come_two_periods_apart(
    world: World,
) -> None:
    # Given a tick at 09:00:00
    minute = world.clock.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
    world.clock.set(minute)
    world.tick()
    # When, 40 s later, jobs are created due beyond the window a request enqueues, up to the end of
    # the hand-off window
    world.clock.advance(40)
    settings = world.punctual.settings
    claim, window = settings.handoff_claim_seconds, settings.handoff_seconds
    ahead = [claim + 1, claim + 15, window - 1]
    jobs: list[dict[str, Any]] = []
    sent = sent_while(
        world,
        lambda: jobs.extend(
            world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=s))})
            for s in ahead
        ),
    )
    assert sent == Counter()
    # and the next ticks come at 09:01:00, then two periods apart: 09:02:59, 09:04:58
    gap = timedelta(seconds=settings.tick_seconds + settings.tick_lateness_seconds - 1)
    ticks = [minute + timedelta(minutes=1) + n * gap for n in range(3)]
    # Then the 09:01:00 tick sent them all (the one after it would be late for the first)
    run_with_ticks_at(world, ticks, minute + timedelta(seconds=61))
    assert soon_markers(world) == []
    # and each ran on time
    run_with_ticks_at(world, ticks, minute + timedelta(minutes=6))
    for job in jobs:
        [execution] = world.executions(job["id"])
        assert execution["status"] == "SUCCEEDED"
        assert execution["lateness_ms"] < 1000, (job["next_run_at"], execution)
