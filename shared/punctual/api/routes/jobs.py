"""Routes of /jobs: create (one or a batch), list, get, change, cancel, pause and resume (one, or
by tag a page at a time), run now."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from pydantic import Field

from punctual import wiring
from punctual.api.errors import TooLarge, openapi_responses
from punctual.api.inputs import (
    IfMatch,
    PageLimit,
    caller,
    checked_idempotency_key,
    if_match_revision,
    new_job,
    tag_filter,
)
from punctual.api.responses import ANSWER_MAX_BYTES, answer_bytes, execution_out, job_out, json_response
from punctual.api.schemas import (
    BulkFailure,
    BulkOut,
    ExecutionOut,
    JobBatchIn,
    JobBatchOut,
    JobIn,
    JobOut,
    JobPage,
    JobPatch,
    OutcomeFilter,
    PauseIn,
)
from punctual.domain.executions import ExecutionStatus
from punctual.domain.models import Job, JobStatus
from punctual.domain.validation import PLAIN_TEXT
from punctual.jobs.changes import UNCHANGED, JobChanges
from punctual.jobs.service import BulkChange
from punctual.ports.pages import LIST_READ_BUDGET
from punctual.wiring import Punctual

router = Router()


def _owner() -> str:
    return caller(router.current_event)


def _job(punctual: Punctual, job: Job) -> Response[JobOut]:
    # The time is read after the change: the next run shown is the one due from then on.
    return json_response(job_out(job, punctual.clock.now()), headers={"ETag": f'"{job.revision}"'})


@router.post("/jobs", summary="Create a job", responses=openapi_responses(201, JobOut, "The job.", 400, 409))
def create_job(
    body: Annotated[JobIn, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="idempotency-key",
            max_length=200,
            description="Idempotency-Key: a retry with the same key and body returns the same job; "
            "the same key with another body answers 409. 1 to 200 characters: an empty key is refused (400).",
        ),
    ] = None,
) -> Response[JobOut]:
    key = checked_idempotency_key(idempotency_key)
    punctual = wiring.default()
    job, _created = punctual.service.create(_owner(), new_job(body), key)
    return json_response(job_out(job, punctual.clock.now()), 201, headers={"ETag": f'"{job.revision}"'})


@router.post(
    "/jobs/batch",
    summary="Create 1 to 100 jobs in one request",
    description="Each job as for POST /jobs. All are validated before any is created: an invalid job "
    "answers 422 naming `jobs[i].<field>` and nothing is created. Answers the jobs in request order. "
    "On 503 some jobs may have been created: retry with the same Idempotency-Key.",
    responses=openapi_responses(201, JobBatchOut, "The jobs, in request order.", 400, 409, 503),
)
def create_jobs(
    body: Annotated[JobBatchIn, Body()],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="idempotency-key",
            max_length=200,
            description="Idempotency-Key: a retry with the same key and the same batch returns the same "
            "jobs (creating those a failed attempt left out); the same key with another body answers 409. "
            "1 to 200 characters: an empty key is refused (400).",
        ),
    ] = None,
) -> Response[JobBatchOut]:
    news = [new_job(job) for job in body.jobs]
    punctual = wiring.default()
    shown: list[JobOut] = []

    def answerable(jobs: Sequence[Job]) -> None:
        # (before anything is stored: escaped, the answer may take several times the body's bytes)
        now = punctual.clock.now()
        shown[:] = [job_out(job, now) for job in jobs]
        size = sum(answer_bytes(job) for job in shown)
        if size > ANSWER_MAX_BYTES:
            raise TooLarge(
                f"jobs: the answer would take {size:,} bytes, more than the {ANSWER_MAX_BYTES:,} one "
                "answer may take: send the jobs in smaller batches",
                field="jobs",
            )

    key = checked_idempotency_key(idempotency_key)
    jobs, created = punctual.service.create_many(_owner(), news, key, answerable)
    if not created:  # (a repeat: the jobs as stored, their last executions too)
        now = punctual.clock.now()
        shown = [job_out(job, now) for job in jobs]
    return json_response(JobBatchOut(items=shown), 201)


@router.get(
    "/jobs",
    summary="List the caller's jobs, newest first",
    description="Newest first; by name (then oldest first) with `name_prefix`, grouped by value with "
    "`tag=key` alone. One filter (`status`, `outcome`, `name_prefix` or `tag`) reads only the jobs it "
    f"lists. With several (all must match), one request reads at most {LIST_READ_BUDGET} jobs: the "
    "page may be short, even empty, with a `next_cursor` to continue from. Only a null `next_cursor` "
    "means the end. A page costs a few reads however many jobs it shows: each job's `last_execution` "
    "is the one its `outcome` names.",
    responses=openapi_responses(200, JobPage, "A page.", 400),
)
def list_jobs(
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    outcome: Annotated[
        OutcomeFilter | None,
        Query(description="Only jobs whose latest execution to run to its end SUCCEEDED (or FAILED)."),
    ] = None,
    name_prefix: Annotated[
        str | None,
        Query(description="Only jobs whose name starts so."),
        Field(min_length=1, max_length=200),
        PLAIN_TEXT,
    ] = None,
    limit: Annotated[PageLimit, Query()] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
    tag: Annotated[
        str | None,
        Query(max_length=400, description="Only jobs with this tag: key:value, or key (any value)."),
    ] = None,
    task: Annotated[
        str | None,
        Query(max_length=64, description="Only the ACTIVE and PAUSED jobs using this named task (alone)."),
    ] = None,
) -> Response[JobPage]:
    punctual, owner = wiring.default(), _owner()
    wanted = tag_filter(tag)
    if task is not None:
        scope = f"jobs:task:{task}"
    elif outcome is None and name_prefix is None:  # (its short scope: cursors given out stay valid)
        scope = f"jobs:{status.value if status else ''}" + (f":tag:{tag}" if tag is not None else "")
    else:
        scope = json.dumps(["jobs", status, outcome, name_prefix, tag])
    now = punctual.clock.now()
    page = punctual.service.list_jobs(
        owner,
        status,
        limit,
        punctual.cursors.decode(cursor, owner=owner, scope=scope),
        tag=wanted,
        task=task,
        outcome=None if outcome is None else ExecutionStatus(outcome.value.upper()),
        name_prefix=name_prefix,
        size=lambda job: answer_bytes(job_out(job, now)),
    )
    return json_response(
        JobPage(
            items=[job_out(job, now) for job in page.items],
            next_cursor=punctual.cursors.encode(page.last_key, owner=owner, scope=scope),
        )
    )


@router.get("/jobs/<job_id>", summary="Get a job", responses=openapi_responses(200, JobOut, "The job.", 404))
def get_job(job_id: str) -> Response[JobOut]:
    punctual = wiring.default()
    return _job(punctual, punctual.service.get(_owner(), job_id))


@router.patch(
    "/jobs/<job_id>",
    summary="Change a job (rename, new task, reschedule, retry policy, timeout)",
    responses=openapi_responses(200, JobOut, "The job.", 400, 404, 409, 412),
)
def update_job(
    job_id: str,
    body: Annotated[JobPatch, Body()],
    if_match: IfMatch = None,
) -> Response[JobOut]:
    changes = JobChanges(
        if_revision=if_match_revision(if_match),
        name=body.name,
        task=body.task,
        params=body.params,
        tags=body.tags,
        schedule=body.schedule,
        retry=body.retry if "retry" in body.model_fields_set else UNCHANGED,
        timeout_seconds=body.timeout_seconds if "timeout_seconds" in body.model_fields_set else UNCHANGED,
        policy=body.policy,
        notify=None if body.notify is None else tuple(body.notify),
        signing_secret=body.signing_secret if "signing_secret" in body.model_fields_set else UNCHANGED,
    )
    punctual = wiring.default()
    return _job(punctual, punctual.service.update(_owner(), job_id, changes))


@router.delete(
    "/jobs/<job_id>",
    summary="Cancel a job: no execution of it that has not started will run",
    description="A job that changes while this request runs (its run ending, say) is read again and "
    "cancelled; 409 only if it kept changing through three attempts: retry.",
    responses=openapi_responses(200, JobOut, "The cancelled job.", 404, 409),
)
def cancel_job(job_id: str) -> Response[JobOut]:
    punctual = wiring.default()
    return _job(punctual, punctual.service.cancel(_owner(), job_id))


def _bulk(action: str, tag: str, limit: int, cursor: str | None) -> Response[BulkOut]:
    punctual, owner = wiring.default(), _owner()
    wanted = tag_filter(tag)
    assert wanted is not None
    scope = f"bulk:{action}:{tag}"
    start = punctual.cursors.decode(cursor, owner=owner, scope=scope)
    service = punctual.service
    now = punctual.clock.now()
    # (each job's answer as read, a pause or resume changing little of its size)
    done: BulkChange = (service.pause_tagged if action == "pause" else service.resume_tagged)(
        owner, wanted, limit, start, size=lambda job: answer_bytes(job_out(job, now))
    )
    return json_response(
        BulkOut(
            changed=[job_out(job, now) for job in done.changed],
            failed=[BulkFailure(id=job_id, message=why) for job_id, why in done.failed],
            next_cursor=punctual.cursors.encode(done.last_key, owner=owner, scope=scope),
        )
    )


_BULK_TAG = Query(max_length=400, description="The jobs' tag: key:value, or key (any value).")
_BULK_LIMIT = Query(description="At most this many jobs changed by this request.")


@router.post(
    "/jobs/pause",
    summary="Pause the ACTIVE jobs with a tag, a page at a time",
    description="Each job is paused as POST /jobs/{id}/pause would. One request changes at most `limit` "
    f"jobs and reads at most {LIST_READ_BUDGET}: call again with `next_cursor` until it is null.",
    responses=openapi_responses(200, BulkOut, "What changed.", 400),
)
def pause_jobs(
    tag: Annotated[str, _BULK_TAG],
    limit: Annotated[PageLimit, _BULK_LIMIT] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[BulkOut]:
    return _bulk("pause", tag, limit, cursor)


@router.post(
    "/jobs/resume",
    summary="Resume the PAUSED jobs with a tag, a page at a time",
    description="Each job is resumed as POST /jobs/{id}/resume would (missed runs are not made up). "
    f"One request changes at most `limit` jobs and reads at most {LIST_READ_BUDGET}: call again with "
    "`next_cursor` until it is null.",
    responses=openapi_responses(200, BulkOut, "What changed.", 400),
)
def resume_jobs(
    tag: Annotated[str, _BULK_TAG],
    limit: Annotated[PageLimit, _BULK_LIMIT] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[BulkOut]:
    return _bulk("resume", tag, limit, cursor)


@router.post(
    "/jobs/<job_id>/pause",
    summary="Pause a job, with a note saying why",
    description='The body is optional: `{"note": "..."}` is shown on the job (`pause_note`) until it is '
    "resumed. Pausing a PAUSED job again changes its note.",
    responses=openapi_responses(200, JobOut, "The job.", 404, 409),
)
def pause_job(job_id: str, body: Annotated[PauseIn | None, Body()] = None) -> Response[JobOut]:
    note = None if body is None else body.note
    punctual = wiring.default()
    return _job(punctual, punctual.service.pause(_owner(), job_id, note))


@router.post(
    "/jobs/<job_id>/resume",
    summary="Resume a job; occurrences missed while paused are not run",
    responses=openapi_responses(200, JobOut, "The job.", 404, 409),
)
def resume_job(job_id: str) -> Response[JobOut]:
    punctual = wiring.default()
    return _job(punctual, punctual.service.resume(_owner(), job_id))


@router.post(
    "/jobs/<job_id>/run",
    summary="One extra execution now",
    responses=openapi_responses(202, ExecutionOut, "The execution, queued.", 404, 409),
)
def run_job(job_id: str) -> Response[ExecutionOut]:
    return json_response(execution_out(wiring.default().service.run_now(_owner(), job_id)), 202)
