"""A route's first calls made side by side (the local stack answers requests in threads of one process)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import api_gateway

from punctual.api import app, bodies
from punctual_local.lambda_events import FakeLambdaContext, http_api_event


def test_threads_making_a_routes_first_calls_at_once_all_get_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a resolver no request has reached yet, whose routes take a moment to make their middleware
    # stacks, so that threads making a route's first calls at once all find it not made yet
    resolver = app._resolver(
        app._HttpResolver(enable_validation=True, json_body_deserializer=bodies.strict_json)
    )
    build = api_gateway.Route._build_middleware_stack

    def slowly(self: Any, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.05)
        build(self, *args, **kwargs)

    monkeypatch.setattr(api_gateway.Route, "_build_middleware_stack", slowly)
    statuses: list[int | str] = []
    context: Any = FakeLambdaContext(function_name="punctual-api")
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        event = http_api_event("GET", "/health", owner="arn:aws:iam::123456789012:user/alice")
        try:
            statuses.append(resolver.resolve(event, context)["statusCode"])
        except Exception as exc:  # what the local stack's server would answer 500 for
            statuses.append(type(exc).__name__)

    # When eight threads make its first calls to one route at once, and then again
    for _ in range(2):
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    # Then every call is answered, the first ones too
    assert statuses == [200] * 16
