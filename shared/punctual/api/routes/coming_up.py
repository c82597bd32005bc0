"""Route of /coming-up: the caller's scheduled runs in the coming hour, minute by minute."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from punctual import wiring
from punctual.api.errors import openapi_responses
from punctual.api.inputs import caller
from punctual.api.responses import json_response
from punctual.domain.models import Job, JobStatus
from punctual.jobs.coming_up import MAX_JOBS, MAX_PAGES, PAGE_SIZE, by_minute
from punctual.platform.timefmt import to_rfc3339

router = Router()


class ComingJob(BaseModel):
    id: str
    name: str
    count: int


class ComingMinute(BaseModel):
    at: str = Field(description="The minute's start, UTC.")
    count: int = Field(description="Runs due in the minute.")
    jobs: list[ComingJob] = Field(description="The busiest jobs of the minute (at most 10).")


class ComingUpOut(BaseModel):
    now: str
    minutes: list[ComingMinute] = Field(description="Every minute from the current one to an hour ahead.")
    jobs_read: int = Field(description="ACTIVE jobs counted (at most 500, the newest).")
    complete: bool = Field(description="false: the owner may have ACTIVE jobs that were not read.")


@router.get(
    "/coming-up",
    summary="Your scheduled runs in the coming hour, minute by minute",
    description="Computed from your ACTIVE jobs' schedules (at most 500, the newest, among at most "
    "5,000 of your jobs read; `complete` says whether that was all of them), as the jobs file their runs. "
    "Extra runs and retries are not counted.",
    responses=openapi_responses(200, ComingUpOut, "Every minute of the coming hour."),
)
def coming_up() -> Response[ComingUpOut]:
    punctual, owner = wiring.default(), caller(router.current_event)
    jobs: list[Job] = []
    start_key = None
    for _ in range(MAX_PAGES):
        page = punctual.store.jobs.page(owner, JobStatus.ACTIVE, PAGE_SIZE, start_key)
        jobs.extend(page.items)
        start_key = page.last_key
        if start_key is None or len(jobs) >= MAX_JOBS:
            break
    now = punctual.clock.now()
    minutes = [
        ComingMinute(
            at=to_rfc3339(minute.at),
            count=minute.count,
            jobs=[ComingJob(id=job_id, name=name, count=n) for job_id, name, n in minute.jobs],
        )
        for minute in by_minute(jobs[:MAX_JOBS], now)
    ]
    complete = start_key is None and len(jobs) <= MAX_JOBS
    return json_response(
        ComingUpOut(
            now=to_rfc3339(now), minutes=minutes, jobs_read=min(len(jobs), MAX_JOBS), complete=complete
        )
    )
