"""The simple task types: noop, sleep and fail (for trying schedules and retries)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from punctual.domain.validation import JSON_NUMBER
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy, register


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _SleepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: Annotated[float, JSON_NUMBER] = Field(ge=0, le=900, description="How long to sleep.")


class _FailParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(default="failed on purpose", max_length=1000)


class Noop:
    name = "noop"
    description = "Succeeds at once."
    params_model: type[BaseModel] = _NoParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        return None

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        return None


class Sleep:
    name = "sleep"
    description = "Sleeps for `seconds`, then succeeds; fails (retryably) if that exceeds the job's timeout."
    params_model: type[BaseModel] = _SleepParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        return None

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, _SleepParams)
        if params.seconds > context.timeout_seconds:
            context.clock.sleep(context.timeout_seconds)
            raise TaskFailed(f"timed out after {context.timeout_seconds:g}s", retryable=True)
        context.clock.sleep(params.seconds)
        return {"slept_seconds": params.seconds}


class Fail:
    name = "fail"
    description = "Always fails, retryably: to try retry policies and the dead-letter path."
    params_model: type[BaseModel] = _FailParams

    def check(self, params: BaseModel, policy: TaskPolicy) -> None:
        return None

    def run(self, params: BaseModel, context: TaskContext) -> Any:
        assert isinstance(params, _FailParams)
        raise TaskFailed(params.message, retryable=True)


register(Noop())
register(Sleep())
register(Fail())
