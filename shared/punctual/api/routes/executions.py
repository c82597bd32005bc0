"""Routes of a job's executions: list them, retry one."""

from __future__ import annotations

import json
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from punctual import wiring
from punctual.api.errors import openapi_responses
from punctual.api.inputs import PageLimit, caller, instant_param
from punctual.api.responses import answer_bytes, execution_out, json_response
from punctual.api.schemas import ExecutionOut, ExecutionPage
from punctual.domain.executions import ExecutionStatus

router = Router()


def _owner() -> str:
    return caller(router.current_event)


@router.get(
    "/jobs/<job_id>/executions",
    summary="A job's executions, newest first",
    responses=openapi_responses(200, ExecutionPage, "A page.", 400, 404),
)
def list_executions(
    job_id: str,
    status: Annotated[ExecutionStatus | None, Query(description="Only executions in this status.")] = None,
    since: Annotated[
        str | None,
        Query(max_length=64, description="Only executions scheduled at or after this instant (RFC 3339)."),
    ] = None,
    until: Annotated[
        str | None,
        Query(max_length=64, description="Only executions scheduled before this instant (RFC 3339)."),
    ] = None,
    limit: Annotated[PageLimit, Query()] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[ExecutionPage]:
    punctual, owner = wiring.default(), _owner()
    scope = f"executions:{job_id}"
    if status is not None or since is not None or until is not None:
        scope = json.dumps(["executions", job_id, status, since, until])
    start = punctual.cursors.decode(cursor, owner=owner, scope=scope)
    page = punctual.service.executions(
        owner,
        job_id,
        limit,
        start,
        status=status,
        since=instant_param(since, "since"),
        until=instant_param(until, "until"),
        size=lambda execution: answer_bytes(execution_out(execution)),
    )
    return json_response(
        ExecutionPage(
            items=[execution_out(e) for e in page.items],
            next_cursor=punctual.cursors.encode(page.last_key, owner=owner, scope=scope),
        )
    )


@router.post(
    "/jobs/<job_id>/executions/<execution_id>/retry",
    summary="Run a finished execution that did not succeed once more, now",
    description="A new extra execution of the job's current task (with a new id, which receivers see as "
    "X-Punctual-Execution-Id), naming the one it retries in `retry_of`. For a FAILED, SKIPPED or "
    "CANCELLED execution; 409 for one still under way or SUCCEEDED, and on a PAUSED or CANCELLED job.",
    responses=openapi_responses(202, ExecutionOut, "The new execution, queued.", 404, 409),
)
def retry_execution(job_id: str, execution_id: str) -> Response[ExecutionOut]:
    return json_response(execution_out(wiring.default().service.retry(_owner(), job_id, execution_id)), 202)
