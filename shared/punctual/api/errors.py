"""Domain errors to HTTP, once: the exception handlers (on `router`, which the resolvers include),
the error body, and the error answers each route documents in the OpenAPI document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from pydantic import BaseModel

from punctual.api.schemas import ErrorOut
from punctual.domain.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed, RetryableStoreError
from punctual.platform.observability import logger

# The exception handlers; the resolvers include this router with the routes'.
router = Router()


class TooLarge(Exception):
    """A request whose answer could not be carried (413), naming the field to make smaller."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class Unauthorized(Exception):
    """The event names no authenticated caller: 401."""


IDEMPOTENCY_KEY_FIELD = "header idempotency-key"
IF_MATCH_FIELD = "header if-match"
# Fields whose bad values answer 400 rather than 422: not part of the body the client composed, but
# what it carries along (a cursor it was given, a key it made up), as docs/api.md says of cursors.
BAD_REQUEST_FIELDS = frozenset({"cursor", IDEMPOTENCY_KEY_FIELD, IF_MATCH_FIELD})


# Why a body that is JSON but not an object is refused (said as it is, not as bad JSON).
NOT_AN_OBJECT = "the body must be a JSON object"


# An error body names a field by at most this much of its path, says what was wrong in at most
# this much (a 10 MB key or time zone is quoted by its first characters), and lists at most this
# many problems: it stays small whatever the request.
FIELD_MAX_CHARS = 300
MESSAGE_MAX_CHARS = 2000
ERRORS_LISTED_MAX = 100


def error_response(status: int, message: str, **extra: Any) -> Response[Any]:
    return Response(status_code=status, content_type="application/json", body=_error_body(message, **extra))


