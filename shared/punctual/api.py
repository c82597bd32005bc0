"""The HTTP API (API.md), on Powertools' API Gateway resolvers with validation and OpenAPI.

The routes are registered once, on a Router that both resolvers include: API Gateway HTTP APIs (the
deployed default) send payload format 2.0 events, REST APIs payload 1.0; `resolve` answers either,
with no configuration. Routes parse, call the JobService once and shape the answer. Domain errors map
to HTTP here and nowhere else.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Router
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent, APIGatewayProxyEventV2
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag

from punctual import tasks, wiring
from punctual.dead_letters import MAX_REDRIVE, Redriven
from punctual.errors import Conflict, InvalidRequest, NotFound, RetryableStoreError
from punctual.models import (
    MAX_NOTIFY_RULES,
    MAX_PAUSE_NOTE_CHARS,
    Delivery,
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    Job,
    JobPolicy,
    JobStatus,
    NotifyEvent,
    NotifyRule,
    RetryPolicy,
    TaskRef,
    TaskSpec,
)
from punctual.named_tasks import IN_USE_COUNT_LIMIT, TaskChanges
from punctual.observability import logger
from punctual.schedules import Schedule, local_note
from punctual.service import UNCHANGED, BulkChange, JobChanges, NewJob
from punctual.signing import key_of
from punctual.store import LIST_READ_BUDGET
from punctual.store.tasks import NamedTask
from punctual.timefmt import parse_rfc3339, to_rfc3339
from punctual.validation import JSON_NUMBER, PLAIN_TEXT, TAGS, json_problem, parse_tag_filter, refuse_constant

API_DESCRIPTION = """\
Punctual schedules jobs: a task (call a webhook, …) with a schedule (now, at an instant, cron in a
time zone, or a fixed rate). Every execution runs at least once; duplicates carry the same
X-Punctual-Execution-Id so receivers can make them harmless.

Choices where the contract is silent:
- Every request is made by an authenticated owner (IAM on AWS, a bearer token locally); another
  owner's job answers 404 exactly like a missing one.
- `at` more than 5 minutes in the past is refused (422); a slightly past `at` runs at once.
- A rate schedule runs first at `start_at`, or one period after creation without it.
- A schedule with no run time in the future is refused (422).
- Pausing skips executions that come due while paused; resuming continues from now (missed runs are
  not made up). A one-time job whose instant passed while it was paused completes without running;
  one paused while its run was under way is not run again on resume: if that run ended (however
  long ago) the job completes, and if it is still under way it goes on (its retries too) and
  completes the job. A retry that comes due while the job is paused is skipped: that run did not
  end, so resuming treats the job as not run.
- DELETE cancels (the job stays readable as CANCELLED); cancelling twice answers the same job. A
  job that changes while it is being cancelled (its run ending, say) is read again and cancelled;
  only one that keeps changing through three attempts answers 409 (retry it).
- POST /jobs/{id}/run is refused (409) on a PAUSED or CANCELLED job.
- PATCH of a CANCELLED job answers 409. A new schedule revives a COMPLETED job; other changes to
  one (a rename, say) are kept, and it stays COMPLETED.
- `last_execution` is the most recent execution to run to its end (SUCCEEDED or FAILED; not one
  skipped) still in the job's history (executions expire `retention_days` after they finish); its
  `result` is only on the execution itself: GET /jobs/{id}/executions.
- A scheduled execution joins GET /jobs/{id}/executions when it starts (RUNNING), or when it is
  skipped (CANCELLED, or SKIPPED by its policy); while it waits in the queue, the job's `next_run_at` shows it. (Storing it
  as QUEUED first would cost one more write per execution.) An extra run (POST /jobs/{id}/run) is
  listed at once, as QUEUED. (The local stack lists every execution as QUEUED once enqueued: its
  queue lives in memory, and is rebuilt from those after a restart.)
- A COMPLETED or CANCELLED job expires with its execution history, `retention_days` (default 30)
  after it finished; active and paused jobs are kept.
- An Idempotency-Key has 1 to 200 characters: one sent empty (or blank) is refused (400), not read
  as no key, since the retries it was meant to make safe would each create a job.
- Idempotency keys are remembered for 24 hours. A retry with the same key and body answers the
  job(s) the first request created even once its schedule is no longer valid (its instant has
  passed); if that request stored only some of them (it failed part way), such a retry answers 409.
- Bodies are JSON: a route that reads one (POST /jobs, /jobs/batch, /schedules/preview, PATCH)
  answers 415 to another Content-Type (media types ignore case; none at all is read as JSON). What
  JSON allows but no store keeps is refused (422, field `body`): nesting deeper than 64 levels,
  NaN or Infinity, numbers beyond a float's range, unpaired surrogates (`\\ud800`); and so is an
  object that repeats a key (naming it), which parsers read differently (the first or the last).
- Numbers are JSON numbers: a number sent as a string (`"60"`) or a boolean is refused (422 naming
  the field), not converted, and an integer field (`timeout_seconds`, `retry.max_attempts`,
  `schedule.every_seconds`, `count`) refuses any number written with a fraction or an exponent
  (`2.0`, `6e1`). A field of seconds that takes fractions (`retry.backoff_seconds`) takes integers too.
- A job's `name` is plain text: a control character (U+0000-U+001F, U+007F-U+009F: NUL, tab, line
  breaks, escapes) is refused (422).
- An `http` task's URL is checked when the job is created or changed as far as it can be without a
  lookup: a private, loopback or link-local address written in the URL (in any spelling: `127.1`,
  `2130706433`, IPv4-mapped, -translated or -compatible IPv6 such as `[::ffff:0:127.0.0.1]`) or a
  name that means this machine (`localhost`, `*.localhost`, `localhost.`) is refused (422, field
  `task.params.url`) unless the deployment allows those networks (`webhook_allowed_networks`; the
  local stack allows loopback). Every name is checked again each time it is resolved, at run time.
- Timestamps in requests are RFC 3339: a date, T, a time with seconds, and an offset (Z or +hh:mm),
  before 2200-01-01T00:00:00Z.
