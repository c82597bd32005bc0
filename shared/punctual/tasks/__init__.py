"""Task types behind a registry: a new type is one module that defines a TaskType and registers it."""

from __future__ import annotations

import importlib
import json
import pkgutil
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ValidationError

from punctual.domain.errors import InvalidRequest
from punctual.domain.models import UNRESOLVED_TASK, TaskRef, TaskSpec
from punctual.domain.validation import json_problem, refuse_constant
from punctual.platform.clock import Clock
from punctual.platform.observability import logger
from punctual.platform.timefmt import to_rfc3339
from punctual.tasks import templating
from punctual.tasks.netguard import Resolver, system_resolver


class TaskFailed(Exception):
    """The task ran and failed. `retryable` says whether another attempt could succeed."""

    def __init__(self, message: str, *, retryable: bool, result: Any = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.result = result


# The `lambda` task's clients: (region, seconds to wait for an answer) -> a Lambda client.
LambdaClients = Callable[[str, int], Any]
# The AWS target tasks' clients: (service, region, seconds to wait for an answer) -> a boto3 client.
AwsClients = Callable[[str, str, int], Any]


def retryable_status(status: int) -> bool:
    """Whether another attempt could get past an HTTP answer: a timeout (408), too many requests
    (429) or a server error (5xx); any other 4xx would only be refused again."""
    return status in (408, 429) or status >= 500


@dataclass(frozen=True)
class TaskPolicy:
    """What this deployment lets tasks reach, from its settings: checked when a job is created or
    changed, and again when it runs (the settings may have changed since)."""

    # Private, loopback or link-local networks a webhook may call (webhook_allowed_networks).
    allowed_networks: tuple[str, ...] = ()
    # Lambda functions the `lambda` task may invoke: ARN patterns with * and ? (lambda_functions).
    lambda_functions: tuple[str, ...] = ()
    # What the AWS target tasks may reach, ARN patterns likewise (punctual.platform.target_arns).
    sqs_queues: tuple[str, ...] = ()
    sns_topics: tuple[str, ...] = ()
    eventbridge_buses: tuple[str, ...] = ()
    state_machines: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskContext:
    job_id: str
    execution_id: str
    scheduled_at: datetime
    attempt: int
    timeout_seconds: float
    clock: Clock
    policy: TaskPolicy = field(default_factory=TaskPolicy)
    resolver: Resolver = field(default=system_resolver)
    lambda_clients: LambdaClients | None = None
    aws_clients: AwsClients | None = None
    job_name: str = ""
    # The job's signing keys (punctual.platform.signing), current first: an `http` request is signed with each.
    signing_keys: tuple[bytes, ...] = ()
    # The request's `webhook-id` when signed: the execution's id unless told (a notification's id).
    message_id: str | None = None

    def references(self) -> dict[str, Any]:
        """The values of `punctual.tasks.templating`'s references for this execution."""
        return {
            "execution.id": self.execution_id,
            "execution.scheduled_at": to_rfc3339(self.scheduled_at),
            "execution.attempt": self.attempt,
            "job.id": self.job_id,
            "job.name": self.job_name,
        }


class TaskType(Protocol):
    name: str
    description: str
    params_model: type[BaseModel]

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        """Refuse parameters that could never run (beyond what the model validates)."""
        ...

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        """Run once; return a JSON-able result or raise TaskFailed."""
        ...


# A task is made ready at most this long before its start: what it holds open for the start (a
# webhook's connection, which servers let go of after some idle seconds: tasks/http_ahead.py) is
# opened no sooner.
PREPARE_AHEAD_SECONDS = 15.0


class Prepared(Protocol):
    """A task made ready ahead of its start (`prepare`): what does not depend on the start is done."""

    def fire(self, context: TaskContext) -> Any:
        """Start it (`context`: the start's): a result or TaskFailed, exactly as `run` would give."""
        ...

    def launch(self, context: TaskContext) -> bool:
        """Start it now without waiting for its answer (a webhook's request, sent on the connection
        opened ahead), so that one thread can start a pack's members one after another at the instant:
        True if it went, and `fire` (with the same context) then only takes its answer. False when it
        cannot be started apart from its answer; `fire` then starts it. Never raises: what went wrong
        is `fire`'s to report."""
        ...

    def launches(self) -> bool:
        """Whether `launch` is expected to send it (a connection held open for it): known before the
        start, so that nothing need wait on a thread of its own for the start. The server may still
        have let go by then: `launch` says."""
        ...

    def awaited(self) -> Awaited | None:
        """Once launched: where its answer comes and by when `fire` must take it, so that one thread
        can wait for many answers at once (None: nothing to wait on, `fire` takes it at once)."""
        ...

    def close(self) -> None:
        """Let go of what was held for the start (a connection) when it will not come; idempotent."""
        ...


class Awaited(NamedTuple):
    """A launched start's answer: the socket it comes on, and when its timeout ends."""

    sock: socket.socket
    by: datetime


class Preparing(Protocol):
    """A task type that can do part of a run ahead of the start (optional: the others are started
    cold, as `run` starts them)."""

    def prepare(self, params: BaseModel, context: TaskContext) -> Prepared:
        """Do ahead what does not depend on the start; raise TaskFailed (or anything) for what could
        not be done: the start then runs cold, and meets the same problem, if it is still there."""
        ...


_REGISTRY: dict[str, TaskType] = {}


def register(task_type: TaskType) -> TaskType:
    _REGISTRY[task_type.name] = task_type
    return task_type


def get(name: str) -> TaskType:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidRequest(
            f"task.type: unknown task type {name!r}; known: {', '.join(sorted(_REGISTRY))}", field="task.type"
        ) from None


def all_types() -> list[TaskType]:
    _load_builtin()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def type_names() -> frozenset[str]:
    _load_builtin()
    return frozenset(_REGISTRY)


# A task is stored on its job's item, which DynamoDB caps at 400 KB with everything else a job keeps
# (its schedule, its last execution): a task up to this size leaves the item room to change. (As much
# as EventBridge Scheduler takes for a target's input.)
MAX_TASK_BYTES = 256 * 1024
# Parameters nest at most this deep, and so does a result as stored: both are read back with a
# parser that stops near 200 levels.
MAX_PARAMS_DEPTH = 32
MAX_RESULT_DEPTH = 32
# How much of an answer (a webhook's body, a function's payload) is read and kept.
ANSWER_PREVIEW_BYTES = 64 * 1024


def validate(spec: TaskSpec, policy: TaskPolicy, *, field_prefix: str = "task.params") -> TaskSpec:
    """Check a task's type and parameters; returns the spec with defaults filled in.

    Parameters that refer to the execution (`punctual.tasks.templating`) are checked as they would be
    with sample values substituted, and kept as given: they are substituted when the task runs.
    """
    task_type = get(spec.type)
    problem = json_problem(spec.params, MAX_PARAMS_DEPTH)
    if problem is not None:
        raise InvalidRequest(f"{field_prefix}: {problem}", field=field_prefix)
    templated = templating.has_references(spec.params)
    params_in = spec.params
    if templated:
        try:
            templating.check(spec.params)
        except templating.TemplateError as exc:
            path = f"{field_prefix}.{exc.path}" if exc.path else field_prefix
            raise InvalidRequest(f"{path}: {exc.message}", field=path) from None
        params_in = templating.render(spec.params, SAMPLE_REFERENCES)
    try:
        params = task_type.params_model.model_validate(params_in)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        path = f"{field_prefix}.{where}" if where else field_prefix
        raise InvalidRequest(f"{path}: {first['msg']}", field=path) from None
    _check(task_type, params, policy, field_prefix)
    normalised = spec.params if templated else params.model_dump(mode="json", exclude_none=True)
    checked = TaskSpec(type=spec.type, params=normalised)
    size = len(checked.model_dump_json().encode())
    if size > MAX_TASK_BYTES:
        raise InvalidRequest(
            f"{field_prefix}: {size:,} bytes as JSON; at most {MAX_TASK_BYTES:,}", field=field_prefix
        )
    return checked


def check_defaults(type_name: str, params: dict[str, Any], policy: TaskPolicy, field_prefix: str) -> None:
    """A named task's default parameters: each one given must be right for the type (a job may supply
    the rest); when none is missing, the whole is checked as a job's task would be."""
    task_type = get(type_name)
    sample = templating.render(params, SAMPLE_REFERENCES)
    try:
        model = task_type.params_model.model_validate(sample)
    except ValidationError as exc:
        wrong = [e for e in exc.errors() if e["type"] != "missing"]
        if wrong:
            where = ".".join(str(part) for part in wrong[0]["loc"])
            path = f"{field_prefix}.{where}" if where else field_prefix
            raise InvalidRequest(f"{path}: {wrong[0]['msg']}", field=path) from None
        # Some parameters are left to the jobs: check what a target check can read of the rest.
        model = task_type.params_model.model_construct(**sample)
    try:
        _check(task_type, model, policy, field_prefix)
    except AttributeError:
        pass  # (a check that needs a parameter left to the jobs: made when a job supplies it)


def _check(task_type: TaskType, params: BaseModel, policy: TaskPolicy, field_prefix: str) -> None:
    """The type's own check of its parameters (a target's address, an ARN the settings allow), its
    refusal naming them where this request holds them (a named task's job: `params.url`)."""
    try:
        task_type.check(params, policy)
    except InvalidRequest as exc:
        if field_prefix == "task.params":
            raise
        field = (exc.field or "").replace("task.params", field_prefix, 1)
        raise InvalidRequest(str(exc).replace("task.params", field_prefix, 1), field=field or None) from None


# What references stand for when parameters are checked at creation (`validate`).
SAMPLE_REFERENCES: dict[str, Any] = {
    "execution.id": "job_0000000000.0.1",
    "execution.scheduled_at": "2026-01-01T00:00:00.000Z",
    "execution.attempt": 1,
    "job.id": "job_0000000000",
    "job.name": "job",
}


def run(spec: TaskSpec | TaskRef, context: TaskContext) -> Any:
    task_type, params = _for_run(spec, context)
    return task_type.run(params, context)


def prepare(spec: TaskSpec | TaskRef, context: TaskContext) -> Prepared:
    """`run`'s work that does not depend on the start, done ahead of it (its references rendered, and
    whatever its type's `prepare` does); `context` as the start's will be. Never raises, and never
    makes a failure of its own: what could not be done ahead is done when it fires, as `run` does it.
    A start whose references differ from the context's here (another attempt) runs cold."""
    try:
        task_type, params = _for_run(spec, context)
        preparing = getattr(task_type, "prepare", None)
        if preparing is None:
            return _Cold(spec)
        ready: Prepared = preparing(params, context)
    except TaskFailed:
        return _Cold(spec)  # (the start meets it again, if it is still so)
    except Exception:
        logger.warning(
            "task not prepared; it starts cold", exc_info=True, extra={"execution_id": context.execution_id}
        )
        return _Cold(spec)
    return _Rendered(spec, context.references(), ready)


class _Cold:
    """Nothing done ahead: `fire` is `run`."""

    def __init__(self, spec: TaskSpec | TaskRef) -> None:
        self._spec = spec

    def fire(self, context: TaskContext) -> Any:
        return run(self._spec, context)

    def launch(self, context: TaskContext) -> bool:
        return False

    def launches(self) -> bool:
        return False

    def awaited(self) -> Awaited | None:
        return None

    def close(self) -> None:
        pass


class _Rendered:
    """Prepared with the references of one context: fired in another, it runs cold."""

    def __init__(self, spec: TaskSpec | TaskRef, references: dict[str, Any], ready: Prepared) -> None:
        self._spec = spec
        self._references = references
        self._ready = ready

    def fire(self, context: TaskContext) -> Any:
        if context.references() != self._references:
            self._ready.close()
            return run(self._spec, context)
        return self._ready.fire(context)

    def launch(self, context: TaskContext) -> bool:
        # (references that differ: `fire` runs it cold)
        return context.references() == self._references and self._ready.launch(context)

    def launches(self) -> bool:
        return self._ready.launches()

    def awaited(self) -> Awaited | None:
        return self._ready.awaited()

    def close(self) -> None:
        self._ready.close()


def _for_run(spec: TaskSpec | TaskRef, context: TaskContext) -> tuple[TaskType, BaseModel]:
    """The task's type and its parameters for this run, references substituted; TaskFailed when it
    cannot run."""
    if isinstance(spec, TaskRef):
        raise TaskFailed(f"the named task {spec.name!r} was not resolved for this run", retryable=False)
    if spec.type == UNRESOLVED_TASK:
        # A named task that could not be resolved for this run (gone, or the job's parameters no
        # longer fit it): another attempt would meet the same.
        raise TaskFailed(str(spec.params.get("error", "task cannot run")), retryable=False)
    task_type = get(spec.type)
    try:
        params_in = templating.render(spec.params, context.references())
        return task_type, task_type.params_model.model_validate(params_in)
    except (ValidationError, templating.TemplateError) as exc:
        raise TaskFailed(
            f"the task's parameters are invalid for this run: {_first_problem(exc)}", retryable=False
        ) from exc


def run_given(spec: TaskSpec, context: TaskContext) -> Any:
    """Run a task whose parameters Punctual made itself (the notifier's webhook request) as they are:
    no references substituted, since they carry users' text verbatim (a job's name, a task's error);
    ValidationError for parameters its type refuses."""
    task_type = get(spec.type)
    return task_type.run(task_type.params_model.model_validate(spec.params), context)


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)


def decode_answer(payload: bytes) -> Any:
    """An answer's body as a task's result keeps it: its JSON, or its text when it is not JSON (or
    JSON that cannot be stored: NaN or Infinity, nested too deep, an unpaired surrogate)."""
    text = payload.decode("utf-8", errors="replace")
    if not text:
        return None
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        return text
    # (the answer sits one level down in the task's result: {"status": ..., "body" or "payload": answer})
    return text if json_problem(value, MAX_RESULT_DEPTH - 1) is not None else value


_LOAD_LOCK = threading.Lock()
_loaded = False


def _load_builtin() -> None:
    """Import every module of this package once: each registers its types (a new type is a module).
    Under a lock: the worker runs a batch's records in threads, and one that found the registry half
    filled by another would report a type as unknown."""
    global _loaded
    if _loaded:
        return
    with _LOAD_LOCK:
        if not _loaded:
            for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
                importlib.import_module(f"{__name__}.{module.name}")
            _loaded = True
