"""A job's named task as it runs now: the worker's view of task definitions, read once per task and
kept a short while, and of whether a job's parameters still fit its task's version.

A task's change reaches the next executions of every job that uses it (named_tasks.py says how
parameters are merged); a task deleted, or parameters that no longer fit, end the execution with
the reason rather than run something the owner did not ask for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from punctual.domain.models import DEFAULT_TIMEOUT_SECONDS, UNRESOLVED_TASK, Job, TaskRef, TaskSpec
from punctual.domain.named_tasks import NamedTask
from punctual.domain.policies import RetryPolicy
from punctual.jobs import paramschema
from punctual.jobs.named_tasks import compiled_schema, merge
from punctual.platform.clock import Clock
from punctual.ports.jobs import TaskStore

# The worker keeps a task's definition this long before reading it again: an execution that starts
# later than this after a change runs the new version.
DEFINITION_TTL_SECONDS = 10.0
# The worker remembers this many verdicts of a job's params against a task version (the most
# recent), so that a job's executions do not check them again.
VERDICTS_KEPT = 10_000


@dataclass(frozen=True)
class _Cached:
    task: NamedTask | None
    schema: paramschema.CompiledSchema | None
    read_at: datetime


class TaskResolver:
    """The worker's view of named tasks: a job's task as it runs now, from definitions kept
    DEFINITION_TTL_SECONDS (so that executions cost no read of their task, but one per task and
    container that often), their schemas compiled once per version.

    A copy serves an execution whose instant has come only if it was read at or after that instant
    (consistently): a change acknowledged before an execution's instant is what it runs. Executions
    sharing an instant share that read (one per task and instant in a container), and so do those of
    earlier instants starting after it."""

    def __init__(
        self, store: TaskStore, clock: Clock, *, ttl_seconds: float = DEFINITION_TTL_SECONDS
    ) -> None:
        self._store = store
        self._ttl = timedelta(seconds=ttl_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], _Cached] = {}
        self._reading: dict[tuple[str, str], threading.Lock] = {}
        self._verdicts: OrderedDict[_VerdictKey, paramschema.Invalid | None] = OrderedDict()

    def definition(
        self, owner: str, name: str, at: datetime | None = None
    ) -> tuple[NamedTask | None, paramschema.CompiledSchema | None]:
        """The task's definition for an execution due at `at` (None: for no instant in particular)."""
        key = (owner, name)
        fresh = self._fresh(key, at)
        if fresh is not None:
            return fresh.task, fresh.schema
        # One read per task at a time: a batch's records run side by side, and all of them would
        # otherwise read the task at once when its copy runs out.
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            fresh = self._fresh(key, at)
            if fresh is not None:
                return fresh.task, fresh.schema
            with self._lock:
                cached = self._cache.get(key)
            # (consistent, and dated from before it is made: it sees every change acknowledged by then)
            began = self._clock.now()
            task = self._store.get(owner, name, consistent=True)
            before = None if cached is None else cached.task
            unchanged = before is not None and task is not None and before.version == task.version
            schema = cached.schema if cached is not None and unchanged else None
            if task is not None and schema is None and task.params_schema is not None:
                try:
                    schema = compiled_schema(task)
                except paramschema.SchemaError as exc:
                    # Accepted when defined, refused now (a limit tightened since): its jobs fail,
                    # saying why, rather than run unchecked.
                    schema = paramschema.refused(exc)
            with self._lock:
                self._cache[key] = _Cached(task, schema, began)
            return task, schema

    def _fresh(self, key: tuple[str, str], at: datetime | None) -> _Cached | None:
        """The copy kept, if it may serve: read within the TTL, and at or after `at` once it has come."""
        now = self._clock.now()
        with self._lock:
            cached = self._cache.get(key)
        if cached is None or not timedelta(0) <= now - cached.read_at < self._ttl:
            return None
        if at is not None and at <= now and cached.read_at < at:
            return None
        return cached

    def effective(self, job: Job | None, at: datetime | None = None) -> Job | None:
        """The job as it runs now: a named task resolved into the spec to run (its defaults merged
        with the job's parameters), with the task's retry and timeout unless the job gave its own.
        A task that is gone, or whose schema the job's parameters no longer fit, resolves to a spec
        that fails at once, saying why. `at`: the instant of the execution it is resolved for (once
        that has come, from a copy read at or after it)."""
        if job is None or not isinstance(job.task, TaskRef):
            return job
        ref = job.task
        task, schema = self.definition(job.owner, ref.name, at)
        if task is None:
            return replace(job, task=_unresolved(f"task {ref.name!r} no longer exists (it was deleted)"))
        retry = (task.retry or RetryPolicy()) if "retry" in job.inherits else job.retry
        timeout = (
            (task.timeout_seconds or DEFAULT_TIMEOUT_SECONDS)
            if "timeout_seconds" in job.inherits
            else job.timeout_seconds
        )
        resolved = replace(job, retry=retry, timeout_seconds=timeout, task_version=task.version)
        invalid = None if schema is None else self._verdict(job, task, schema)
        if invalid is not None:
            where = f"params.{invalid.path}" if invalid.path else "params"
            message = f"{where}: {invalid.message} (task {task.name} version {task.version}'s params_schema)"
            return replace(resolved, task=_unresolved(message))
        return replace(resolved, task=TaskSpec(type=task.type, params=merge(task.params, ref.params)))

    def _verdict(
        self, job: Job, task: NamedTask, schema: paramschema.CompiledSchema
    ) -> paramschema.Invalid | None:
        """The job's params against the task's schema, checked once per job and task version and
        remembered (the most recent VERDICTS_KEPT): a job's executions do not check them again."""
        assert isinstance(job.task, TaskRef)
        key = (job.owner, job.id, job.updated_at, task.name, task.version)
        with self._lock:
            if key in self._verdicts:
                self._verdicts.move_to_end(key)
                return self._verdicts[key]
        verdict = schema.first_error(job.task.params)
        with self._lock:
            self._verdicts[key] = verdict
            while len(self._verdicts) > VERDICTS_KEPT:
                self._verdicts.popitem(last=False)
        return verdict


# A job's params checked against a task version: (owner, job id, the job's updated_at, task name,
# task version). A change to the job's params changes its updated_at; one to the task, its version.
_VerdictKey = tuple[str, str, datetime, str, int]


def _unresolved(message: str) -> TaskSpec:
    return TaskSpec(type=UNRESOLVED_TASK, params={"error": message})
