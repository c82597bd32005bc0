"""Routes of /tasks: the built-in task types, and the caller's named tasks."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from punctual import tasks, wiring
from punctual.api.errors import openapi_responses
from punctual.api.inputs import IfMatch, PageLimit, caller, if_match_revision, tag_filter
from punctual.api.responses import answer_bytes, json_response, task_out
from punctual.api.schemas import TaskIn, TaskOut, TaskPatch, TaskTypeOut, TaskTypesOut
from punctual.domain.named_tasks import NamedTask
from punctual.jobs.named_tasks import IN_USE_COUNT_LIMIT, TaskChanges

router = Router()


def _owner() -> str:
    return caller(router.current_event)


@router.get(
    "/tasks",
    summary="The built-in task types, and a page of your named tasks",
    responses=openapi_responses(200, TaskTypesOut, "Types and your tasks.", 400),
)
def list_task_types(
    limit: Annotated[PageLimit, Query()] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
    tag: Annotated[
        str | None, Query(max_length=400, description="Only tasks with this tag: key:value, or key.")
    ] = None,
) -> Response[TaskTypesOut]:
    punctual, owner = wiring.default(), _owner()
    types = [
        TaskTypeOut(type=t.name, description=t.description, params=t.params_model.model_json_schema())
        for t in tasks.all_types()
    ]
    scope = "tasks" + (f":tag:{tag}" if tag is not None else "")
    page = punctual.tasks.list(
        owner,
        limit,
        punctual.cursors.decode(cursor, owner=owner, scope=scope),
        tag_filter(tag),
        size=lambda task: answer_bytes(task_out(task)),
    )
    return json_response(
        TaskTypesOut(
            types=types,
            items=[task_out(t) for t in page.items],
            next_cursor=punctual.cursors.encode(page.last_key, owner=owner, scope=scope),
        )
    )


@router.post(
    "/tasks",
    summary="Define a named task",
    description="A task type, its default parameters, a JSON Schema of what jobs supply, and optionally a "
    "retry policy and a timeout that its jobs take unless they give their own. 409 if you have a task of "
    "that name.",
    responses=openapi_responses(201, TaskOut, "The task, version 1.", 409),
)
def create_task(body: Annotated[TaskIn, Body()]) -> Response[TaskOut]:
    task = wiring.default().tasks.create(
        _owner(),
        name=body.name,
        type=body.type,
        params=body.params,
        params_schema=body.params_schema,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        description=body.description,
        tags=body.tags,
    )
    return json_response(task_out(task), 201, headers=_etag(task))


@router.get(
    "/tasks/<name>", summary="Get a named task", responses=openapi_responses(200, TaskOut, "The task.", 404)
)
def get_task(name: str) -> Response[TaskOut]:
    task = wiring.default().tasks.get(_owner(), name)
    return json_response(task_out(task), headers=_etag(task))


def _etag(task: NamedTask) -> dict[str, str]:
    return {"ETag": f'"{task.version}"'}


@router.patch(
    "/tasks/<name>",
    summary="Change a named task (its next version): every job using it runs the change from its next execution",
    description="Fields given replace the task's (null removes params_schema, retry, timeout_seconds); its "
    "version goes up by one. Jobs' params are not checked again against a new params_schema: a job whose "
    "params no longer fit fails its next execution, saying why.",
    responses=openapi_responses(200, TaskOut, "The task.", 400, 404, 409, 412),
)
def update_task(
    name: str,
    body: Annotated[TaskPatch, Body()],
    if_match: IfMatch = None,
) -> Response[TaskOut]:
    changes = TaskChanges(
        if_version=if_match_revision(if_match),
        given=frozenset(body.model_fields_set),
        type=body.type,
        params=body.params,
        params_schema=body.params_schema,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        description=body.description,
        tags=body.tags,
    )
    task = wiring.default().tasks.update(_owner(), name, changes)
    return json_response(task_out(task), headers=_etag(task))


@router.delete(
    "/tasks/<name>",
    summary="Delete a named task that no ACTIVE or PAUSED job uses",
    description=f"409 if jobs use it, with their count (counted up to {IN_USE_COUNT_LIMIT:,}): "
    "GET /jobs?task={name} lists them.",
    responses=openapi_responses(200, TaskOut, "The deleted task.", 404, 409),
)
def delete_task(name: str) -> Response[TaskOut]:
    return json_response(task_out(wiring.default().tasks.delete(_owner(), name)))