def error_event_response(status: int, message: str, field: str) -> dict[str, Any]:
    """An error answered before the resolver sees the request, as a proxy event's response."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": _error_body(message, field=field),
        "isBase64Encoded": False,
    }


def _error_body(message: str, field: str | None = None, errors: list[dict[str, Any]] | None = None) -> str:
    listed = None
    if errors is not None:
        listed = [
            {
                **e,
                "field": _cut(e.get("field"), FIELD_MAX_CHARS),
                "message": _cut(e.get("message"), MESSAGE_MAX_CHARS),
            }
            for e in errors[:ERRORS_LISTED_MAX]
        ]
    body = ErrorOut(
        message=_cut(message, MESSAGE_MAX_CHARS) or "", field=_cut(field, FIELD_MAX_CHARS), errors=listed
    )
    return body.model_dump_json(exclude_none=True)


def _cut(text: str | None, most: int) -> str | None:
    if text is None or len(text) <= most:
        return text
    return f"{text[:most]}… ({len(text):,} characters)"


_ERRORS = {
    400: {
        "description": "Bad input outside the body: an invalid or empty cursor; an Idempotency-Key empty, "
        "over-long or outside printable ASCII; an If-Match that is not a job's ETag.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    401: {
        "description": "Missing or unknown credentials.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    404: {
        "description": "No such job (or task) for this owner.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    409: {
        "description": "Not possible in the job's state.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    412: {
        "description": "If-Match named a revision the job is no longer at: read it again.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    415: {
        "description": "A body that is not JSON (send Content-Type: application/json).",
        "content": {"application/json": {"model": ErrorOut}},
    },
    422: {
        "description": "Invalid request, naming the field.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    503: {
        "description": "The store is throttled, or the API is shedding load; retry after Retry-After "
        "(with the same Idempotency-Key).",
        "content": {"application/json": {"model": ErrorOut}},
    },
}
# What the HTTP front end (API Gateway, or the local stack's) answers before the API reads a request:
# any operation can get them, so every operation lists them.
_FRONT_END = {
    413: {
        "description": "A body over 1 MiB besides whitespace (POST /jobs/batch: over 3 MiB, or jobs whose answer would "
        "pass 5,000,000 bytes).",
        "content": {"application/json": {"model": ErrorOut}},
    },
    414: {"description": "A request line too long.", "content": {"application/json": {"model": ErrorOut}}},
    429: {
        "description": "Too many requests; retry after Retry-After.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    431: {"description": "Headers too large.", "content": {"application/json": {"model": ErrorOut}}},
}


def openapi_responses(status: int, model: type[BaseModel], description: str, *errors: int) -> dict[int, Any]:
    answer: dict[int, Any] = {
        status: {"description": description, "content": {"application/json": {"model": model}}}
    }
    for code in (401, 415, 422, *errors):
        answer[code] = _ERRORS[code]
    answer.update(_FRONT_END)
    answer.setdefault(503, _ERRORS[503])
    return answer


@router.exception_handler(RequestValidationError)
def _invalid(exc: RequestValidationError) -> Response[Any]:
    errors = [_plain_error(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    field = _cut(first["field"], FIELD_MAX_CHARS)
    message = f"{field}: {first['message']}" if field else str(first["message"])
    # (a cursor too long to be one is as bad as an altered one: 400, as docs/api.md says of those)
    status = 400 if first["field"] in BAD_REQUEST_FIELDS else 422
    return error_response(status, message, field=first["field"], errors=errors)


@router.exception_handler(UnicodeDecodeError)
def _not_utf8(exc: UnicodeDecodeError) -> Response[Any]:
    # Powertools decodes a base64 body as UTF-8 before parsing it as JSON; other bytes raise here.
    # (its problem listed too, as every 422's are)
    why = "request body is not valid JSON (not UTF-8)"
    return error_response(422, f"body: {why}", field="body", errors=[{"field": "body", "message": why}])


@router.exception_handler(InvalidRequest)
def _invalid_domain(exc: InvalidRequest) -> Response[Any]:
    status = 400 if exc.field in BAD_REQUEST_FIELDS else 422
    errors = [
        {
            "field": problem.field,
            "message": str(problem).removeprefix(f"{problem.field}: ") if problem.field else str(problem),
            "type": "value_error",
        }
        for problem in exc.problems
    ]
    return error_response(status, str(exc), field=exc.field, errors=errors)


@router.exception_handler(NotFound)
def _not_found(exc: NotFound) -> Response[Any]:
    return error_response(404, str(exc))


@router.exception_handler(Conflict)
def _conflict(exc: Conflict) -> Response[Any]:
    return error_response(409, str(exc))


@router.exception_handler(PreconditionFailed)
def _precondition_failed(exc: PreconditionFailed) -> Response[Any]:
    return error_response(412, str(exc))


@router.exception_handler(TooLarge)
def _too_large(exc: TooLarge) -> Response[Any]:
    return error_response(413, str(exc), field=exc.field)


@router.exception_handler(Unauthorized)
def _unauthorized(exc: Unauthorized) -> Response[Any]:
    return error_response(401, str(exc))


@router.exception_handler(RetryableStoreError)
def _busy(exc: RetryableStoreError) -> Response[Any]:
    logger.warning("store throttled", extra={"error": str(exc)})
    return error_response(503, "busy; retry shortly")


@router.exception_handler(ServiceError)
def _service_error(exc: ServiceError) -> Response[Any]:
    return error_response(exc.status_code, str(exc.msg))


@router.exception_handler(NotFoundError)  # what a resolver's `not_found` registers
def _no_route(exc: Exception) -> Response[Any]:
    event = router.current_event
    allowed = _methods_at(_routes, event.path)
    if allowed and event.http_method not in allowed:
        # (the path is an endpoint, the method not one of its: 405 saying which are)
        return _not_allowed(event.http_method, event.path, allowed)
    return error_response(404, f"no such endpoint: {event.http_method} {event.path}")


def refuse_other_methods_on_fixed_paths(app: Any, next_middleware: Any) -> Any:
    """A fixed path of the API (/jobs/batch, /jobs/pause) reached by a method a route with a
    parameter takes there (DELETE /jobs/{job_id}) is that fixed path's: 405 naming its methods,
    not "job 'batch' not found" (no id is `batch`: ids begin `job_`)."""
    route = app.context.get("_route")
    if route is not None and "<" in route.path:
        event = app.current_event
        allowed = _methods_at(app._static_routes, event.path)
        if allowed and event.http_method not in allowed:
            return _not_allowed(event.http_method, event.path, allowed)
    return next_middleware(app)


def _not_allowed(method: str, path: str, allowed: list[str]) -> Response[Any]:
    return Response(
        status_code=405,
        content_type="application/json",
        body=_error_body(f"{method} is not allowed on {path}; it takes {', '.join(allowed)}"),
        headers={"Allow": ", ".join(allowed)},
    )


def _methods_at(routes: Sequence[Any], path: str) -> list[str]:
    """The methods of the documented routes (the resolver's own, as it matches them) that take `path`."""
    path = path.rstrip("/") or "/"
    return sorted({r.method for r in routes if r.include_in_schema and r.rule.match(path)})


# The routes of the API that includes this module's router (know_routes): a request that misses reads
# which methods its path takes from them.
_routes: list[Any] = []


def know_routes(resolver: Any) -> None:
    _routes[:] = [*resolver._static_routes, *resolver._dynamic_routes]


_LOCATIONS: dict[str, str] = {"body": "", "query": "", "header": "header ", "path": ""}


def _plain_error(error: dict[str, Any]) -> dict[str, Any]:
    """A pydantic error as {field, message}, with the field as a path into the request:
    `schedule.expression`, `jobs[3].task.type`."""
    loc = list(error.get("loc", ()))
    prefix = ""
    if loc and loc[0] in _LOCATIONS:
        prefix = _LOCATIONS[str(loc[0])]
        loc = loc[1:]
    # Drop pydantic's names for union members: "schedule.cron.expression" -> "schedule.expression".
    path: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int) and path:
            path[-1] += f"[{part}]"
            continue
        part = str(part)
        if part.startswith("function-") or (i > 0 and loc[i - 1] == "schedule" and part in _UNION_TAGS):
            continue
        if "[" in part:  # (a union member's type, `dict[str,any]`: no path into the request)
            continue
        if i > 0 and loc[i - 1] == "task" and part in ("inline", "named"):
            continue
        path.append(part)
    if path and path[0] == "body":
        path = path[1:]
    field = prefix + ".".join(path) if path else None
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "value_error":
        message = message.removeprefix("Value error, ")  # pydantic's, for a validator's ValueError
    if error.get("type") == "json_invalid":
        why = str((error.get("ctx") or {}).get("error") or "")
        field = "body"
        if why.startswith(NOT_AN_OBJECT):
            message = why
        else:
            message = "request body is not valid JSON" + (f" ({why})" if why else "")
    elif field is None and prefix == "":
        field = "body"  # the body as a whole: missing, null, or not an object
    return {"field": field, "message": message, "type": error.get("type")}


_UNION_TAGS: frozenset[str] = frozenset({"now", "at", "in", "cron", "rate"})
