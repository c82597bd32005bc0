"""Named tasks: reusable work an owner defines once (`POST /tasks`) and jobs name with their own
parameters (`{"task": "send-email", "params": {...}}`).

A named task is a task type, default parameters for it, a JSON Schema of what a job supplies
(`params_schema`), and optionally a retry policy and a timeout. A job's parameters are checked
against the schema when the job is created or changed, and merged over the task's defaults when it
runs (objects merged key by key, anything else replaced), so that a change to the task applies to
the next executions of every job that uses it; each execution records the version it ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from punctual import tasks
from punctual.domain.errors import Conflict, InvalidRequest, LostRace, NotFound, PreconditionFailed
from punctual.domain.models import TaskRef, TaskSpec
from punctual.domain.named_tasks import NamedTask
from punctual.domain.policies import RetryPolicy
from punctual.domain.validation import has_tag, json_problem
from punctual.jobs import paramschema
from punctual.platform.clock import Clock
from punctual.ports.jobs import TaskStore
from punctual.ports.pages import LIST_READ_BUDGET, PAGE_BYTES, Page, PageFill
from punctual.tasks import templating

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# DELETE /tasks/{name} counts the jobs that keep a task in use up to this many (one Query).
IN_USE_COUNT_LIMIT = 1000


@dataclass(frozen=True)
class TaskChanges:
    """A PATCH of a named task: only the fields in `given` change (None there clears the field)."""

    given: frozenset[str]
    type: str | None = None
    params: dict[str, Any] | None = None
    params_schema: Any = None
    retry: RetryPolicy | None = None
    timeout_seconds: int | None = None
    description: str | None = None
    tags: dict[str, str] | None = None
    # Made only if the task is still at this version (If-Match: the one its caller read).
    if_version: int | None = None


def check_name(name: str, field: str = "name") -> str:
    if not NAME.fullmatch(name):
        raise InvalidRequest(
            f"{field}: a task name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
            field=field,
        )
    if name.lower() in tasks.type_names():
        raise InvalidRequest(f"{field}: {name!r} is a built-in task type's name", field=field)
    return name


def merge(defaults: Any, given: Any) -> Any:
    """A job's parameters over its task's defaults: objects key by key, anything else replaced."""
    if isinstance(defaults, dict) and isinstance(given, dict):
        merged = dict(defaults)
        for key, value in given.items():
            merged[key] = merge(defaults[key], value) if key in defaults else value
        return merged
    return given


def compiled_schema(task: NamedTask) -> paramschema.CompiledSchema | None:
    if task.params_schema is None:
        return None
    return paramschema.compile_schema(task.params_schema)


class TaskService:
    """The owner's named tasks: define, read, change, delete; and checking a job's reference to one."""

    def __init__(self, store: TaskStore, clock: Clock, policy: tasks.TaskPolicy) -> None:
        self._store = store
        self._clock = clock
        self._policy = policy

    # --------------------------------------------------------------- define
    def create(
        self,
        owner: str,
        *,
        name: str,
        type: str,
        params: dict[str, Any],
        params_schema: Any = None,
        retry: RetryPolicy | None = None,
        timeout_seconds: int | None = None,
        description: str = "",
        tags: dict[str, str] | None = None,
    ) -> NamedTask:
        now = self._clock.now()
        task = NamedTask(
            owner=owner,
            name=check_name(name),
            type=type,
            params=params,
            params_schema=params_schema,
            retry=retry,
            timeout_seconds=timeout_seconds,
            description=description,
            tags=dict(tags or {}),
            created_at=now,
            updated_at=now,
        )
        self._check(task)
        try:
            self._store.put_new(task)
        except LostRace:
            raise Conflict(f"a task named {name!r} exists: change it with PATCH /tasks/{name}") from None
        return task

    def _check(self, task: NamedTask) -> None:
        """Refuse (InvalidRequest naming the field) a definition no job could run."""
        if task.type not in tasks.type_names():
            known = ", ".join(sorted(tasks.type_names()))
            raise InvalidRequest(f"type: unknown task type {task.type!r}; known: {known}", field="type")
        problem = json_problem(task.params, tasks.MAX_PARAMS_DEPTH)
        if problem is not None:
            raise InvalidRequest(f"params: {problem}", field="params")
        try:
            templating.check(task.params)
        except templating.TemplateError as exc:
            field = f"params.{exc.path}" if exc.path else "params"
            raise InvalidRequest(f"{field}: {exc.message}", field=field) from None
        tasks.check_defaults(task.type, task.params, self._policy, "params")
        try:
            compiled_schema(task)
        except paramschema.SchemaError as exc:
            field = f"params_schema.{exc.where}" if exc.where else "params_schema"
            raise InvalidRequest(f"{field}: {exc.message}", field=field) from None
        size = len(json.dumps([task.params, task.params_schema]).encode())
        if size > tasks.MAX_TASK_BYTES:
            raise InvalidRequest(f"params: {size:,} bytes; at most {tasks.MAX_TASK_BYTES:,}", field="params")

    # ----------------------------------------------------------------- read
    def get(self, owner: str, name: str) -> NamedTask:
        task = self._store.get(owner, name) if NAME.fullmatch(name) else None
        if task is None:
            raise NotFound(f"task {name!r} not found")
        return task

    def list(
        self,
        owner: str,
        limit: int,
        start_key: dict[str, Any] | None,
        tag: tuple[str, str | None] | None,
        size: Callable[[NamedTask], int] | None = None,
    ) -> Page:
        """A page of the owner's tasks by name; with a tag, filtered, reading at most LIST_READ_BUDGET.
        With `size` (a task's bytes in the answer), the page ends early once it holds PAGE_BYTES."""
        fill = PageFill(limit, size, PAGE_BYTES)
        if tag is None:
            page = self._store.page(owner, limit, start_key)
            for i, task in enumerate(page.items[:-1]):
                if fill.full_with(task):
                    return Page(page.items[: i + 1], self._store.key_after(task))
            return page
        found: list[NamedTask] = []
        read = 0
        while True:
            page = self._store.page(owner, min(100, LIST_READ_BUDGET - read), start_key)
            read += len(page.items)
            for task in page.items:
                if has_tag(task.tags, tag):
                    found.append(task)
                    if fill.full_with(task):
                        return Page(
                            found,
                            self._store.key_after(task)
                            if task is not page.items[-1] or page.last_key
                            else None,
                        )
            start_key = page.last_key
            if start_key is None or read >= LIST_READ_BUDGET:
                return Page(found, start_key)

    def jobs_using(self, owner: str, name: str, limit: int, start_key: dict[str, Any] | None) -> Page:
        """Ids of the ACTIVE and PAUSED jobs that use the owner's task, newest first."""
        check_name(name, field="task")
        return self._store.job_ids_using(owner, name, limit, start_key)

    # --------------------------------------------------------------- change
    def update(self, owner: str, name: str, changes: TaskChanges) -> NamedTask:
        task = self.get(owner, name)
        _still_at(task, changes.if_version)
        if not changes.given:
            return task  # (an empty PATCH: no new version)
        fields: dict[str, Any] = {}
        for field_name in (
            "type",
            "params",
            "params_schema",
            "retry",
            "timeout_seconds",
            "description",
            "tags",
        ):
            if field_name in changes.given:
                value = getattr(changes, field_name)
                if value is None and field_name in ("type", "params"):
                    raise InvalidRequest(f"{field_name}: cannot be null", field=field_name)
                fields[field_name] = value
        fields["description"] = fields.get("description", task.description) or ""
        fields["tags"] = dict(fields.get("tags", task.tags) or {})
        changed = replace(task, **fields, updated_at=self._clock.now())
        self._check(changed)
        try:
            return self._store.replace(changed, task.version)
        except LostRace:
            if changes.if_version is not None:
                raise PreconditionFailed(
                    f"the task changed from version {changes.if_version} while this request ran; read it "
                    "again and apply the change to that"
                ) from None
            raise Conflict(
                "the task changed (or was deleted) while this request ran; read it again and retry"
            ) from None

    def delete(self, owner: str, name: str) -> NamedTask:
        """Delete a task no ACTIVE or PAUSED job uses (Conflict, saying how many and how to list them)."""
        task = self.get(owner, name)
        using = self._store.count_jobs_using(owner, name, IN_USE_COUNT_LIMIT)
        if using:
            count = f"{using:,} or more" if using >= IN_USE_COUNT_LIMIT else f"{using:,}"
            raise Conflict(
                f"task {name!r} is used by {count} active or paused job(s): list them with "
                f"`punctual jobs list --task {name}` (GET /jobs?task={name}), and cancel them or change their "
                "task first"
            )
        try:
            self._store.delete(task)
        except LostRace:
            raise Conflict("the task changed while this request ran; read it again and retry") from None
        return task

    # ---------------------------------------------------------------- jobs
    @staticmethod
    def check_ref_name(ref: TaskRef) -> None:
        if not NAME.fullmatch(ref.name):
            raise InvalidRequest(f"task: {ref.name!r} is not a task name", field="task")

    def check_job_task(
        self,
        owner: str,
        ref: TaskRef,
        *,
        seen: dict[str, tuple[NamedTask, paramschema.CompiledSchema | None]] | None = None,
    ) -> TaskRef:
        """A job's reference to a named task, checked: the task exists (the owner's), the job's
        parameters fit its schema (InvalidRequest naming `params.<path>`), and merged over its
        defaults they make parameters its type can run. `seen` caches tasks read within a request."""
        self.check_ref_name(ref)
        cache = seen if seen is not None else {}
        if ref.name not in cache:
            found = self._store.get(owner, ref.name)
            if found is None:
                raise InvalidRequest(
                    f"task: unknown task {ref.name!r}: define it with POST /tasks (GET /tasks lists yours)",
                    field="task",
                )
            try:
                schema = compiled_schema(found)
            except paramschema.SchemaError as exc:
                schema = paramschema.refused(exc)  # (accepted when defined: a limit tightened since)
            cache[ref.name] = (found, schema)
        task, schema = cache[ref.name]
        check_params(task, schema, ref.params, self._policy)
        return ref


def check_params(
    task: NamedTask,
    schema: paramschema.CompiledSchema | None,
    params: dict[str, Any],
    policy: tasks.TaskPolicy,
) -> dict[str, Any]:
    """Refuse (InvalidRequest naming `params.<path>`) a job's parameters for this task; returns the
    parameters merged over the task's defaults."""
    problem = json_problem(params, tasks.MAX_PARAMS_DEPTH)
    if problem is not None:
        raise InvalidRequest(f"params: {problem}", field="params")
    if schema is not None:
        invalid = schema.first_error(params)
        if invalid is not None:
            field = f"params.{invalid.path}" if invalid.path else "params"
            raise InvalidRequest(
                f"{field}: {invalid.message} (task {task.name}'s params_schema, version {task.version})",
                field=field,
            )
    merged = merge(task.params, params)
    tasks.validate(TaskSpec(type=task.type, params=merged), policy, field_prefix="params")
    return dict(merged)


def _still_at(task: NamedTask, version: int | None) -> None:
    """PreconditionFailed if a change made on condition of `version` finds the task at another."""
    if version is not None and task.version != version:
        raise PreconditionFailed(
            f"the task is at version {task.version}, not {version}: it changed since it was read; read "
            "it again and apply the change to that"
        )