- Cron is Debian cron's: five fields (names allowed, 7 = Sunday, `N/step` = `N-max/step`; also `L`
  as the last day of the month, `5L` the last Friday, `5#3` the third) or a
  macro (@yearly @annually @monthly @weekly @daily @midnight @hourly); day-of-month and day-of-week
  both restricted match either, one starred (`*`, `*/n`) match both. Across a change of the zone's
  offset: a time in a spring-forward gap runs at the first minute after it (an expression starred
  in its minute or hour field only if that minute matches); starred expressions run in both passes
  of a fall-back, others once; jumps over 3 hours are not caught up. The text is stored normalised
  (single spaces, lower case). EventBridge and Quartz expressions (`cron(...)`, 6 or 7 fields, `?`)
  are refused with their 5-field equivalent. A schedule whose next run cannot be found within the
  computation's bound is refused (422, `schedule.expression`).
- `policy` (all optional): `max_lateness_seconds` skips a run that would start later than that
  (status SKIPPED, the reason in `error`); `overlap` (recurring) `allow` | `skip` | `buffer_one`;
  `flexible_window_seconds` (recurring, up to 900) spreads each run over that window after its
  time, deterministically, never past the next run; `max_runs` (recurring) completes the job after
  that many scheduled runs. A changed policy applies from the next run filed. Overlap is judged from
  the job's stored executions: two runs starting in the same instant can both start.
- A task's parameters take at most 256 KiB as JSON, nested at most 32 levels (422 beyond): a job is
  stored as one item. A task's result is stored as JSON up to 4 KiB; a larger one (or one nested
  too deep) as a truncated preview of its text.
- POST /jobs/batch creates 1 to 100 jobs in one request (cheaper than one request a job): all are
  validated first, and one invalid job refuses the whole batch (422 naming `jobs[i].<field>`) with
  nothing created. An Idempotency-Key covers the whole batch (body and order); reusing a key of
  POST /jobs on a batch, or the reverse, answers 409. A batch that fails part way (503) may have
  created some of its jobs: retry it with the same Idempotency-Key to get all of them, once.
- Named tasks (POST /tasks): a job names one (`"task": "send-email"`) and gives its `params`, which
  must fit the task's `params_schema` (422 naming `params.<path>`) and are merged over the task's
  default `params` when it runs (objects key by key, anything else replaced): a change to the task
  applies to the next executions of every job using it (workers read a task again at most 10 s after
  they last did), and each execution records the `task_version` it ran. A job without a `retry` or
  `timeout_seconds` of its own takes the task's (shown as null on the job). A job whose task was
  deleted meanwhile, or whose params no longer fit a changed schema, fails its next execution at once,
  saying why. Names are unique per owner, and another owner's task answers 404 (a job naming it: 422
  unknown task). DELETE of a task that ACTIVE or PAUSED jobs use answers 409 with their count.
- `params_schema` is JSON Schema 2020-12 (or draft-07), checked when the task is defined: at most
  64 KiB, nested 32 levels, 2,000 subschemas; only local `$ref`s (`#/$defs/...`; nothing is
  fetched), no `$ref` loop that never descends into the value, `pattern`s without backreferences or
  lookaround (matched in linear time); an unknown keyword is refused by name; `format` is an
  annotation. Validation of one job's params takes at most 500,000 steps (422 beyond).
- Parameters may refer to the execution: `{{ execution.id }}`, `{{ execution.scheduled_at }}`,
  `{{ execution.attempt }}`, `{{ job.id }}`, `{{ job.name }}` (with `| urlencode` to percent-encode),
  substituted when it runs; a string that is one reference takes the value's type. An unknown
  reference is refused (422 naming the field); at most 100 in one task's parameters.
- Tags (jobs and named tasks): at most 50, keys of 1 to 128 characters without a colon, values up
  to 256. `?tag=key:value` (or `?tag=key`) filters GET /jobs and GET /tasks; like `status`, it reads
  the owner's list and filters it, reading at most the budget below a request. POST /jobs/pause and
  /jobs/resume with `?tag=` change the matching ACTIVE (or PAUSED) jobs a page at a time (at most
  `limit`, 50 by default), each as its single-job endpoint would, and answer what changed, what could
  not be changed and why, and a `next_cursor` to continue with (null: done).
- Monitoring (docs/monitoring.md). A job's status stays what the contract says (a one-time job
  whose run ended is COMPLETED, whether it succeeded or failed); how its runs ended is its `outcome`:
  the status (SUCCEEDED or FAILED) of its latest execution to run to its end, when it finished, which
  it was, and the failures in a row. GET /jobs?outcome=failed finds the jobs whose last run failed
  (`status` and `name_prefix` combine with it). A SKIPPED or CANCELLED execution changes no outcome.
  Jobs whose last run ended before outcomes were recorded show `outcome` and, in lists,
  `last_execution` as null until they run again (GET /jobs/{id} shows its last execution).
- `{"type": "in", "seconds": N}` schedules a one-time run N seconds after the request is taken,
  stored as the `at` of that instant: a retry with the same Idempotency-Key and body answers the
  same job, where an `at` computed by the client at each attempt would answer 409.
