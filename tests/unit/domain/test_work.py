"""The work message: its body, and how long it is held before it is visible (SQS's delays)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from punctual.domain.work import WorkItem, delay_seconds
from punctual.platform.aws_limits import SQS_MAX_DELAY_SECONDS

NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def item(n: int) -> WorkItem:
    return WorkItem(job_id=f"job{n}", execution_id=f"job{n}.e", scheduled_at=NOW + timedelta(seconds=n))


@given(
    job_id=st.text(min_size=1, max_size=40),
    execution_id=st.text(min_size=1, max_size=60),
    ms=st.integers(0, 7_258_118_400_000),
    version=st.none() | st.integers(1, 2**53),
    manual=st.booleans(),
)
def test_work_item_round_trips_through_the_message_body(
    job_id: str, execution_id: str, ms: int, version: int | None, manual: bool
) -> None:
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    original = WorkItem(job_id, execution_id, at, version, manual)
    assert WorkItem.from_body(original.to_body()) == original


def test_a_message_of_an_older_version_reads_without_version_or_manual() -> None:
    body = '{"job_id": "job_1", "execution_id": "job_1.e", "scheduled_ms": 1000}'
    assert WorkItem.from_body(body) == WorkItem("job_1", "job_1.e", datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC))


def test_work_item_body_carries_epoch_milliseconds() -> None:
    body = json.loads(item(0).to_body())
    assert body == {
        "job_id": "job0",
        "execution_id": "job0.e",
        "scheduled_ms": 1_796_115_600_000,  # 2026-12-01T09:00:00Z
    }


@pytest.mark.parametrize(
    ("scheduled_at", "expected"),
    [
        (NOW, 0),
        (NOW - timedelta(minutes=5), 0),  # late: at once
        (NOW + timedelta(seconds=1.999), 1),  # rounded down: never visible after its instant
        (NOW + timedelta(seconds=45), 45),
        (NOW + timedelta(seconds=900), 900),
        (NOW + timedelta(hours=2), SQS_MAX_DELAY_SECONDS),  # SQS's maximum
    ],
)
def test_delay_seconds_is_whole_seconds_until_the_instant_within_sqs_limits(
    scheduled_at: datetime, expected: int
) -> None:
    assert delay_seconds(scheduled_at, NOW) == expected


@given(offset_ms=st.integers(-(10**9), 10**9))
def test_delay_never_makes_a_message_visible_after_its_instant(offset_ms: int) -> None:
    scheduled_at = NOW + timedelta(milliseconds=offset_ms)
    delay = delay_seconds(scheduled_at, NOW)
    assert 0 <= delay <= SQS_MAX_DELAY_SECONDS
    assert NOW + timedelta(seconds=delay) <= max(scheduled_at, NOW)
