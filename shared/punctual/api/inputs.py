"""What the routes make of a request beyond its validated body: the caller, a job's task and the
domain's NewJob, tag filters, the Idempotency-Key, instants in the query. Bad values raise
InvalidRequest naming the field (errors.py answers it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.event_handler.openapi.params import Header
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent, APIGatewayProxyEventV2
from pydantic import Field

from punctual.api.errors import IDEMPOTENCY_KEY_FIELD, IF_MATCH_FIELD, Unauthorized, error_event_response
from punctual.api.schemas import JobIn
from punctual.domain.errors import InvalidRequest
from punctual.domain.models import TaskRef, TaskSpec
from punctual.domain.schedules import request_instant
from punctual.domain.validation import QUERY_INTEGER, parse_tag_filter
from punctual.jobs.creation import NewJob

# A page's `?limit=`: 1 to 100, in digits. (Its range is a Field beside the route's Query, where the
# OpenAPI document shows it as minimum and maximum.)
PageLimit = Annotated[int, Field(ge=1, le=100), QUERY_INTEGER]


def caller(event: Any) -> str:
    """The caller's IAM principal ARN, where API Gateway's IAM authorization puts it in `event` (a
    router's current_event)."""
    owner = ""
    if isinstance(event, APIGatewayProxyEventV2):  # HTTP API: the IAM authorizer's caller
        owner = event.request_context.authorizer.iam.user_arn
    elif isinstance(event, APIGatewayProxyEvent):  # REST API
        identity = event.request_context.identity
        owner = identity.user_arn or identity.caller or ""
    if not owner:
        raise Unauthorized("no authenticated caller")
    return owner


def job_task(task: TaskSpec | str, params: dict[str, Any] | None) -> TaskSpec | TaskRef:
    if isinstance(task, str):
        return TaskRef(name=task, params=params or {})
    if params is not None:
        raise InvalidRequest("params: an inline task takes its parameters in task.params", field="params")
    return task


def tag_filter(tag: str | None) -> tuple[str, str | None] | None:
    if tag is None:
        return None
    try:
        return parse_tag_filter(tag)
    except ValueError as exc:
        raise InvalidRequest(str(exc), field="tag") from None


def new_job(body: JobIn) -> NewJob:
    return NewJob(
        task=job_task(body.task, body.params),
        tags=body.tags,
        schedule=body.schedule,
        name=body.name,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        policy=body.policy,
        notify=tuple(body.notify),
        signing_secret=body.signing_secret,
    )


# An Idempotency-Key: printable ASCII (spaces too) but the comma, 1 to MAX_IDEMPOTENCY_KEY characters,
# not blank.
MAX_IDEMPOTENCY_KEY = 200
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]*")


def checked_idempotency_key(value: str | None) -> str | None:
    """The Idempotency-Key header's value. One sent empty is refused rather than read as none: the
    client meant its retries to be safe, and they would each create a job. So is one holding a
    control character or a byte beyond ASCII: proxies and clients disagree on how to carry those
    (latin-1, UTF-8, dropped), so the same key could arrive spelt two ways and lose its retries."""
    if value is None:
        return None
    if not value.strip():
        why = "is empty"
    elif "," in value:
        # (API Gateway and HTTP servers join repeated headers with commas: two keys would read as one
        # made of both, and a retry sending either alone would create another job)
        why = "holds a comma (two Idempotency-Key headers arrive as one joined by commas)"
    elif not _IDEMPOTENCY_KEY.fullmatch(value):
        why = f"holds U+{ord(next(c for c in value if not _IDEMPOTENCY_KEY.fullmatch(c))):04X}"
    elif len(value) > MAX_IDEMPOTENCY_KEY:
        why = "is too long"
    else:
        return value
    raise InvalidRequest(
        f"{IDEMPOTENCY_KEY_FIELD}: Idempotency-Key {why}: send 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII "
        "characters (U+0020 to U+007E), or no header at all",
        field=IDEMPOTENCY_KEY_FIELD,
    )