- `notify` rules (at most 10) name events (`succeeded`, `failed`, `dead_lettered`, `late` with
  `late_after_seconds`, `skipped`) and a target: a webhook URL (checked like an `http` task's), or
  an SNS topic or EventBridge bus ARN that the deployment allows (`notification_targets`; 422
  otherwise). One message per rule and event; a dead-lettered execution is told once to a rule, as
  `dead_lettered` if it asks for it, else as `failed`. `late` is told when the run starts (or, if
  that could not be queued, when it ends). Delivery is at least once, after the execution's status
  is stored, and never holds the execution up: a network error, 408, 429 or 5xx (and AWS
  throttling) is retried after 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h and 6 h; other answers
  fail it at once. Each execution's `notifications` says what became of them. A receiver
  de-duplicates on `webhook-id` (the payload's `id`).
- `signing_secret` (write-only: no answer shows it, only `signing.enabled`) signs webhook
  notifications and `http` requests with Standard Webhooks' headers (webhook-id: the message's id,
  or the execution's for an `http` request; webhook-timestamp; webhook-signature: `v1,` and the
  base64 HMAC-SHA256 of `id.timestamp.body`). A secret is `whsec_` and the base64 of 24 to 64
  bytes. A PATCH with a new one rotates: the replaced secret keeps signing beside it for 24 hours
  (the header then carries both signatures); null stops signing.
- `policy.pause_after_failures`: the job pauses once that many executions in a row have FAILED,
  with a `pause_note` saying so (a job resumed while it still fails pauses at its next failure).
  POST /jobs/{id}/pause takes an optional `{"note": ...}`; resuming clears the note.
- POST /jobs/{id}/executions/{execution_id}/retry runs a FAILED, SKIPPED or CANCELLED execution again
  as a new extra execution (a new id) naming it in `retry_of`.
- GET /dead-letters lists your executions that were dead-lettered (their message exhausted its
  deliveries: FAILED, `dead_lettered`); POST /dead-letters/redrive queues the same executions again.
""" + (
    f"- GET /jobs/{{id}}/executions?status=&since=&until= filters by status and scheduled time (since\n"
    f"  inclusive, until exclusive); with a status, one request reads at most {LIST_READ_BUDGET}\n"
    "  executions: a short page with a cursor, as below.\n"
    f"- GET /jobs with a filter reads at most {LIST_READ_BUDGET} jobs per request: a page can then be\n"
    "  short, even empty, while `next_cursor` is not null. Follow `next_cursor` until it is null to see\n"
    "  every match. A page costs a few reads whatever its size: no read per job.\n"
)

# Every route and error handler; the resolvers at the end of the module include them.
router = Router()


# ----------------------------------------------------------------- shapes
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
        key_of(value)
    return value


SigningSecret = Annotated[str | None, AfterValidator(_secret)]


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str | None, PLAIN_TEXT] = Field(default=None, min_length=1, max_length=200)
    task: JobTask
    params: dict[str, Any] | None = Field(
        default=None, description="With a named task: its parameters, checked against its params_schema."
    )
    tags: JobTags | None = None
    schedule: Schedule
    retry: RetryPolicy | None = None
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    policy: JobPolicy | None = Field(
        default=None,
        description="Catch-up window, overlap, flexible window, run limit and pause after failures "
        "(defaults: none).",
    )
    notify: list[NotifyRule] = Field(
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

    name: Annotated[str | None, PLAIN_TEXT] = Field(default=None, min_length=1, max_length=200)
    task: JobTask | None = None
    params: dict[str, Any] | None = Field(
        default=None, description="A job with a named task: its new parameters (alone: the same task)."
    )
    tags: JobTags | None = Field(default=None, description="The job's tags, all of them (replaced).")
    schedule: Schedule | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    policy: JobPolicy | None = Field(
        default=None,
        description="Catch-up window, overlap, flexible window, run limit and pause after failures "
        "(defaults: none).",
    )
    notify: list[NotifyRule] | None = Field(
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

    note: Annotated[str | None, PLAIN_TEXT] = Field(
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
        "since); failed (could not be sent now: redrive it again)."
    )


class RedriveOut(BaseModel):
    items: list[RedriveItem]


class PreviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedule: Schedule
    count: Annotated[int, JSON_NUMBER] = Field(default=10, ge=1, le=50)


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
    description: Annotated[str, PLAIN_TEXT] = Field(default="", max_length=1000)
    tags: JobTags | None = None


class TaskPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str | None = Field(default=None, min_length=1, max_length=64)
    params: dict[str, Any] | None = Field(default=None, description="The new defaults, all of them.")
    params_schema: dict[str, Any] | bool | None = Field(default=None, description="Null removes it.")
    retry: RetryPolicy | None = Field(default=None, description="Null removes it (jobs use the default).")
    timeout_seconds: Annotated[int | None, JSON_NUMBER] = Field(default=None, ge=1, le=300)
    description: Annotated[str | None, PLAIN_TEXT] = Field(default=None, max_length=1000)
    tags: JobTags | None = None


class BulkFailure(BaseModel):
    id: str
    message: str


class BulkOut(BaseModel):
    changed: list[JobOut] = Field(description="The jobs this request paused (or resumed).")
    failed: list[BulkFailure] = Field(description="Matching jobs that could not be changed, and why.")
    next_cursor: str | None = Field(
        description="More matching jobs may follow: call again with it; null: done."
    )


def _iso(value: Any) -> str | None:
    return None if value is None else to_rfc3339(value)


def delivery_out(delivery: Delivery) -> DeliveryOut:
    return DeliveryOut(
        event=delivery.event,
        rule=delivery.rule,
        to=delivery.to,
        status=delivery.status,
        attempts=delivery.attempts,
        at=to_rfc3339(delivery.at),
        error=delivery.error,
        next_attempt_at=_iso(delivery.next_attempt_at),
    )


def execution_out(execution: Execution) -> ExecutionOut:
    return ExecutionOut(
        id=execution.id,
        job_id=execution.job_id,
        scheduled_at=to_rfc3339(execution.scheduled_at),
        status=execution.status,
        attempts=execution.attempts,
        manual=execution.manual,
        started_at=_iso(execution.started_at),
        finished_at=_iso(execution.finished_at),
        lateness_ms=execution.lateness_ms,
        error=execution.error,
        result=execution.result,
        next_attempt_at=_iso(execution.next_attempt_at),
        task_version=execution.task_version,
        retry_of=execution.retry_of,
        dead_lettered=execution.dead_lettered,
        notifications=[delivery_out(d) for d in execution.deliveries],
    )


def job_out(job: Job) -> JobOut:
    now = wiring.default().clock.now()
    return JobOut(
        id=job.id,
        name=job.name,
        status=job.status,
        task=job.task.name if isinstance(job.task, TaskRef) else job.task,
        params=job.task.params if isinstance(job.task, TaskRef) else None,
        tags=job.tags,
        schedule=job.schedule,  # type: ignore[arg-type]
        retry=None if "retry" in job.inherits else job.retry,
        timeout_seconds=None if "timeout_seconds" in job.inherits else job.timeout_seconds,
        policy=job.policy,
        next_run_at=_iso(job.upcoming_run(now)),
        created_at=to_rfc3339(job.created_at),
        updated_at=to_rfc3339(job.updated_at),
        last_execution=None if job.last_execution is None else execution_out(job.last_execution),
        outcome=None
        if job.outcome is None
        else OutcomeOut(
            status=job.outcome.status,
            at=to_rfc3339(job.outcome.at),
            execution_id=job.outcome.execution_id,
            consecutive_failures=job.outcome.consecutive_failures,
        ),
        notify=list(job.notify),
        signing=SigningOut(
            enabled=job.signing is not None,
            previous_valid_until=None
            if job.signing is None or job.signing.previous_until is None or job.signing.previous_until <= now
            else to_rfc3339(job.signing.previous_until),
        ),
        pause_note=job.pause_note,
        paused_at=_iso(job.paused_at),
    )


# ---------------------------------------------------------------- helpers
class Unauthorized(Exception):
    pass


def _owner() -> str:
    """The caller's IAM principal ARN, where API Gateway's IAM authorization puts it."""
    event = router.current_event
    owner = ""
    if isinstance(event, APIGatewayProxyEventV2):  # HTTP API: the IAM authorizer's caller
        owner = event.request_context.authorizer.iam.user_arn
    elif isinstance(event, APIGatewayProxyEvent):  # REST API
        identity = event.request_context.identity
        owner = identity.user_arn or identity.caller or ""
    if not owner:
        raise Unauthorized("no authenticated caller")
    return owner


def task_out(task: NamedTask) -> TaskOut:
    return TaskOut(
        name=task.name,
        type=task.type,
        params=task.params,
        params_schema=task.params_schema,
        retry=task.retry,
        timeout_seconds=task.timeout_seconds,
        description=task.description,
        tags=task.tags,
        version=task.version,
        created_at=to_rfc3339(task.created_at),
        updated_at=to_rfc3339(task.updated_at),
    )


def _job_task(task: TaskSpec | str, params: dict[str, Any] | None) -> TaskSpec | TaskRef:
    if isinstance(task, str):
        return TaskRef(name=task, params=params or {})
    if params is not None:
        raise InvalidRequest("params: an inline task takes its parameters in task.params", field="params")
    return task


def _tag_filter(tag: str | None) -> tuple[str, str | None] | None:
    if tag is None:
        return None
    try:
        return parse_tag_filter(tag)
    except ValueError as exc:
        raise InvalidRequest(str(exc), field="tag") from None


def _new_job(body: JobIn) -> NewJob:
    return NewJob(
        task=_job_task(body.task, body.params),
        tags=body.tags,
        schedule=body.schedule,
        name=body.name,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        policy=body.policy,
        notify=tuple(body.notify),
        signing_secret=body.signing_secret,
    )


IDEMPOTENCY_KEY_FIELD = "header idempotency-key"
# Fields whose bad values answer 400 rather than 422: not part of the body the client composed, but
# what it carries along (a cursor it was given, a key it made up), as API.md says of cursors.
_BAD_REQUEST_FIELDS = frozenset({"cursor", IDEMPOTENCY_KEY_FIELD})


def _idempotency_key(value: str | None) -> str | None:
    """The Idempotency-Key header's value. One sent empty is refused rather than read as none: the
    client meant its retries to be safe, and they would each create a job."""
    if value is not None and not value.strip():
        raise InvalidRequest(
            f"{IDEMPOTENCY_KEY_FIELD}: Idempotency-Key is empty: send a non-empty key (up to 200 "
            "characters), or no header at all",
            field=IDEMPOTENCY_KEY_FIELD,
        )
    return value


def _json(model: BaseModel, status: int = 200) -> Response[Any]:
    # The resolver validates the model against the route's declared response and serializes it.
    return Response(status_code=status, content_type="application/json", body=model)


def _error(status: int, message: str, **extra: Any) -> Response[Any]:
    body = ErrorOut(message=message, **extra)
    return Response(
        status_code=status, content_type="application/json", body=body.model_dump_json(exclude_none=True)
    )


_ERRORS = {
    400: {
        "description": "Bad input outside the body: an invalid cursor, an empty or over-long Idempotency-Key.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    401: {
        "description": "Missing or unknown credentials.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    404: {
        "description": "No such job (or task) for this owner.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    409: {
        "description": "Not possible in the job's state.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    415: {
        "description": "A body that is not JSON (send Content-Type: application/json).",
        "content": {"application/json": {"model": ErrorOut}},
    },
    422: {
        "description": "Invalid request, naming the field.",
        "content": {"application/json": {"model": ErrorOut}},
    },
    503: {
        "description": "The store is throttled; retry shortly (with the same Idempotency-Key).",
        "content": {"application/json": {"model": ErrorOut}},
    },
}


def _responses(status: int, model: type[BaseModel], description: str, *errors: int) -> dict[int, Any]:
    answer: dict[int, Any] = {
        status: {"description": description, "content": {"application/json": {"model": model}}}
    }
    for code in (401, 415, 422, *errors):
        answer[code] = _ERRORS[code]
    return answer


# ----------------------------------------------------------------- routes
@router.get("/health", include_in_schema=True, summary="Liveness", responses={200: {"description": "OK"}})
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/openapi.json", include_in_schema=False)
def openapi() -> Response[Any]:
    document = resolver_for(router.current_event.raw_event).get_openapi_json_schema()
    return Response(status_code=200, content_type="application/json", body=document)


@router.post("/jobs", summary="Create a job", responses=_responses(201, JobOut, "The job.", 400, 409))
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
    key = _idempotency_key(idempotency_key)
    job, _created = wiring.default().service.create(_owner(), _new_job(body), key)
    return _json(job_out(job), 201)


@router.post(
    "/jobs/batch",
    summary="Create 1 to 100 jobs in one request",
    description="Each job as for POST /jobs. All are validated before any is created: an invalid job "
    "answers 422 naming `jobs[i].<field>` and nothing is created. Answers the jobs in request order. "
    "On 503 some jobs may have been created: retry with the same Idempotency-Key.",
    responses=_responses(201, JobBatchOut, "The jobs, in request order.", 400, 409, 503),
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
    news = [_new_job(job) for job in body.jobs]
    jobs, _created = wiring.default().service.create_many(_owner(), news, _idempotency_key(idempotency_key))
    return _json(JobBatchOut(items=[job_out(job) for job in jobs]), 201)


@router.get(
    "/jobs",
    summary="List the caller's jobs, newest first",
    description=f"With a filter (`status`, `outcome`, `name_prefix`; together, all must match), one "
    f"request reads at most {LIST_READ_BUDGET} jobs: the page may be short, even empty, with a "
    "`next_cursor` to continue from. Only a null `next_cursor` means the end. A page costs a few "
    "reads however many jobs it shows: each job's `last_execution` is the one its `outcome` names.",
    responses=_responses(200, JobPage, "A page.", 400),
)
def list_jobs(
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    outcome: Annotated[
        OutcomeFilter | None,
        Query(description="Only jobs whose latest execution to run to its end SUCCEEDED (or FAILED)."),
    ] = None,
    name_prefix: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only jobs whose name starts so.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
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
    wanted = _tag_filter(tag)
    if task is not None:
        scope = f"jobs:task:{task}"
    elif outcome is None and name_prefix is None:  # (as before: cursors given out then stay valid)
        scope = f"jobs:{status.value if status else ''}" + (f":tag:{tag}" if tag is not None else "")
    else:
        scope = json.dumps(["jobs", status, outcome, name_prefix, tag])
    page = punctual.service.list_jobs(
        owner,
        status,
        limit,
        punctual.cursors.decode(cursor, owner=owner, scope=scope),
        tag=wanted,
        task=task,
        outcome=None if outcome is None else ExecutionStatus(outcome.value.upper()),
        name_prefix=name_prefix,
    )
    return _json(
        JobPage(
            items=[job_out(job) for job in page.items],
            next_cursor=punctual.cursors.encode(page.last_key, owner=owner, scope=scope),
        )
    )


@router.get("/jobs/<job_id>", summary="Get a job", responses=_responses(200, JobOut, "The job.", 404))
def get_job(job_id: str) -> Response[JobOut]:
    return _json(job_out(wiring.default().service.get(_owner(), job_id)))


@router.patch(
    "/jobs/<job_id>",
    summary="Change a job (rename, new task, reschedule, retry policy, timeout)",
    responses=_responses(200, JobOut, "The job.", 404, 409),
)
def update_job(job_id: str, body: Annotated[JobPatch, Body()]) -> Response[JobOut]:
    changes = JobChanges(
        name=body.name,
        task=body.task,
        params=body.params,
        tags=body.tags,
        schedule=body.schedule,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        policy=body.policy,
        notify=None if body.notify is None else tuple(body.notify),
        signing_secret=body.signing_secret if "signing_secret" in body.model_fields_set else UNCHANGED,
    )
    return _json(job_out(wiring.default().service.update(_owner(), job_id, changes)))


@router.delete(
    "/jobs/<job_id>",
    summary="Cancel a job: no execution of it that has not started will run",
    description="A job that changes while this request runs (its run ending, say) is read again and "
    "cancelled; 409 only if it kept changing through three attempts: retry.",
    responses=_responses(200, JobOut, "The cancelled job.", 404, 409),
)
def cancel_job(job_id: str) -> Response[JobOut]:
    return _json(job_out(wiring.default().service.cancel(_owner(), job_id)))


def _bulk(action: str, tag: str, limit: int, cursor: str | None) -> Response[BulkOut]:
    punctual, owner = wiring.default(), _owner()
    wanted = _tag_filter(tag)
    assert wanted is not None
    scope = f"bulk:{action}:{tag}"
    start = punctual.cursors.decode(cursor, owner=owner, scope=scope)
    service = punctual.service
    done: BulkChange = (service.pause_tagged if action == "pause" else service.resume_tagged)(
        owner, wanted, limit, start
    )
    return _json(
        BulkOut(
            changed=[job_out(job) for job in done.changed],
            failed=[BulkFailure(id=job_id, message=why) for job_id, why in done.failed],
            next_cursor=punctual.cursors.encode(done.last_key, owner=owner, scope=scope),
        )
    )


_BULK_TAG = Query(max_length=400, description="The jobs' tag: key:value, or key (any value).")
_BULK_LIMIT = Query(ge=1, le=100, description="At most this many jobs changed by this request.")


@router.post(
    "/jobs/pause",
    summary="Pause the ACTIVE jobs with a tag, a page at a time",
    description="Each job is paused as POST /jobs/{id}/pause would. One request changes at most `limit` "
    f"jobs and reads at most {LIST_READ_BUDGET}: call again with `next_cursor` until it is null.",
    responses=_responses(200, BulkOut, "What changed.", 400),
)
def pause_jobs(
    tag: Annotated[str, _BULK_TAG],
    limit: Annotated[int, _BULK_LIMIT] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[BulkOut]:
    return _bulk("pause", tag, limit, cursor)


@router.post(
    "/jobs/resume",
    summary="Resume the PAUSED jobs with a tag, a page at a time",
    description="Each job is resumed as POST /jobs/{id}/resume would (missed runs are not made up). "
    f"One request changes at most `limit` jobs and reads at most {LIST_READ_BUDGET}: call again with "
    "`next_cursor` until it is null.",
    responses=_responses(200, BulkOut, "What changed.", 400),
)
def resume_jobs(
    tag: Annotated[str, _BULK_TAG],
    limit: Annotated[int, _BULK_LIMIT] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[BulkOut]:
    return _bulk("resume", tag, limit, cursor)


@router.post(
    "/jobs/<job_id>/pause",
    summary="Pause a job, with a note saying why",
    description='The body is optional: `{"note": "..."}` is shown on the job (`pause_note`) until it is '
    "resumed. Pausing a PAUSED job again changes its note.",
    responses=_responses(200, JobOut, "The job.", 404, 409),
)
def pause_job(job_id: str, body: Annotated[PauseIn | None, Body()] = None) -> Response[JobOut]:
    note = None if body is None else body.note
    return _json(job_out(wiring.default().service.pause(_owner(), job_id, note)))


@router.post(
    "/jobs/<job_id>/resume",
    summary="Resume a job; occurrences missed while paused are not run",
    responses=_responses(200, JobOut, "The job.", 404, 409),
)
def resume_job(job_id: str) -> Response[JobOut]:
    return _json(job_out(wiring.default().service.resume(_owner(), job_id)))


@router.post(
    "/jobs/<job_id>/run",
    summary="One extra execution now",
    responses=_responses(202, ExecutionOut, "The execution, queued.", 404, 409),
)
def run_job(job_id: str) -> Response[ExecutionOut]:
    return _json(execution_out(wiring.default().service.run_now(_owner(), job_id)), 202)


@router.get(
    "/jobs/<job_id>/executions",
    summary="A job's executions, newest first",
    responses=_responses(200, ExecutionPage, "A page.", 400, 404),
)
def list_executions(
    job_id: str,
    status: Annotated[ExecutionStatus | None, Query(description="Only executions in this status.")] = None,
    since: Annotated[
        str | None,
        Query(max_length=64, description="Only executions scheduled at or after this instant (RFC 3339)."),
    ] = None,
    until: Annotated[
        str | None,
        Query(max_length=64, description="Only executions scheduled before this instant (RFC 3339)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[ExecutionPage]:
    punctual, owner = wiring.default(), _owner()
    scope = f"executions:{job_id}"
    if status is not None or since is not None or until is not None:
        scope = json.dumps(["executions", job_id, status, since, until])
    start = punctual.cursors.decode(cursor, owner=owner, scope=scope)
    page = punctual.service.executions(
        owner,
        job_id,
        limit,
        start,
        status=status,
        since=_instant(since, "since"),
        until=_instant(until, "until"),
    )
    return _json(
        ExecutionPage(
            items=[execution_out(e) for e in page.items],
            next_cursor=punctual.cursors.encode(page.last_key, owner=owner, scope=scope),
        )
    )


@router.post(
    "/jobs/<job_id>/executions/<execution_id>/retry",
    summary="Run a finished execution that did not succeed once more, now",
    description="A new extra execution of the job's current task (with a new id, which receivers see as "
    "X-Punctual-Execution-Id), naming the one it retries in `retry_of`. For a FAILED, SKIPPED or "
    "CANCELLED execution; 409 for one still under way or SUCCEEDED, and on a PAUSED or CANCELLED job.",
    responses=_responses(202, ExecutionOut, "The new execution, queued.", 404, 409),
)
def retry_execution(job_id: str, execution_id: str) -> Response[ExecutionOut]:
    return _json(execution_out(wiring.default().service.retry(_owner(), job_id, execution_id)), 202)


@router.get(
    "/dead-letters",
    summary="Your executions that were dead-lettered, to redrive",
    description="An execution whose message exhausted its deliveries ends FAILED (`dead_lettered`) and is "
    "listed here until it is redriven or its history expires.",
    responses=_responses(200, DeadLetterPage, "A page.", 400),
)
def list_dead_letters(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response[DeadLetterPage]:
    punctual, owner = wiring.default(), _owner()
    start = punctual.cursors.decode(cursor, owner=owner, scope="dead-letters")
    page = punctual.dead_letters.page(owner, limit, start)
    jobs = punctual.store.jobs.get_many({letter.job_id for letter in page.items}).readable()
    items = [
        DeadLetterOut(
            execution_id=letter.execution_id,
            job_id=letter.job_id,
            job_name=jobs[letter.job_id].name if letter.job_id in jobs else None,
            scheduled_at=to_rfc3339(letter.scheduled_at),
            dead_lettered_at=to_rfc3339(letter.dead_lettered_at),
            error=letter.error,
        )
        for letter in page.items
    ]
    next_cursor = punctual.cursors.encode(page.last_key, owner=owner, scope="dead-letters")
    return _json(DeadLetterPage(items=items, next_cursor=next_cursor))


@router.post(
    "/dead-letters/redrive",
    summary="Run dead-lettered executions again",
    description="Each is put back to QUEUED and its message sent again: the same execution (the same "
    "X-Punctual-Execution-Id), its attempts so far counted. Answers what became of each, in order.",
    responses=_responses(200, RedriveOut, "What became of each."),
)
def redrive_dead_letters(body: Annotated[RedriveIn, Body()]) -> Response[RedriveOut]:
    results = wiring.default().dead_letters.redrive(_owner(), list(dict.fromkeys(body.execution_ids)))
    return _json(
        RedriveOut(items=[RedriveItem(execution_id=r.execution_id, result=r.result) for r in results])
    )


@router.post(
    "/schedules/preview",
    summary="The next run times of a schedule, without creating anything",
    responses=_responses(200, PreviewOut, "Run times, UTC and on the schedule's wall clock."),
)
def preview_schedule(body: Annotated[PreviewIn, Body()]) -> Response[PreviewOut]:
    _owner()
    runs = wiring.default().service.preview(body.schedule, body.count)
    shown = []
    for run in runs:
        local, dst = local_note(body.schedule, run)
        shown.append(PreviewRun(at=to_rfc3339(run), local=local.isoformat(timespec="seconds"), dst=dst))
    return _json(PreviewOut(next_runs=[to_rfc3339(r) for r in runs], runs=shown))


@router.get(
    "/tasks",
    summary="The built-in task types, and a page of your named tasks",
    responses=_responses(200, TaskTypesOut, "Types and your tasks.", 400),
)
def list_task_types(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
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
        owner, limit, punctual.cursors.decode(cursor, owner=owner, scope=scope), _tag_filter(tag)
    )
    return _json(
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
    responses=_responses(201, TaskOut, "The task, version 1.", 409),
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
    return _json(task_out(task), 201)


@router.get("/tasks/<name>", summary="Get a named task", responses=_responses(200, TaskOut, "The task.", 404))
def get_task(name: str) -> Response[TaskOut]:
    return _json(task_out(wiring.default().tasks.get(_owner(), name)))


@router.patch(
    "/tasks/<name>",
    summary="Change a named task (its next version): every job using it runs the change from its next execution",
    description="Fields given replace the task's (null removes params_schema, retry, timeout_seconds); its "
    "version goes up by one. Jobs' params are not checked again against a new params_schema: a job whose "
    "params no longer fit fails its next execution, saying why.",
    responses=_responses(200, TaskOut, "The task.", 404, 409),
)
def update_task(name: str, body: Annotated[TaskPatch, Body()]) -> Response[TaskOut]:
    changes = TaskChanges(
        given=frozenset(body.model_fields_set),
        type=body.type,
        params=body.params,
        params_schema=body.params_schema,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        description=body.description,
        tags=body.tags,
    )
    return _json(task_out(wiring.default().tasks.update(_owner(), name, changes)))


@router.delete(
    "/tasks/<name>",
    summary="Delete a named task that no ACTIVE or PAUSED job uses",
    description=f"409 if jobs use it, with their count (counted up to {IN_USE_COUNT_LIMIT:,}): "
    "GET /jobs?task={name} lists them.",
    responses=_responses(200, TaskOut, "The deleted task.", 404, 409),
)
def delete_task(name: str) -> Response[TaskOut]:
    return _json(task_out(wiring.default().tasks.delete(_owner(), name)))


# ----------------------------------------------------------------- errors
@router.exception_handler(RequestValidationError)
def _invalid(exc: RequestValidationError) -> Response[Any]:
    errors = [_plain_error(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    message = f"{first['field']}: {first['message']}" if first["field"] else str(first["message"])
    # (a cursor too long to be one is as bad as an altered one: 400, as API.md says of those)
    status = 400 if first["field"] in _BAD_REQUEST_FIELDS else 422
    return _error(status, message, field=first["field"], errors=errors)


@router.exception_handler(UnicodeDecodeError)
def _not_utf8(exc: UnicodeDecodeError) -> Response[Any]:
    # Powertools decodes a base64 body as UTF-8 before parsing it as JSON; other bytes raise here.
    return _error(422, "body: request body is not valid JSON (not UTF-8)", field="body")


@router.exception_handler(InvalidRequest)
def _invalid_domain(exc: InvalidRequest) -> Response[Any]:
    status = 400 if exc.field in _BAD_REQUEST_FIELDS else 422
    return _error(status, str(exc), field=exc.field)


@router.exception_handler(NotFound)
def _not_found(exc: NotFound) -> Response[Any]:
    return _error(404, str(exc))


@router.exception_handler(Conflict)
def _conflict(exc: Conflict) -> Response[Any]:
    return _error(409, str(exc))


@router.exception_handler(Unauthorized)
def _unauthorized(exc: Unauthorized) -> Response[Any]:
    return _error(401, str(exc))


@router.exception_handler(RetryableStoreError)
def _busy(exc: RetryableStoreError) -> Response[Any]:
    logger.warning("store throttled", extra={"error": str(exc)})
    return _error(503, "busy; retry shortly")


@router.exception_handler(ServiceError)
def _service_error(exc: ServiceError) -> Response[Any]:
    return _error(exc.status_code, str(exc.msg))


@router.exception_handler(NotFoundError)  # what a resolver's `not_found` registers
def _no_route(exc: Exception) -> Response[Any]:
    event = router.current_event
    return _error(404, f"no such endpoint: {event.http_method} {event.path}")


_LOCATIONS: dict[str, str] = {"body": "", "query": "", "header": "header ", "path": ""}


def _plain_error(error: dict[str, Any]) -> dict[str, Any]:
    """A pydantic error as {field, message}, with the field as a path into the request:
    `schedule.expression`, `jobs[3].task.type`."""
    loc = list(error.get("loc", ()))
    prefix = ""
    if loc and loc[0] in _LOCATIONS:
        prefix = _LOCATIONS[str(loc[0])]
        loc = loc[1:]
    # Drop pydantic's names for union members: "schedule.cron.expression" -> "schedule.expression".
    path: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int) and path:
            path[-1] += f"[{part}]"
            continue
        part = str(part)
        if part.startswith("function-") or (i > 0 and loc[i - 1] == "schedule" and part in _UNION_TAGS):
            continue
        if i > 0 and loc[i - 1] == "task" and part in ("inline", "named"):
            continue
        path.append(part)
    if path and path[0] == "body":
        path = path[1:]
    field = prefix + ".".join(path) if path else None
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "value_error":
        message = message.removeprefix("Value error, ")  # pydantic's, for a validator's ValueError
    if error.get("type") == "json_invalid":
        why = (error.get("ctx") or {}).get("error")
        field, message = "body", "request body is not valid JSON" + (f" ({why})" if why else "")
    elif field is None and prefix == "":
        field = "body"  # the body as a whole: missing, null, or not an object
    return {"field": field, "message": message, "type": error.get("type")}


_UNION_TAGS: frozenset[str] = frozenset({"now", "at", "in", "cron", "rate"})


def _instant(value: str | None, field: str) -> datetime | None:
    """A query parameter's RFC 3339 instant (422 naming it otherwise)."""
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise InvalidRequest(f"{field}: {exc}", field=field) from None


# ---------------------------------------------------------------- request bodies
# A request body nests at most this deep (a task's parameters, inside it, at most 32 levels).
MAX_BODY_DEPTH = 64


def _strict_json(text: str) -> Any:
    """A request body parsed as JSON, refusing (as JSONDecodeError, which the resolver answers 422)
    what `json.loads` lets through but no store can keep (`json_problem`: nesting past MAX_BODY_DEPTH,
    numbers no float holds, unpaired surrogates; and NaN and Infinity), an object that repeats a key
    (`json.loads` keeps the last, silently: which one the client meant is anyone's guess, and other
    parsers keep the first), and what it raises instead of JSONDecodeError: nesting past the
    interpreter's recursion limit, an integer thousands of digits long."""
    try:
        value = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {MAX_BODY_DEPTH} levels", text, 0) from None
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from None
    problem = json_problem(value, MAX_BODY_DEPTH)
    if problem is not None:
        raise json.JSONDecodeError(problem, text, 0)
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict; ValueError (a 422 naming the key) if one key comes twice."""
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {json.dumps(key[:100])} appears more than once in one object")
            seen.add(key)
    return value


JSON_MEDIA_TYPE = "application/json"


def _media_type(event: Mapping[str, Any]) -> str | None:
    """The Content-Type's media type, lower case, without parameters; None when there is none."""
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "content-type" and value:
            return str(value).split(";")[0].strip().lower()
    return None


def _reads_a_body(event: Mapping[str, Any]) -> bool:
    """Whether the request goes to a route that reads its body: POST /jobs, /jobs/batch, /tasks,
    /schedules/preview, /jobs/{id}/pause (optional) and /dead-letters/redrive, PATCH /jobs/{id} and
    /tasks/{name}. (Others ignore a body, whatever its type, as they always did.) The path may carry a
    stage (`/v1/jobs`)."""
    method = event.get("httpMethod") or (event.get("requestContext") or {}).get("http", {}).get("method")
    path = _path(event)
    if str(method).upper() == "PATCH":
        return True
    return str(method).upper() == "POST" and path.endswith(
        ("/jobs", "/jobs/batch", "/schedules/preview", "/tasks", "/pause", "/dead-letters/redrive")
    )


# Routes whose body is optional, and which ignored any body before they read one (`curl -d` sends a
# form): a body that is not JSON is dropped, not refused.
_OPTIONAL_BODY_ROUTES = ("/pause",)


def _path(event: Mapping[str, Any]) -> str:
    return str(event.get("rawPath") or event.get("path") or "").rstrip("/")


def _refuse_non_json(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """415 for a body that is not JSON (API.md: JSON in and out; the resolver would parse forms too).
    A body without a Content-Type is read as JSON."""
    media_type = _media_type(event)
    if not event.get("body") or media_type in (None, JSON_MEDIA_TYPE) or not _reads_a_body(event):
        return None
    if _path(event).endswith(_OPTIONAL_BODY_ROUTES):
        return None
    body = ErrorOut(
        message=f"Content-Type {media_type} is not supported: send JSON, with Content-Type: {JSON_MEDIA_TYPE}",
        field="header content-type",
    )
    return {
        "statusCode": 415,
        "headers": {"Content-Type": JSON_MEDIA_TYPE},
        "body": body.model_dump_json(exclude_none=True),
        "isBase64Encoded": False,
    }


def _with_json_media_type(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event with its Content-Type's media type in lower case, as the resolver compares it (media
    types ignore case: `Application/JSON` is JSON too)."""

    def lowered(value: str) -> str:
        media_type, sep, parameters = value.partition(";")
        return media_type.strip().lower() + sep + parameters

    def spelt(headers: Mapping[str, Any]) -> dict[str, Any]:
        return {
            name: (
                ([lowered(str(v)) for v in value] if isinstance(value, list) else lowered(str(value)))
                if name.lower() == "content-type" and value
                else value
            )
            for name, value in headers.items()
        }

    fixed = {**event, "headers": spelt(event.get("headers") or {})}
    if event.get("multiValueHeaders"):
        fixed["multiValueHeaders"] = spelt(event["multiValueHeaders"])
    return fixed


# ---------------------------------------------------------------- resolvers
def _resolver(resolver: ApiGatewayResolver) -> ApiGatewayResolver:
    resolver.configure_openapi(
        title="Punctual",
        version="1.0.0",
        summary="A serverless job scheduler: on time, at least once.",
        description=API_DESCRIPTION,
    )
    resolver.include_router(router)
    return resolver


_request = threading.local()


class _PerThread(ApiGatewayResolver):
    """A resolver whose request state (the event, the Lambda context, the routing context) belongs to
    the calling thread. Powertools keeps the event at class level (`BaseRouter.current_event`) and the
    routing context on the resolver, which is right for Lambda (one request per container at a time)
    but not for the local stack, which answers requests side by side in threads of one process."""

    @property
    def current_event(self) -> Any:
        return _request.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        _request.event = value

    @property
    def lambda_context(self) -> Any:
        return _request.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        _request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(_request, "context"):
            _request.context = {}
        return _request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        _request.context = value

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        # (Powertools sets its class-level copy too; this resolver and its router read this one.)
        _request.event = self._to_proxy_event(event)
        _request.lambda_context = context
        return super().resolve(event, context)


class _RestResolver(_PerThread, APIGatewayRestResolver):
    pass


class _HttpResolver(_PerThread, APIGatewayHttpResolver):
    pass


rest_app = _resolver(_RestResolver(enable_validation=True, json_body_deserializer=_strict_json))
http_app = _resolver(_HttpResolver(enable_validation=True, json_body_deserializer=_strict_json))


def resolver_for(event: Mapping[str, Any]) -> ApiGatewayResolver:
    """The resolver of an event's payload format: 2.0 from an HTTP API, 1.0 from a REST API (which
    carries no version) or an HTTP API configured for 1.0."""
    return http_app if event.get("version") == "2.0" else rest_app


def resolve(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer an API Gateway proxy event of either payload format."""
    refused = _refuse_non_json(event)
    if refused is not None:
        return refused
    media_type = _media_type(event)
    if (
        event.get("body")
        and media_type not in (None, JSON_MEDIA_TYPE)
        and _path(event).endswith(_OPTIONAL_BODY_ROUTES)
    ):
        event = {**event, "body": None, "isBase64Encoded": False}
    return resolver_for(event).resolve(_with_json_media_type(event), context)
