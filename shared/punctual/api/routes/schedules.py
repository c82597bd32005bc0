"""Route of /schedules/preview: a schedule's next run times, creating nothing."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from punctual import wiring
from punctual.api.errors import openapi_responses
from punctual.api.inputs import caller
from punctual.api.responses import json_response
from punctual.api.schemas import PreviewIn, PreviewOut, PreviewRun
from punctual.domain.errors import InvalidRequest
from punctual.domain.schedules import local_note
from punctual.jobs.checks import NO_RUN_TO_COME
from punctual.platform.timefmt import to_rfc3339

router = Router()


def _owner() -> str:
    return caller(router.current_event)


@router.post(
    "/schedules/preview",
    summary="The next run times of a schedule, without creating anything",
    responses=openapi_responses(200, PreviewOut, "Run times, UTC and on the schedule's wall clock."),
)
def preview_schedule(body: Annotated[PreviewIn, Body()]) -> Response[PreviewOut]:
    _owner()
    runs = wiring.default().service.preview(body.schedule, body.count)
    if not runs:  # (as POST /jobs refuses it: a preview answers what creating the job would)
        raise InvalidRequest(NO_RUN_TO_COME, field="schedule")
    shown = []
    for run in runs:
        local, dst = local_note(body.schedule, run)
        # (to the second, as a cron run falls; to the millisecond where the run has a fraction)
        timespec = "milliseconds" if local.microsecond else "seconds"
        shown.append(PreviewRun(at=to_rfc3339(run), local=local.isoformat(timespec=timespec), dst=dst))
    return json_response(PreviewOut(next_runs=[to_rfc3339(r) for r in runs], runs=shown))