# A PATCH's If-Match: the resource's ETag as read, its revision (a job's) or version (a task's).
IfMatch = Annotated[
    str | None,
    Header(
        alias="if-match",
        max_length=200,
        description="If-Match: the ETag as read (`\"3\"`: a job's `revision`, a task's `version`): the change "
        "is made only if it is still at that one, else 412, so that one client's read-modify-write does "
        "not undo another's change.",
    ),
]


def if_match_revision(value: str | None) -> int | None:
    """The revision an If-Match header names: a job's ETag as its answers give it (`"3"`), or None
    for no header or `*` (any revision: the job exists, which every change requires anyway)."""
    if value is None or value.strip() == "*":
        return None
    tag = value.strip()
    if (
        len(tag) <= 12
        and tag.startswith('"')
        and tag.endswith('"')
        and tag[1:-1].isdecimal()
        and tag.isascii()
    ):
        return int(tag[1:-1])
    raise InvalidRequest(
        f'{IF_MATCH_FIELD}: If-Match is not a job\'s ETag: send the ETag its answers give (`"3"`), one '
        "alone, or no header",
        field=IF_MATCH_FIELD,
    )


def instant_param(value: str | None, field: str) -> datetime | None:
    """A query parameter's RFC 3339 instant, before LATEST_INSTANT as every instant in a request
    (422 naming it otherwise)."""
    if value is None:
        return None
    try:
        return request_instant(value)
    except ValueError as exc:
        raise InvalidRequest(f"{field}: {exc}", field=field) from None


def repeated_idempotency_key(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """400 for a request with more than one Idempotency-Key header, as a REST API sends them (apart, in
    multiValueHeaders): the resolver would take the first and drop the others without a word."""
    for name, values in (event.get("multiValueHeaders") or {}).items():
        if name.lower() == "idempotency-key" and isinstance(values, list) and len(values) > 1:
            return error_event_response(
                400,
                f"{IDEMPOTENCY_KEY_FIELD}: send one Idempotency-Key header, not {len(values)}",
                IDEMPOTENCY_KEY_FIELD,
            )
    return None


_PATH_PARAM = re.compile(r"<(\w+)>")


def repeated_query_parameter(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """422 for a query parameter given twice (`?status=ACTIVE&status=PAUSED`), which the route would
    read as one odd value (an HTTP API joins them with commas) and refuse for its type, not for the
    repeat."""
    name = _repeated_query_parameter(event)
    if name is None:
        return None
    return error_event_response(422, f"{name}: give it once (it was given more than once)", name)


def _repeated_query_parameter(event: Mapping[str, Any]) -> str | None:
    raw = event.get("rawQueryString")
    if raw:  # (an HTTP API's: the parameters as sent)
        seen: set[str] = set()
        for part in str(raw).split("&"):
            name = unquote_plus(part.partition("=")[0])
            if part and name in seen:
                return name
            seen.add(name)
        return None
    for name, values in (event.get("multiValueQueryStringParameters") or {}).items():
        if isinstance(values, list) and len(values) > 1:  # (a REST API's)
            return str(name)
    return None


def refuse_unknown_query(app: Any, next_middleware: Any) -> Any:
    """422 for a query parameter the route does not take, naming it: a misspelt filter
    (`?stauts=PAUSED`) would otherwise be dropped, and the answer list every job as if unfiltered."""
    route = app.context.get("_route")
    given = app.current_event.query_string_parameters or {}
    if route is not None and given:
        taken = {param.alias for param in route.dependant.query_params}
        unknown = sorted(set(given) - taken)
        if unknown:
            takes = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
            path = _PATH_PARAM.sub(r"{\1}", route.path)  # (as docs/api.md writes it: /jobs/{job_id})
            raise InvalidRequest(
                f"{unknown[0]}: not a query parameter of {route.method} {path} ({takes})",
                field=unknown[0],
            )
    return next_middleware(app)
