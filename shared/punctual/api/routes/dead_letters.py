"""Routes of /dead-letters: list the caller's dead-lettered executions, redrive them."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from punctual import wiring
from punctual.api.errors import openapi_responses
from punctual.api.inputs import PageLimit, caller
from punctual.api.responses import json_response
from punctual.api.schemas import DeadLetterOut, DeadLetterPage, RedriveIn, RedriveItem, RedriveOut
from punctual.platform.timefmt import to_rfc3339

router = Router()


def _owner() -> str:
    return caller(router.current_event)


@router.get(
    "/dead-letters",
    summary="Your executions that were dead-lettered, to redrive",
    description="An execution whose message exhausted its deliveries ends FAILED (`dead_lettered`) and is "
    "listed here until it is redriven or its history expires.",
    responses=openapi_responses(200, DeadLetterPage, "A page.", 400),
)
def list_dead_letters(
    limit: Annotated[PageLimit, Query()] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[DeadLetterPage]:
    punctual, owner = wiring.default(), _owner()
    start = punctual.cursors.decode(cursor, owner=owner, scope="dead-letters")
    page = punctual.dead_letters.page(owner, limit, start)
    jobs = punctual.store.jobs.get_many({letter.job_id for letter in page.items}).readable()
    items = [
        DeadLetterOut(
            execution_id=letter.execution_id,
            job_id=letter.job_id,
            job_name=jobs[letter.job_id].name if letter.job_id in jobs else None,
            scheduled_at=to_rfc3339(letter.scheduled_at),
            dead_lettered_at=to_rfc3339(letter.dead_lettered_at),
            error=letter.error,
        )
        for letter in page.items
    ]
    next_cursor = punctual.cursors.encode(page.last_key, owner=owner, scope="dead-letters")
    return json_response(DeadLetterPage(items=items, next_cursor=next_cursor))


@router.post(
    "/dead-letters/redrive",
    summary="Run dead-lettered executions again",
    description="Each is put back to QUEUED and its message sent again: the same execution (the same "
    "X-Punctual-Execution-Id), its attempts so far counted. Answers what became of each, in order.",
    responses=openapi_responses(200, RedriveOut, "What became of each."),
)
def redrive_dead_letters(body: Annotated[RedriveIn, Body()]) -> Response[RedriveOut]:
    results = wiring.default().dead_letters.redrive(_owner(), list(dict.fromkeys(body.execution_ids)))
    return json_response(
        RedriveOut(items=[RedriveItem(execution_id=r.execution_id, result=r.result) for r in results])
    )
