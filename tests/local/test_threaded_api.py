"""The API's resolvers answering requests side by side in threads of one process, as the local
stack's API process answers them (punctual_local/threaded_api.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, api_gateway

from punctual.api import app, bodies, errors
from punctual.api.routes import ROUTERS
from punctual_local import threaded_api
from punctual_local.lambda_events import FakeLambdaContext, http_api_event
from tests.world import World

BOTH_FORMATS = pytest.mark.usefixtures("api_format")
CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}


@pytest.fixture
def threaded(world: World) -> Iterator[None]:
    """The API's resolvers made per thread for one test, and given back as they were; the world's
    requests answered side by side."""
    kinds = type(app.http_app), type(app.rest_app)
    threaded_api.install()
    world.side_by_side = True
    yield
    app.http_app.__class__, app.rest_app.__class__ = kinds


@pytest.fixture
def fresh() -> Iterator[APIGatewayHttpResolver]:
    """A new HTTP API resolver with the API's routes, which no request has reached yet. (Including a
    router points it at its new resolver: the API's own are pointed back after.)"""
    routers = (app.router, *ROUTERS, errors.router)
    resolvers = [router.api_resolver for router in routers]
    yield app._resolver(
        APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=bodies.strict_json)
    )
    for router, resolver in zip(routers, resolvers, strict=True):
        router.api_resolver = resolver


def test_a_resolver_made_per_thread_keeps_its_routes_and_kind(fresh: APIGatewayHttpResolver) -> None:
    # Given a fresh HTTP API resolver with the API's routes
    resolver = fresh
    routes = len(resolver._static_routes) + len(resolver._dynamic_routes)
    # When it is made per thread, twice
    threaded_api.per_thread(threaded_api.per_thread(resolver))
    # Then it is one of Powertools' HTTP API resolvers still, with the same routes, changed once
    assert isinstance(resolver, APIGatewayHttpResolver) and isinstance(resolver, threaded_api.PerThread)
    assert len(resolver._static_routes) + len(resolver._dynamic_routes) == routes
    assert type(resolver).__mro__.count(threaded_api.PerThread) == 1


def test_threads_making_a_routes_first_calls_at_once_all_get_answers(
    fresh: APIGatewayHttpResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a resolver no request has reached yet, made per thread, whose routes take a moment to make
    # their middleware stacks, so that threads making a route's first calls at once all find it not
    # made yet
    resolver = threaded_api.per_thread(fresh)
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


@BOTH_FORMATS
@pytest.mark.usefixtures("threaded")
def test_requests_answered_side_by_side_each_keep_their_own_caller(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's job, and the API reading its caller only once a second request has been answered
    from punctual.api.routes import jobs

    job_id = world.api("POST", "/jobs", {"task": {"type": "noop"}, "schedule": CRON}).body["id"]
    bob_answered = threading.Event()
    read_caller = jobs._owner
    first = threading.Lock()
    alice_in = threading.Event()

    def owner_after_bob() -> str:
        if first.acquire(blocking=False):  # alice's request, the first to get here
            alice_in.set()
            assert bob_answered.wait(10)
        return read_caller()

    monkeypatch.setattr(jobs, "_owner", owner_after_bob)
    answers: dict[str, int] = {}

    def get_as(owner: str) -> None:
        answers[owner] = world.api("GET", f"/jobs/{job_id}", owner=owner).status

    # When alice asks for it, and bob asks for it while alice's request is under way
    alice = threading.Thread(target=get_as, args=("alice",))
    alice.start()
    assert alice_in.wait(10)
    get_as("bob")
    bob_answered.set()
    alice.join(10)
    # Then each request was answered for its own caller: bob cannot see it, alice can
    assert answers == {"bob": 404, "alice": 200}
