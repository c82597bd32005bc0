"""Task types behind a registry: a new type is one module that defines a TaskType and registers it."""

from __future__ import annotations

import importlib
import json
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from punctual.clock import Clock
from punctual.errors import InvalidRequest
from punctual.models import TaskSpec
from punctual.netguard import Resolver, system_resolver
from punctual.validation import json_problem, refuse_constant


class TaskFailed(Exception):
    """The task ran and failed. `retryable` says whether another attempt could succeed."""

    def __init__(self, message: str, *, retryable: bool, result: Any = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.result = result


# The `lambda` task's clients: (region, seconds to wait for an answer) -> a Lambda client.
LambdaClients = Callable[[str, int], Any]


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
    # The job's signing keys (punctual.signing), current first: an `http` request is signed with each.
    signing_keys: tuple[bytes, ...] = ()
    # The request's `webhook-id` when signed: the execution's id unless told (a notification's id).
    message_id: str | None = None


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


def validate(spec: TaskSpec, policy: TaskPolicy) -> TaskSpec:
    """Check a task's type and parameters; returns the spec with defaults filled in."""
    task_type = get(spec.type)
    problem = json_problem(spec.params, MAX_PARAMS_DEPTH)
    if problem is not None:
        raise InvalidRequest(f"task.params: {problem}", field="task.params")
    try:
        params = task_type.params_model.model_validate(spec.params)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        path = f"task.params.{where}" if where else "task.params"
        raise InvalidRequest(f"{path}: {first['msg']}", field=path) from None
    task_type.check(params, policy)
    checked = TaskSpec(type=spec.type, params=params.model_dump(mode="json", exclude_none=True))
    size = len(checked.model_dump_json().encode())
    if size > MAX_TASK_BYTES:
        raise InvalidRequest(
            f"task.params: {size:,} bytes as JSON; at most {MAX_TASK_BYTES:,}", field="task.params"
        )
    return checked


def run(spec: TaskSpec, context: TaskContext) -> Any:
    task_type = get(spec.type)
    params = task_type.params_model.model_validate(spec.params)
    return task_type.run(params, context)


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
