"""The API's request and response models (pydantic): what the OpenAPI document shows of each body."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag

from punctual.domain.executions import DeliveryStatus, ExecutionStatus
from punctual.domain.models import MAX_PAUSE_NOTE_CHARS, JobStatus, TaskSpec
from punctual.domain.policies import MAX_NOTIFY_RULES, JobPolicy, NotifyEvent, NotifyRule, RetryPolicy
from punctual.domain.schedules import Schedule
from punctual.domain.validation import JSON_NUMBER, NOT_BLANK, NOT_NULL, PLAIN_TEXT, TAGS
from punctual.execution.dead_letters import MAX_REDRIVE, Redriven
from punctual.platform.signing import check_secret


class ErrorOut(BaseModel):
    message: str = Field(description="What was wrong, naming the offending field.")
    field: str | None = None
    errors: list[dict[str, Any]] | None = None


class DeliveryOut(BaseModel):
    event: NotifyEvent
    rule: int = Field(description="The index of the rule in the job's `notify`.")
    to: str
    status: DeliveryStatus = Field(
        description="delivered; retrying (the last attempt failed, another comes at next_attempt_at); "
        "failed (given up on: out of attempts, or an answer no retry helps)."
    )
    attempts: int
    at: str = Field(description="When the last attempt was made.")
    error: str | None = None
    next_attempt_at: str | None = None


class ExecutionOut(BaseModel):
    id: str
    job_id: str
    scheduled_at: str
    status: ExecutionStatus
    attempts: int
    manual: bool = Field(description="True for an extra execution requested with POST /jobs/{id}/run.")
    started_at: str | None
    finished_at: str | None
    lateness_ms: int | None = Field(description="Start of the first attempt minus the scheduled time.")
    error: str | None
    result: Any = Field(description="The task's result, truncated when large.")
    next_attempt_at: str | None = None
    task_version: int | None = Field(
        default=None, description="The version of the job's named task its latest attempt ran (null: inline)."
    )
    retry_of: str | None = Field(
        default=None, description="The execution this one runs again (POST .../executions/{id}/retry)."
    )
    dead_lettered: bool = Field(
        default=False,
        description="Ended FAILED by the dead-letter handler: its message exhausted its deliveries "
        "(GET /dead-letters lists it until it is redriven).",
    )
    notifications: list[DeliveryOut] = Field(
        default_factory=list, description="What became of its notifications (the job's `notify`)."
    )


TaskName = Annotated[
    str, Field(min_length=1, max_length=64, description="One of your named tasks (POST /tasks).")
]
# A job's task: inline (an object with its type and params), or a named task's name (a string).
JobTask = Annotated[
    Annotated[TaskSpec, Tag("inline")] | Annotated[TaskName, Tag("named")],
    Discriminator(lambda value: "named" if isinstance(value, str) else "inline"),
]
JobTags = Annotated[dict[str, str], TAGS]


class OutcomeOut(BaseModel):
    status: ExecutionStatus = Field(description="SUCCEEDED or FAILED.")
    at: str = Field(description="When that execution finished.")
    execution_id: str
    consecutive_failures: int = Field(
        description="FAILED executions in a row, this one included (0 after a success)."
    )


class SigningOut(BaseModel):
    enabled: bool = Field(description="The job signs its webhook notifications and `http` requests.")
    previous_valid_until: str | None = Field(
        description="While a rotation lasts, the replaced secret signs too, until then."
    )


class JobOut(BaseModel):
    id: str
    name: str
    status: JobStatus
    task: TaskSpec | str = Field(description="The inline task, or the name of the named task the job uses.")
    params: dict[str, Any] | None = Field(
        default=None,
        description="A job with a named task: the parameters it gives the task (null otherwise).",
    )
    tags: dict[str, str]
    schedule: Schedule
    retry: RetryPolicy | None = Field(description="Null: the job takes its named task's retry policy.")
    timeout_seconds: int | None = Field(description="Null: the job takes its named task's timeout.")
    policy: JobPolicy
    next_run_at: str | None
    created_at: str
    updated_at: str
    last_execution: ExecutionOut | None
    outcome: OutcomeOut | None = Field(
        default=None,
        description="How the job's latest execution to run to its end ended (null: none has since this "
        "was recorded on jobs). A one-time job that is COMPLETED has succeeded or failed by this.",
    )
    notify: list[NotifyRule] = Field(default_factory=list)
    signing: SigningOut
    pause_note: str | None = Field(default=None, description="Why a PAUSED job was paused.")
    paused_at: str | None = None
    revision: int = Field(
        description="One more with every change through the API; the ETag of the job's answers. A "
        'PATCH with If-Match: "<revision>" changes the job only at that revision (else 412).'
    )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class ExecutionPage(BaseModel):
    items: list[ExecutionOut]
    next_cursor: str | None


_NOTIFY_DESCRIPTION = (
    "Where to tell of the job's executions' events (at most 10 rules). Delivered at least once, with "
    "retries, never holding up the execution; each execution shows what became of its notifications."
)
_SECRET_DESCRIPTION = (
    "Write-only (never shown): a Standard Webhooks secret, whsec_ and the base64 of 24 to 64 random "
    "bytes. The job then signs its webhook notifications and its http requests (webhook-id, "
    "webhook-timestamp, webhook-signature)."
)


def _secret(value: str | None) -> str | None:
    if value is not None:
        check_secret(value)
    return value


SigningSecret = Annotated[str | None, AfterValidator(_secret)]


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # (null: only where an answer shows one, so that it means the same; elsewhere NOT_NULL)
    name: Annotated[str | None, NOT_NULL, PLAIN_TEXT, NOT_BLANK] = Field(
        default=None, min_length=1, max_length=200
    )
    task: JobTask
    params: dict[str, Any] | None = Field(
        default=None, description="With a named task: its parameters, checked against its params_schema."
    )
    tags: Annotated[JobTags | None, NOT_NULL] = None
    schedule: Schedule
    retry: RetryPolicy | None = None
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    policy: Annotated[JobPolicy | None, NOT_NULL] = Field(
        default=None,
        description="Catch-up window, overlap, flexible window, run limit and pause after failures "
        "(defaults: none).",
    )
    notify: Annotated[list[NotifyRule], NOT_NULL] = Field(
        default_factory=list, max_length=MAX_NOTIFY_RULES, description=_NOTIFY_DESCRIPTION
    )
    signing_secret: SigningSecret = Field(default=None, max_length=200, description=_SECRET_DESCRIPTION)


MAX_BATCH_JOBS = 100


class JobBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobIn] = Field(
        min_length=1, max_length=MAX_BATCH_JOBS, description="1 to 100 jobs, each as for POST /jobs."
    )


class JobBatchOut(BaseModel):
    items: list[JobOut] = Field(description="The jobs, in the order of the request.")


class JobPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # A field left out is kept; null means nothing (but for signing_secret, retry and
    # timeout_seconds) and is refused.
    name: Annotated[str | None, NOT_NULL, PLAIN_TEXT, NOT_BLANK] = Field(
        default=None, min_length=1, max_length=200
    )
    task: Annotated[JobTask | None, NOT_NULL] = None
    params: Annotated[dict[str, Any] | None, NOT_NULL] = Field(
        default=None, description="A job with a named task: its new parameters (alone: the same task)."
    )
    tags: Annotated[JobTags | None, NOT_NULL] = Field(
        default=None, description="The job's tags, all of them (replaced)."
    )
    schedule: Annotated[Schedule | None, NOT_NULL] = None
    retry: RetryPolicy | None = Field(
        default=None, description="null: back to the named task's (an inline task: the default)."
    )
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(
        default=None, ge=1, le=300, description="null: back to the named task's (an inline task: 60)."
    )
    policy: Annotated[JobPolicy | None, NOT_NULL] = Field(
        default=None,
        description="Catch-up window, overlap, flexible window, run limit and pause after failures "
        "(defaults: none).",
    )
    notify: Annotated[list[NotifyRule] | None, NOT_NULL] = Field(
        default=None,
        max_length=MAX_NOTIFY_RULES,
        description="Replaces the rules ([]: none). " + _NOTIFY_DESCRIPTION,
    )
    signing_secret: SigningSecret = Field(
        default=None,
        max_length=200,
        description="A new secret: the current one keeps signing beside it for 24 hours (a rotation), "
        "then only the new one signs. null: sign nothing from now on. " + _SECRET_DESCRIPTION,
    )


class PauseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: Annotated[str | None, NOT_NULL, PLAIN_TEXT] = Field(
        default=None, min_length=1, max_length=MAX_PAUSE_NOTE_CHARS, description="Why: shown on the job."
    )


class OutcomeFilter(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class DeadLetterOut(BaseModel):
    execution_id: str
    job_id: str
    job_name: str | None = Field(description="null once the job has expired.")
    scheduled_at: str
    dead_lettered_at: str
    error: str


class DeadLetterPage(BaseModel):
    items: list[DeadLetterOut]
    next_cursor: str | None


class RedriveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    execution_ids: list[Annotated[str, Field(min_length=1, max_length=300)]] = Field(
        min_length=1, max_length=MAX_REDRIVE, description="1 to 100 execution ids, from GET /dead-letters."
    )


class RedriveItem(BaseModel):
    execution_id: str
    result: Redriven = Field(
        description="redriven (queued again); not_found (no such dead letter of yours, or redriven "
        "already); gone (its execution expired from the history); not_dead_lettered (it ended otherwise "
        "since); job_paused (a run by hand of a paused job: resume the job, then redrive; the dead "
        "letter stays); job_cancelled, superseded (its job was cancelled, or paused, resumed or "
        "rescheduled since it was scheduled: it would not run; the dead letter goes, and retrying the "
        "execution runs it as a new one); failed (could not be sent now: redrive it again)."
    )


class RedriveOut(BaseModel):
    items: list[RedriveItem]


class PreviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedule: Schedule
    count: Annotated[int, NOT_NULL, JSON_NUMBER] = Field(default=10, ge=1, le=50)


class PreviewRun(BaseModel):
    at: str = Field(description="The run's instant, UTC.")
    local: str = Field(description="The same instant on the schedule's wall clock, with its offset.")
    dst: Literal["moved", "repeated"] | None = Field(
        description=(
            "How a change of the zone's offset shaped this run: `moved` (its wall-clock time fell in a "
            "spring-forward gap, so it runs at the first minute after), `repeated` (its wall-clock time "
            "occurs twice that day: this run is in one of the passes), or null."
        )
    )


class PreviewOut(BaseModel):
    next_runs: list[str] = Field(description="The run instants, UTC (the same as `runs[].at`).")
    runs: list[PreviewRun]


class TaskTypeOut(BaseModel):
    type: str
    description: str
    params: dict[str, Any] = Field(description="JSON Schema of the task's params.")


class TaskOut(BaseModel):
    name: str
    type: str
    params: dict[str, Any] = Field(description="Default parameters, under each job's own.")
    params_schema: dict[str, Any] | bool | None = Field(description="JSON Schema of what a job supplies.")
    retry: RetryPolicy | None
    timeout_seconds: int | None
    description: str
    tags: dict[str, str]
    version: int = Field(description="1 when defined, one more with each change.")
    created_at: str
    updated_at: str


class TaskTypesOut(BaseModel):
    types: list[TaskTypeOut] = Field(description="The built-in task types.")
    items: list[TaskOut] = Field(description="A page of your named tasks, by name.")
    next_cursor: str | None


class TaskIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Unique among your tasks; jobs name it.")
    type: str = Field(min_length=1, max_length=64, description="A built-in type (GET /tasks lists them).")
    params: dict[str, Any] = Field(default_factory=dict, description="Default parameters of the type.")
    params_schema: dict[str, Any] | bool | None = Field(
        default=None, description="JSON Schema 2020-12 of the params a job supplies (none: any)."
    )
    retry: RetryPolicy | None = None
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    description: Annotated[str, NOT_NULL, PLAIN_TEXT] = Field(default="", max_length=1000)
    tags: Annotated[JobTags | None, NOT_NULL] = None


class TaskPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # A field left out is kept; null removes params_schema, retry and timeout_seconds, and is refused
    # elsewhere.
    type: Annotated[str | None, NOT_NULL] = Field(default=None, min_length=1, max_length=64)
    params: Annotated[dict[str, Any] | None, NOT_NULL] = Field(
        default=None, description="The new defaults, all of them."
    )
    params_schema: dict[str, Any] | bool | None = Field(default=None, description="Null removes it.")
    retry: RetryPolicy | None = Field(default=None, description="Null removes it (jobs use the default).")
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    description: Annotated[str | None, NOT_NULL, PLAIN_TEXT] = Field(default=None, max_length=1000)
    tags: Annotated[JobTags | None, NOT_NULL] = None


class BulkFailure(BaseModel):
    id: str
    message: str


class BulkOut(BaseModel):
    changed: list[JobOut] = Field(description="The jobs this request paused (or resumed).")
    failed: list[BulkFailure] = Field(description="Matching jobs that could not be changed, and why.")
    next_cursor: str | None = Field(
        description="More matching jobs may follow: call again with it; null: done."
    )
