"""Shared fixtures. Environment first: nothing may reach AWS, tracing is off in tests, and the CLI's
cache (the ids it has shown) is a directory of the run's own, never the user's."""

from __future__ import annotations

import os
import tempfile

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
        "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="punctual-tests-cache-"),
    }
)

import functools
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import botocore.hooks
import botocore.session
import pytest
from hypothesis import settings

from punctual.platform.clock import ManualClock
from punctual_local.moto.speedups import (
    list_actions_once,
    query_only_the_partition,
    route_each_request_once,
    speed_up_dynamodb,
)
from tests.world import API_EVENTS, World, mocked_world

# Hypothesis' per-example deadline measures the machine, not the code: a loaded CI runner trips it.
# Tests that bound time (cron) assert their own budgets.
settings.register_profile("punctual", deadline=None)
settings.load_profile("punctual")

START = datetime(2026, 12, 1, 8, 59, 30, tzinfo=UTC)


def _share_botocore_loading() -> None:
    """Every test builds its own boto3 sessions, and each session decodes botocore's service models
    and inspects its event handlers' signatures again: most of a moto world's set-up. The models
    are read-only once loaded, so one loader (whose cache is per instance) serves every session of the
    process, and a handler's signature is inspected once."""
    botocore.session.create_loader = functools.cache(botocore.session.create_loader)
    accepts = botocore.hooks.accepts_kwargs

    @functools.cache
    def accepts_function(func: Any) -> Any:
        return accepts(func)

    def accepts_kwargs(func: Any) -> Any:
        # Bound methods are new objects each session: their function says the same.
        return accepts_function(getattr(func, "__func__", func))

    botocore.hooks.accepts_kwargs = accepts_kwargs

    # An event's aliased name depends only on the aliases, the same for every client: one cache for
    # them all, where each new client's emitter worked every name out again.
    shared: dict[frozenset[tuple[str, str]], dict[str, str]] = {}
    aliaser_init = botocore.hooks.EventAliaser.__init__

    def init(self: Any, event_emitter: Any, event_aliases: Any = None) -> None:
        aliaser_init(self, event_emitter, event_aliases)
        self._alias_name_cache = shared.setdefault(frozenset(self._event_aliases.items()), {})

    botocore.hooks.EventAliaser.__init__ = init  # type: ignore[method-assign]


_share_botocore_loading()


def _name_moto_attributes_once() -> None:
    """moto's queues convert each attribute's name to snake case each time one is read, a
    character at a time: a pure function of a handful of names, worked out once each."""
    import moto.core.responses
    import moto.sqs.models
    from moto.core.utils import camelcase_to_underscores

    once = functools.cache(camelcase_to_underscores)
    moto.sqs.models.camelcase_to_underscores = once  # type: ignore[attr-defined]
    moto.core.responses.camelcase_to_underscores = once  # type: ignore[attr-defined]


_name_moto_attributes_once()

# moto with the local stack's speedups (serialising item results as JSON, each expression parsed
# once, a query on the table's key reading its partition only, each request routed once): most of a
# moto world's time is moto's, and these take about a third of it. They change how fast moto answers,
# never what: tests/local/moto/test_speedups.py checks the answers equal, in processes of their own.
speed_up_dynamodb()
query_only_the_partition()
list_actions_once()
route_each_request_once()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # `make test` hands out whole files in collection order (--dist loadfile --no-loadscope-reorder):
    # the longest go first, so that the workers end together. The end-to-end files go before all the
    # others, so that a worker runs its share of them in one stretch: the local stack they share
    # (tests/e2e/conftest.py) starts once a worker and stops when the worker leaves them.
    items.sort(
        key=lambda item: (not item.nodeid.startswith("tests/e2e/"), item.get_closest_marker("long") is None)
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadfile, except that tests/infra's files go to one worker together: they share the
    session's synthesized CDK apps (tests/infra/conftest.py), each some seconds of CPU to build, and
    spread over the workers each app was built again by every worker that ran a file needing it."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class InfraTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "tests/infra" if scope.startswith("tests/infra/") else scope

    return InfraTogether(config, log)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def claim_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone execution goes the claim path (Worker.handle), as one sent guarded, a retry or a run by
    hand does, rather than under a lease of its own: for tests of the claim's mechanics."""
    from punctual.execution import packs

    monkeypatch.setattr(packs, "PACK_LEASE_MIN", 2)


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
