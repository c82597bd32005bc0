"""The API's resolvers made safe for requests answered side by side in threads of one process, as the
local stack's API process answers them.

Powertools keeps a request's event at class level (`BaseRouter.current_event`) and its Lambda and
routing contexts on the resolver. That is right on Lambda, where an execution environment answers one
request at a time, so the Lambda package keeps Powertools' resolvers as they are; the local stack
changes them here, in its own process, before its first request. So with the API's pause of the
collector: one request's, on Lambda; counted across the threads, here.
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, ResponseBuilder, Route

from punctual.api import app
from punctual.platform import collector
from punctual_local import collector as local_collector

_request = threading.local()
_building = threading.Lock()


class PerThread(ApiGatewayResolver):
    """A resolver whose request state (the event, the Lambda context, the routing context) belongs to
    the calling thread."""

    @property
    def current_event(self) -> Any:
        return _request.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        _request.event = value

    @property
    def lambda_context(self) -> Any:
        return _request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        _request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(_request, "context"):
            _request.context = {}
        return _request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        _request.context = value

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder:
        # Powertools builds a route's middleware stack at its first call, onto what is there: two
        # threads making a route's first calls at once each wrap the other's frames, and the route
        # answers 500 until the process restarts.
        if not route._middleware_stack_built:
            with _building:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)
        return super()._call_route(route, route_arguments)

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        # (Powertools sets its class-level copy too; this resolver and its routers read this one.)
        _request.event = self._to_proxy_event(event)
        _request.lambda_context = context
        return super().resolve(event, context)


def per_thread(resolver: ApiGatewayResolver) -> ApiGatewayResolver:
    """`resolver`, its request state now the calling thread's (its routes and settings kept)."""
    if not isinstance(resolver, PerThread):
        kind = type(resolver)
        resolver.__class__ = type(f"PerThread{kind.__name__}", (PerThread, kind), {})
    return resolver


def install() -> None:
    """Make both of the API's resolvers per thread, in this process, and its pause of the collector
    counted across threads."""
    per_thread(app.http_app)
    per_thread(app.rest_app)
    collector.paused = local_collector.paused_across_threads
