"""The tick fans out one scanner invocation per shard group; regrouping never skips a bucket."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from unittest import mock

from functions.scanner.handler import lambda_handler as scanner_handler
from punctual.platform.timefmt import to_rfc3339
from punctual.scheduling.scanner import shard_groups
from punctual_local.lambda_events import FakeLambdaContext
from tests.world import World


def test_shard_groups_cover_every_shard_once() -> None:
    for shards in (1, 4, 16, 17):
        for fanout in (1, 3, 4, 40):
            groups = shard_groups(shards, fanout)
            flat = sorted(s for g in groups for s in g)
            assert flat == list(range(shards))
            assert len(groups) == min(fanout, shards)
            assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_the_tick_invokes_one_scanner_per_group_and_scans_nothing_itself(world: World) -> None:
    # Given a fan-out of 2 over 4 shards
    world.punctual.settings = world.punctual.settings.model_copy(update={"scanner_fanout": 2})
    invoked: list[dict[str, Any]] = []
    client = mock.Mock()
    client.invoke.side_effect = lambda **kwargs: invoked.append(kwargs)
    # When the EventBridge tick arrives
    with (
        mock.patch("punctual.platform.aws.lambda_client", return_value=client),
        world.counting_calls() as calls,
    ):
        answer = scanner_handler({}, FakeLambdaContext())
    # Then it started two asynchronous invocations of itself, one per group, and read no bucket
    assert answer == {"fanned_out": 2}
    assert [json.loads(i["Payload"]) for i in invoked] == [{"shards": [0, 2]}, {"shards": [1, 3]}]
    assert {i["InvocationType"] for i in invoked} == {"Event"}
    assert {i["FunctionName"] for i in invoked} == {FakeLambdaContext().invoked_function_arn}
    assert calls["dynamodb.Query"] == 0


def test_regrouping_shards_skips_no_bucket(world: World) -> None:
    # Given jobs across all shards, due in 5 minutes, and a scanner that ticked as one group
    world.tick()
    jobs = [
        world.create({"type": "at", "at": to_rfc3339(world.clock.now() + timedelta(seconds=300))})
        for _ in range(8)
    ]
    # When the scanner is down for 10 minutes and comes back as two groups
    world.clock.advance(600)
    for group in shard_groups(world.punctual.settings.shard_count, 2):
        scanner_handler({"shards": group}, FakeLambdaContext())
    world.drain()
    # Then every job ran
    for job in jobs:
        assert world.executions(job["id"])[0]["status"] == "SUCCEEDED"
