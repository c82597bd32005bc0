"""The HTTP API (docs/api.md), on Powertools' API Gateway resolvers with validation and OpenAPI.

The routes are registered once, on Routers that both resolvers include: API Gateway HTTP APIs (the
deployed default) send payload format 2.0 events, REST APIs payload 1.0; `resolve` answers either,
with no configuration. Routes parse, call the JobService once and shape the answer. Domain errors map
to HTTP in one place.

`app` builds the resolvers and `resolve`; `routes/` holds the routes, one module a resource;
`schemas` the request and response models; `responses` builds response models from domain objects;
`inputs` reads what a request carries beside its body; `bodies` checks a body before it is parsed;
`errors` maps domain errors to HTTP.
"""

from punctual.api.app import http_app, resolve, resolver_for, rest_app

__all__ = ["http_app", "resolve", "resolver_for", "rest_app"]
