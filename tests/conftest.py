"""Shared fixtures. Environment first: nothing may reach AWS, and tracing is off in tests."""

from __future__ import annotations

import os

os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "punctual",
        "POWERTOOLS_METRICS_NAMESPACE": "Punctual",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
)

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import settings

from punctual.clock import ManualClock
from tests.world import API_EVENTS, World, mocked_world

# Hypothesis' per-example deadline measures the machine, not the code: a loaded CI runner trips it.
# Tests that bound time (cron) assert their own budgets.
settings.register_profile("punctual", deadline=None)
settings.load_profile("punctual")

START = datetime(2026, 12, 1, 8, 59, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock) as w:
        yield w


@pytest.fixture(params=sorted(API_EVENTS))
def api_format(request: pytest.FixtureRequest, world: World) -> str:
    """The world's API driven through each of API Gateway's event formats in turn (HTTP API's
    payload 2.0, REST API's payload 1.0): `@pytest.mark.usefixtures("api_format")`."""
    world.api_format = request.param
    return str(request.param)
