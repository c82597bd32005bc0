"""The two resolvers (API Gateway HTTP APIs send payload format 2.0, REST APIs 1.0) with every
route, the OpenAPI document they serve, and `resolve`, which answers an event of either format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Router
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual import __version__
from punctual.api import bodies, errors, inputs
from punctual.api.routes import ROUTERS
from punctual.platform import collector
from punctual.ports.pages import LIST_READ_BUDGET

# Health and the OpenAPI document; the resources' routes are in routes/, the error handlers in errors.py.
router = Router()

API_DESCRIPTION = """\
Punctual schedules jobs: a task (call a webhook, …) with a schedule (now, at an instant, cron in a
time zone, or a fixed rate). Every execution runs at least once; duplicates carry the same
X-Punctual-Execution-Id so receivers can make them harmless.
The contract, for client authors: docs/api.md in Punctual's repository (this document follows it).

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
  skipped (CANCELLED, or SKIPPED by its policy); while it waits in the queue, the job's
  `next_run_at` shows it. (Storing it as QUEUED first would cost one more write per execution.)
  An extra run (POST /jobs/{id}/run) is listed at once, as QUEUED.
- A COMPLETED or CANCELLED job expires with its execution history, `retention_days` (default 30)
  after it finished; active and paused jobs are kept.
- An Idempotency-Key has 1 to 200 printable ASCII characters (U+0020-U+007E) but the comma, in
  one header (two are refused, 400: joined by a comma, they would read as one key): one sent empty (or
  blank) is refused (400), not read as no key, since the retries it was meant to make safe would
  each create a job; so is one holding a control character or a byte beyond ASCII (400).
- A query parameter the route does not take is refused (422 naming it): a misspelt filter
  (`?stauts=`) would otherwise list everything.
- `?limit=` is written in digits alone (`1.0`, `+5`, `5_0` are refused, 422); an empty `?cursor=` is
  refused (400), not read as the first page; a control character in a text filter (`name_prefix`,
  `tag`, `task`) is refused (422).
- null is taken only where an answer shows it (a job's `params`, `retry`, `timeout_seconds`,
  `signing_secret`, `schedule.start_at`/`end_at`, the policy's optional limits; a task's
  `params_schema`, `retry`, `timeout_seconds`); elsewhere (`name`, `tags`, `policy`, `notify`,
  `count`, a PATCH's other fields) it is refused (422): leave the field out instead.
- A recurring schedule's runs end before 2200-01-01T00:00:00Z, the bound of every instant in a
  request (`since` and `until` too).
- Idempotency keys are remembered for 24 hours. A retry with the same key and body answers the
  job(s) the first request created even once its schedule is no longer valid (its instant has
  passed); if that request stored only some of them (it failed part way), such a retry answers 409.
- Bodies are JSON: a route that reads one (POST /jobs, /jobs/batch, /schedules/preview, PATCH)
  answers 415 to another Content-Type (media types ignore case; none at all is read as JSON). A
  body is one JSON object: an array is refused (422, field `body`), not read as its first element.
  What JSON allows but no store keeps is refused (422, field `body`): nesting deeper than 64 levels,
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
  nothing created; every job's shape is checked before any job's parameters. Its body takes at most
  3 MiB (413, unread), and a batch whose answer would pass 5,000,000 bytes is refused (413) before
  anything is stored. An Idempotency-Key covers the whole batch (body and order); reusing a key of
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
  annotation. Validation of one job's params takes at most 80,000 steps of bounded cost (422 beyond).
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
    "- A page of jobs or named tasks also stops early once its items take 3,500,000 bytes (Lambda\n"
    "  answers at most 6 MiB): a short page with a cursor.\n"
)


@router.get("/health", include_in_schema=True, summary="Liveness", responses={200: {"description": "OK"}})
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/openapi.json", include_in_schema=False)
def openapi() -> Response[Any]:
    document = resolver_for(router.current_event.raw_event).get_openapi_json_schema()
    return Response(status_code=200, content_type="application/json", body=document)


def _resolver(resolver: ApiGatewayResolver) -> ApiGatewayResolver:
    resolver.configure_openapi(
        title="Punctual",
        version=__version__,  # one version: the package's, which `punctual --version` prints
        summary="A serverless job scheduler: on time, at least once.",
        description=API_DESCRIPTION,
    )
    for included in (router, *ROUTERS, errors.router):
        resolver.include_router(included)
    resolver.use(middlewares=[errors.refuse_other_methods_on_fixed_paths, inputs.refuse_unknown_query])
    return resolver


rest_app = _resolver(
    APIGatewayRestResolver(enable_validation=True, json_body_deserializer=bodies.strict_json)
)
http_app = _resolver(
    APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=bodies.strict_json)
)
errors.know_routes(http_app)


def resolver_for(event: Mapping[str, Any]) -> ApiGatewayResolver:
    """The resolver of an event's payload format: 2.0 from an HTTP API, 1.0 from a REST API (which
    carries no version) or an HTTP API configured for 1.0."""
    return http_app if event.get("version") == "2.0" else rest_app


def resolve(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer an API Gateway proxy event of either payload format."""
    refused = (
        bodies.refuse_oversized(event)
        or bodies.refuse_non_json(event)
        or inputs.repeated_idempotency_key(event)
        or inputs.repeated_query_parameter(event)
    )
    if refused is not None:
        return refused
    event = bodies.without_foreign_body(event)
    with collector.paused():
        return resolver_for(event).resolve(bodies.with_json_media_type(event), context)
