"""The burst forecast: the pre-scaling decision (arithmetic), and the calls it makes.

Lambda's answers come from botocore's Stubber, DynamoDB's COUNT queries from a fake: nothing leaves
the process.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from functools import partial
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from punctual import wiring
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.scheduling import prescaling as burst
from punctual.scheduling.prescaling import (
    BurstPlanner,
    Limits,
    PollerPolicy,
    desired_min_pollers,
    load_percent,
    pollers_for,
)
from punctual.store.markers import count_bucket

POLICY = PollerPolicy(floor=2, ceiling=200)
MAPPING = "a1b2c3d4-5678-90ab-cdef-11111EXAMPLE"
NOW = datetime(2026, 12, 1, 8, 57, 10, tzinfo=UTC)  # the burst minute is 09:00, three minutes on
LIMITS = Limits(worker_concurrency=1000, lambda_concurrency=1000, table_write_units=40_000)


# ------------------------------------------------------------------------------ the decision


def test_a_million_minute_needs_the_documented_poller_limits() -> None:
    # Given 1,000,000 executions in a minute: 16,667 a second, x 1.5 headroom = 25,000 a second
    # Then receives bind: 10 a second a poller, 10 messages each = 100 messages a second a poller
    assert pollers_for(1_000_000, POLICY) == 250
    # and concurrency alone would need 25,000 / 10 x 0.25 s = 625 invokes, 63 pollers
    assert burst.concurrency_for(1_000_000, POLICY) == 625


def test_idle_minutes_keep_the_floor() -> None:
    assert desired_min_pollers([0, 0, 0, 0], current=2, policy=POLICY) == 2
    assert desired_min_pollers([], current=2, policy=POLICY) == 2


def test_a_coming_burst_raises_the_minimum_at_once_to_the_ceiling() -> None:
    # Given a million-execution minute three minutes on; the busiest minute decides
    coming = [10, 20, 30, 1_000_000, 0]
    # Then the minimum goes to what it needs, capped by the ceiling (MinimumPollers is at most 200)
    assert desired_min_pollers(coming, current=2, policy=POLICY) == 200
    capped = PollerPolicy(floor=2, ceiling=120)
    assert desired_min_pollers(coming, current=2, policy=capped) == 120


def test_a_moderate_minute_raises_it_to_its_need() -> None:
    # 60,000 in a minute: 1,500 a second with headroom, 15 pollers by receives
    assert desired_min_pollers([60_000], current=2, policy=POLICY) == 15


def test_a_small_fall_in_the_need_keeps_the_minimum() -> None:
    # Given 100 pollers up, the need falling to 80 (within 25 %): no update
    need_80 = 320_000  # a minute: 8,000 a second with headroom, 100 a second a poller
    assert pollers_for(need_80, POLICY) == 80
    assert desired_min_pollers([need_80], current=100, policy=POLICY) == 100
    # but a fall by a quarter or more lowers it
    assert desired_min_pollers([need_80 // 2], current=100, policy=POLICY) == 40


def test_after_the_burst_it_comes_back_to_the_floor() -> None:
    assert desired_min_pollers([0, 0, 0], current=200, policy=POLICY) == 2
    floor = PollerPolicy(floor=10, ceiling=200)
    assert desired_min_pollers([100], current=12, policy=floor) == 10  # at the floor: no hysteresis


def test_a_minimum_outside_the_bounds_is_brought_back() -> None:
    # Someone set the mapping by hand (or a deployment changed the bounds)
    policy = PollerPolicy(floor=5, ceiling=50)
    assert desired_min_pollers([0], current=150, policy=policy) == 5
    assert desired_min_pollers([60_000], current=150, policy=policy) == 15
    assert desired_min_pollers([0], current=2, policy=policy) == 5


def test_policy_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="floor <= ceiling"):
        PollerPolicy(floor=50, ceiling=20)
    with pytest.raises(ValueError):
        PollerPolicy(floor=1, ceiling=20)  # SQS: at least 2
    with pytest.raises(ValueError):
        PollerPolicy(floor=2, ceiling=201)  # MinimumPollers: at most 200


def test_load_percent_names_the_tightest_limit() -> None:
    # A million in a minute needs 625 concurrent invocations spread with headroom, 2,000 at one
    # instant (16 shards' packs of 500, each an invoke held at once), and 100,000 write units/s
    limits = Limits(worker_concurrency=20, lambda_concurrency=1000, table_write_units=40_000)
    assert load_percent(1_000_000, limits, POLICY) == round(100 * 2000 / 20, 1)
    roomy = Limits(
        worker_concurrency=1000,
        lambda_concurrency=1000,
        table_write_units=40_000,
        write_units_per_execution=6,
    )
    assert load_percent(1_000_000, roomy, POLICY) == 250.0  # table: 100,000 of 40,000 units
    assert load_percent(0, limits, POLICY) == 0.0
    assert load_percent(6_000, LIMITS, POLICY) < 100


def test_a_minute_sized_at_one_instant_only_when_that_instant_would_be_crowded() -> None:
    # Given 16 shards and packs of 500: up to 8,000 at one instant is a pack a shard, taken at the
    # instant, not held ahead; more is crowded, every pack an invoke held at once
    assert burst.instant_invokes(8_000, POLICY) == 0
    assert burst.instant_invokes(8_001, POLICY) == 32
    assert burst.pollers_for_instant(1_000_000, POLICY) == 200  # 2,000 packs
    # So a quiet minute's load is its spread's, and a crowded one's its packs'
    limits = Limits(worker_concurrency=20, lambda_concurrency=1000, table_write_units=40_000)
    assert load_percent(8_000, limits, POLICY) == round(100 * burst.concurrency_for(8_000, POLICY) / 20, 1)
    assert load_percent(8_001, limits, POLICY) == round(100 * 32 / 20, 1)


# ------------------------------------------------------------------------------ the calls


class CountingDynamoDB:
    """Answers count_bucket's queries from a table of (minute, shard) -> markers: each page one group
    item of up to `page` markers (a batch's), its count read back."""

    def __init__(self, markers: dict[tuple[str, int], int], page: int = 1000) -> None:
        self.markers = markers
        self.page = page
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def query(self, **kwargs: Any) -> dict[str, Any]:
        with self._lock:
            self.calls.append(kwargs)
        assert kwargs["ProjectionExpression"] == "#count"
        _, minute, shard = kwargs["ExpressionAttributeValues"][":pk"]["S"].split("#")
        total = self.markers.get((minute, int(shard)), 0)
        start = int(kwargs.get("ExclusiveStartKey", {}).get("n", 0))
        count = min(self.page, total - start)
        page: dict[str, Any] = {"Items": [{"count": {"N": str(count)}}] if count else [], "Count": 1}
        if start + count < total:
            page["LastEvaluatedKey"] = {"n": start + count}
        return page


def _lambda_client() -> Any:
    return boto3.client("lambda", region_name="us-east-1")


def _mapping(minimum: int, maximum: int = 200) -> dict[str, Any]:
    return {
        "UUID": MAPPING,
        "State": "Enabled",
        "ProvisionedPollerConfig": {"MinimumPollers": minimum, "MaximumPollers": maximum},
    }


def _planner(dynamodb: CountingDynamoDB, client: Any = None, *, shards: int = 4) -> BurstPlanner:
    return BurstPlanner(
        partial(count_bucket, dynamodb, "punctual"),
        shards,
        ManualClock(NOW),
        minutes_ahead=5,
        limits=LIMITS,
        policy=POLICY,
        lambda_client=client,
        mapping_id=MAPPING if client is not None else "",
    )


# A million due at 09:00 over 4 shards; a few in the minutes around it.
BURST_MARKERS = {
    **{("202612010900", shard): 250_000 for shard in range(4)},
    ("202612010856", 0): 7,
    ("202612010858", 3): 30,
}


def test_counts_every_shard_of_the_last_current_and_coming_minutes() -> None:
    dynamodb = CountingDynamoDB(BURST_MARKERS, page=100_000)
    report = _planner(dynamodb).run()
    assert report.counts == {
        "202612010856": 7,
        "202612010857": 0,
        "202612010858": 30,
        "202612010859": 0,
        "202612010900": 1_000_000,
        "202612010901": 0,
        "202612010902": 0,
    }
    assert report.busiest == 1_000_000
    # 7 minutes x 4 shards, and 2 more pages for each of the burst's buckets
    assert len(dynamodb.calls) == 7 * 4 + 4 * 2
    assert all(call["TableName"] == "punctual" and "ConsistentRead" not in call for call in dynamodb.calls)
    assert report.min_pollers is None  # no mapping given: forecast only


def test_raises_the_minimum_ahead_of_the_burst() -> None:
    client = _lambda_client()
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(2, 300), {"UUID": MAPPING})
        stub.add_response(
            "update_event_source_mapping",
            _mapping(200, 300),
            {"UUID": MAPPING, "ProvisionedPollerConfig": {"MinimumPollers": 200, "MaximumPollers": 300}},
        )
        report = _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000), client).run()
        stub.assert_no_pending_responses()
    assert report.updated and report.min_pollers == 200


def test_the_maximum_is_never_left_below_the_minimum() -> None:
    client = _lambda_client()
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(2, 100), {"UUID": MAPPING})
        stub.add_response(
            "update_event_source_mapping",
            _mapping(200, 200),
            {"UUID": MAPPING, "ProvisionedPollerConfig": {"MinimumPollers": 200, "MaximumPollers": 200}},
        )
        _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000), client).run()
        stub.assert_no_pending_responses()


def test_no_update_when_the_minimum_is_right() -> None:
    client = _lambda_client()
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(2), {"UUID": MAPPING})
        report = _planner(CountingDynamoDB({}), client).run()
        stub.assert_no_pending_responses()
    assert not report.updated and report.min_pollers == 2


def test_lowers_it_once_the_burst_has_passed() -> None:
    # At 09:02 the million of 09:00 is two minutes back: out of the window
    client = _lambda_client()
    planner = _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000), client)
    planner._clock = ManualClock(datetime(2026, 12, 1, 9, 2, 5, tzinfo=UTC))
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(200), {"UUID": MAPPING})
        stub.add_response(
            "update_event_source_mapping",
            _mapping(2),
            {"UUID": MAPPING, "ProvisionedPollerConfig": {"MinimumPollers": 2, "MaximumPollers": 200}},
        )
        report = planner.run()
        stub.assert_no_pending_responses()
    assert report.min_pollers == 2


def test_keeps_it_up_through_the_burst_minute() -> None:
    # At 09:01 the burst minute is the last one: still counted, the pollers stay
    client = _lambda_client()
    planner = _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000), client)
    planner._clock = ManualClock(datetime(2026, 12, 1, 9, 1, 5, tzinfo=UTC))
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(200), {"UUID": MAPPING})
        report = planner.run()
        stub.assert_no_pending_responses()
    assert not report.updated
    assert report.busiest == 0  # nothing coming: the published figure looks ahead only


def test_a_mapping_still_updating_is_left_to_the_next_tick() -> None:
    client = _lambda_client()
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(2), {"UUID": MAPPING})
        stub.add_client_error(
            "update_event_source_mapping",
            service_error_code="ResourceInUseException",
            http_status_code=400,
        )
        report = _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000), client).run()
        stub.assert_no_pending_responses()
    assert not report.updated and report.min_pollers == 2
    assert report.busiest == 1_000_000  # the forecast itself is still reported


def test_publishes_the_coming_load() -> None:
    from punctual.platform.observability import metrics

    metrics.clear_metrics()
    report = _planner(CountingDynamoDB(BURST_MARKERS, page=1_000_000)).run()
    published = metrics.metric_set
    assert published["ComingMinuteExecutions"]["Value"] == [1_000_000]
    assert published["BurstLoadPercent"]["Value"] == [report.load_percent]
    assert report.load_percent > 100  # 625 concurrent and 83,333 write units/s: over the table quota
    metrics.clear_metrics()


def test_off_by_default_and_built_from_settings() -> None:
    punctual = wiring.Punctual.__new__(wiring.Punctual)
    punctual.settings = Settings()
    assert punctual.burst_planner() is None
    punctual.settings = Settings(burst_forecast_minutes=3, worker_mapping_id=MAPPING, burst_pollers_floor=4)
    punctual.clock = ManualClock(NOW)
    punctual.store = type("S", (), {"clients": (None, CountingDynamoDB({}))})()  # type: ignore[assignment]
    client = _lambda_client()
    planner = punctual.burst_planner(lambda_client=client)
    assert planner is not None
    with Stubber(client) as stub:
        stub.add_response("get_event_source_mapping", _mapping(2), {"UUID": MAPPING})
        stub.add_response(
            "update_event_source_mapping",
            _mapping(4),
            {"UUID": MAPPING, "ProvisionedPollerConfig": {"MinimumPollers": 4, "MaximumPollers": 200}},
        )
        report = planner.run()
        stub.assert_no_pending_responses()
    assert len(report.counts) == 3 + 2 and report.min_pollers == 4


# ------------------------------------------------------------------------------ the price


def test_capacity_prices_the_pollers_kept_and_the_pollers_warmed() -> None:
    from punctual_cli import capacity

    base = capacity.plan(100)
    p = capacity.plan(100, pollers=10, warm_pollers=190, warm_hours=30)
    price = capacity.PRICES.sqs_poller_epu_hour
    assert p.monthly_cost["fixed_worker_pollers"] == pytest.approx(10 * 730 * price, abs=0.01)
    assert p.monthly_cost["worker_pollers_warmed"] == pytest.approx(190 * 30 * price, abs=0.01)
    assert p.monthly_cost["total"] == pytest.approx(
        base.monthly_cost["total"] + 10 * 730 * price + 190 * 30 * price, abs=0.02
    )
    assert "fixed_worker_pollers" not in base.monthly_cost
    # A million-execution minute needs 250 pollers by receives (16,667/s x 1.5 / 100 a poller)
    assert capacity.plan(100, burst_minute=1_000_000, pollers=2).worker_pollers == 250
    assert base.worker_pollers is None and "worker_pollers" not in base.as_dict()
    with pytest.raises(ValueError):
        capacity.plan(100, pollers=10, warm_pollers=191)  # MinimumPollers: at most 200
    with pytest.raises(ValueError):
        capacity.plan(100, warm_pollers=10, warm_hours=1)
