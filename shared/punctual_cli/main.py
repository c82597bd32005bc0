"""`punctual`: the command-line client of Punctual's HTTP API (docs/api.md).

Exit codes: 0 ok, 1 the API answered an error (4xx/5xx), 2 usage error, 3 the endpoint is unreachable.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from punctual import __version__
from punctual.platform import aws_limits as sizing
from punctual.platform.timefmt import parse_rfc3339
from punctual_cli import capacity, common, completion, connect, display, ids, suggest
from punctual_cli import formatting as cli_format
from punctual_cli import monitoring as cli_monitoring
from punctual_cli import watch as cli_watch
from punctual_cli.common import UsageError, parse_duration, positive_int
from punctual_cli.views import executions as execution_views
from punctual_cli.views import jobs as job_views
from punctual_cli.views import tasks as task_views
from punctual_client import profiles
from punctual_client.endpoints import is_loopback, scheme_hint
from punctual_client.errors import ApiError, ConfigurationError, ConnectionFailed
from punctual_client.transport import JsonObject, PunctualClient

EXIT_OK = 0
EXIT_FAILURE = 1  # the API answered 4xx/5xx, a watch gave up, no local stack
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_INTERRUPTED = 130

JOB_STATUSES = ("ACTIVE", "PAUSED", "CANCELLED", "COMPLETED")
# The built-in task types: any other --task names one of your named tasks (whose names never clash).
BUILTIN_TYPES = ("http", "lambda", "sqs", "sns", "eventbridge", "stepfunctions", "noop", "sleep", "fail")
MAX_BATCH_JOBS = 100  # POST /jobs/batch
MIN_EVERY_SECONDS = 60  # a rate schedule's shortest period (schedule.every_seconds)
DEFAULT_UTILISATION = 70  # `capacity --provisioned`: as infra/settings.py deploys

Handler = Callable[[PunctualClient, argparse.Namespace], int]
OptionAdder = Callable[[argparse.ArgumentParser], None]


# -- friendly forms ----------------------------------------------------------------------------------


def check_timestamp(text: str, flag: str) -> str:
    """An RFC 3339 timestamp with an offset, passed on as written."""
    try:
        parse_rfc3339(text)
    except ValueError as exc:
        # (the parser's message gives its own example)
        example = "" if "e.g." in str(exc) else " (e.g. 2026-12-01T10:00:00+01:00)"
        raise UsageError(f"{flag}: {exc}{example}") from None
    return text.strip()


def parse_json(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag} must be JSON: {exc}") from None


def parse_pair(text: str, flag: str, separator: str = "=") -> tuple[str, str]:
    key, sep, value = text.partition(separator)
    if not sep or not key.strip():
        raise UsageError(f"{flag} takes KEY{separator}VALUE, got {text!r}")
    return key.strip(), value


def build_schedule(args: argparse.Namespace, *, default_now: bool) -> JsonObject | None:
    """The API schedule from --now/--at/--in/--cron/--every (+ --tz, --start-at, --end-at)."""
    window = {
        key: check_timestamp(value, flag)
        for key, value, flag in (
            ("start_at", args.start_at, "--start-at"),
            ("end_at", args.end_at, "--end-at"),
        )
        if value is not None
    }
    if args.tz is not None and args.cron is None:
        raise UsageError("--tz applies to --cron only")
    schedule: JsonObject
    if args.cron is not None:
        schedule = {"type": "cron", "expression": args.cron}
        if args.tz is not None:
            schedule["timezone"] = display.check_zone(args.tz, "--tz")
        return schedule | window
    if args.every is not None:
        every = parse_duration(args.every)
        if every < MIN_EVERY_SECONDS:
            raise UsageError(
                f"--every takes at least 1m, not {args.every} (one run {args.every} from now: --in {args.every})"
            )
        return {"type": "rate", "every_seconds": every} | window
    if window:
        raise UsageError("--start-at and --end-at apply to --cron or --every only")
    if args.at is not None:
        return {"type": "at", "at": check_timestamp(args.at, "--at")}
    if args.in_ is not None:
        # Taken by the API when the request arrives: a retry with the same Idempotency-Key sends the same
        # body (an instant computed here would differ), and this machine's clock does not matter.
        return {"type": "in", "seconds": parse_duration(args.in_)}
    if args.now or default_now:
        return {"type": "now"}
    return None


def _task_flags_given(args: argparse.Namespace) -> bool:
    flags = (args.url, args.method, args.body, args.seconds, args.params)
    return any(flag is not None for flag in flags) or bool(args.header or args.param)


def build_params(args: argparse.Namespace) -> JsonObject:
    """Parameters from --params JSON, then --param k=v (a value that is not JSON is text)."""
    params: JsonObject = {}
    if getattr(args, "params", None) is not None:
        given = parse_json(args.params, "--params")
        if not isinstance(given, dict):
            raise UsageError("--params must be a JSON object")
        params.update(given)
    for item in getattr(args, "param", None) or []:
        key, raw = parse_pair(item, "--param")
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw  # not JSON: a plain string
    return params


def tag_filter(text: str) -> str:
    """A tag filter as given, `KEY=VALUE` (as --tag on create) or `KEY`, in the API's `key:value` form.

    The `KEY:VALUE` of earlier versions is taken too: a tag key holds no colon, so a colon before any
    `=` can only be that form.
    """
    key, eq, value = text.partition("=")
    if ":" in key or not eq:
        return text
    if not key.strip():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE or KEY, got {text!r}")
    return f"{key.strip()}:{value}"


def build_tags(items: Sequence[str]) -> JsonObject:
    return dict(parse_pair(item, "--tag") for item in items)


def named_task(args: argparse.Namespace) -> str | None:
    """The named task --task names (not a built-in type), or None."""
    task = getattr(args, "task", None)
    return task if task is not None and task not in BUILTIN_TYPES else None


def build_task(args: argparse.Namespace, current: Mapping[str, Any] | None = None) -> JsonObject | None:
    """The API task from --task and its parameters.

    Without --task, parameters change the `current` task (a job being updated) and keep the rest.
    Precedence: --params, then --param k=v, then the specific flags (--url, --seconds, ...).
    """
    if args.task is None and not _task_flags_given(args):
        return None
    kind = args.task or (current or {}).get("type") or ("http" if args.url is not None else None)
    if not kind:
        raise UsageError("--task is required: http, lambda, noop, sleep, fail (see `punctual tasks`)")
    base: JsonObject = {} if args.task or not current else dict(current.get("params") or {})

    params: JsonObject = {}
    if args.params is not None:
        given = parse_json(args.params, "--params")
        if not isinstance(given, dict):
            raise UsageError("--params must be a JSON object")
        params.update(given)
    for item in args.param:
        key, raw = parse_pair(item, "--param")
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw  # not JSON: a plain string

    http_flags = (args.url, args.method, args.body)
    if (any(flag is not None for flag in http_flags) or args.header) and kind != "http":
        raise UsageError("--url, --method, --header and --body apply to --task http only")
    if args.url is not None:
        hint = scheme_hint(args.url)
        if hint:
            raise UsageError(f"--url {args.url!r} has no scheme{hint}")
        params["url"] = args.url
    if args.method is not None:
        params["method"] = args.method.upper()
    if args.header:
        headers = dict(base.get("headers") or {}) | dict(params.get("headers") or {})
        headers.update(parse_pair(item, "--header") for item in args.header)
        params["headers"] = headers
    if args.body is not None:
        params["body"] = parse_json(args.body, "--body")
    if args.seconds is not None:
        if kind != "sleep":
            raise UsageError("--seconds applies to --task sleep only")
        params["seconds"] = int(args.seconds) if args.seconds.is_integer() else args.seconds
    return {"type": kind, "params": base | params}


def build_retry(args: argparse.Namespace) -> JsonObject:
    retry: JsonObject = {}
    if args.max_attempts is not None:
        retry["max_attempts"] = args.max_attempts
    if args.backoff is not None:
        retry["backoff_seconds"] = parse_duration(args.backoff)
    if args.max_backoff is not None:
        retry["max_backoff_seconds"] = parse_duration(args.max_backoff)
    return retry


def build_policy(args: argparse.Namespace) -> JsonObject:
    policy: JsonObject = {}
    if args.max_lateness is not None:
        policy["max_lateness_seconds"] = parse_duration(args.max_lateness)
    if args.overlap is not None:
        policy["overlap"] = args.overlap
    if args.flexible_window is not None:
        policy["flexible_window_seconds"] = parse_duration(args.flexible_window)
    if args.max_runs is not None:
        policy["max_runs"] = args.max_runs
    return policy


# -- output ------------------------------------------------------------------------------------------


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def show(value: Any, args: argparse.Namespace, render: Callable[[Any], str]) -> None:
    if getattr(args, "quiet", False):
        cli_monitoring.print_ids([value])
    elif args.json:
        emit_json(value)
    else:
        print(render(value))


def _job_row(job: JsonObject) -> str:
    return job_views.jobs_table([job])


def show_page(
    page: JsonObject, args: argparse.Namespace, render: Callable[[list[Any]], str], noun: str
) -> None:
    if getattr(args, "quiet", False):
        cli_monitoring.print_ids(page.get("items") or [])
        return
    if args.json:
        emit_json(page)
        return
    items = page.get("items") or []
    print(render(items) if items else f"no {noun}")
    if page.get("next_cursor"):
        print(more_hint(noun), file=sys.stderr)


def more_hint(noun: str) -> str:
    """What to do for the rest of a list: the cursor itself (hundreds of characters) is in --json."""
    return f"(more {noun}: --all, or --cursor NEXT_CURSOR from --json)"


def print_api_error(exc: ApiError, args: argparse.Namespace | None = None) -> None:
    print(f"punctual: error: {exc.message} (HTTP {exc.status})", file=sys.stderr)
    for line in exc.details:
        if line != exc.message:  # a single problem is usually the message itself
            print(f"  - {line}", file=sys.stderr)
    for hint in api_error_hints(exc, args):
        print(f"  {hint}", file=sys.stderr)


def api_error_hints(exc: ApiError, args: argparse.Namespace | None) -> list[str]:
    """What to do about an API error, in this CLI's words rather than HTTP's."""
    hints = []
    if exc.status in (401, 403) and args is not None:
        hints.append(
            "give your token with --token TOKEN or PUNCTUAL_TOKEN (the local stack's tokens are its "
            "PUNCTUAL_LOCAL_TOKENS); a deployed API takes AWS credentials (AWS_PROFILE, or a profile's "
            "aws_profile)"
        )
    field = exc.body.get("field") if isinstance(exc.body, dict) else None
    name = named_task(args) if args is not None and hasattr(args, "task") else None
    if name is not None and field == "task":
        close = suggest.did_you_mean(name, BUILTIN_TYPES)
        hints.append(
            f"--task {name} is neither a task type nor one of your named tasks{close} "
            f"(`punctual tasks` lists both; `punctual tasks create {name} --type TYPE` defines it)"
        )
    return hints


# -- commands ----------------------------------------------------------------------------------------


def _named_task_body(args: argparse.Namespace, name: str) -> JsonObject:
    if any(flag is not None for flag in (args.url, args.method, args.body, args.seconds)) or args.header:
        raise UsageError(f"--task {name} is a named task: give its parameters with --param or --params")
    return {"task": name, "params": build_params(args)}


def cmd_jobs_create(client: PunctualClient, args: argparse.Namespace) -> int:
    schedule = build_schedule(args, default_now=True)
    name = named_task(args)
    if name is not None:
        body: JsonObject = {**_named_task_body(args, name), "schedule": schedule}
    else:
        task = build_task(args)
        if task is None:
            raise UsageError("--task is required: a type (see `punctual tasks`) or one of your named tasks")
        body = {"task": task, "schedule": schedule}
    if args.tag:
        body["tags"] = build_tags(args.tag)
    if args.name is not None:
        body["name"] = args.name
    if retry := build_retry(args):
        body["retry"] = retry
    if args.timeout is not None:
        body["timeout_seconds"] = parse_duration(args.timeout)
    if policy := build_policy(args) | cli_monitoring.policy_fields(args):
        body["policy"] = policy
    body.update(cli_monitoring.job_fields(args))
    job = client.create_job(body, idempotency_key=args.idempotency_key)
    show(job, args, job_views.job_details)
    return EXIT_OK


def read_batch(path: str) -> list[JsonObject]:
    """The jobs of a batch file (`-`: standard input): `{"jobs": [...]}` or a bare list of jobs."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    data = parse_json(text, path)
    jobs = data.get("jobs") if isinstance(data, dict) else data
    if not isinstance(jobs, list) or not all(isinstance(job, dict) for job in jobs):
        raise UsageError(f'{path}: expected {{"jobs": [<job>, ...]}} or a list of jobs (JSON objects)')
    if not 1 <= len(jobs) <= MAX_BATCH_JOBS:
        raise UsageError(f"{path}: a batch holds 1 to {MAX_BATCH_JOBS} jobs, this one {len(jobs)}")
    return jobs


def cmd_jobs_create_batch(client: PunctualClient, args: argparse.Namespace) -> int:
    jobs = client.create_jobs(read_batch(args.file), idempotency_key=args.idempotency_key)
    if args.quiet:
        cli_monitoring.print_ids(jobs)
    elif args.json:
        emit_json({"items": jobs})
    else:
        print(job_views.jobs_table(jobs))
    return EXIT_OK


def cmd_jobs_update(client: PunctualClient, args: argparse.Namespace) -> int:
    current: JsonObject | None = None

    def current_job() -> JsonObject:
        nonlocal current
        if current is None:
            current = client.get_job(args.job)
        return current

    changes: JsonObject = {}
    if args.name is not None:
        changes["name"] = args.name
    name = named_task(args)
    if name is not None:
        changes.update(_named_task_body(args, name))
    elif args.task is None and (args.param or args.params) and isinstance(current_job().get("task"), str):
        # A job with a named task: --param amends its parameters.
        changes["params"] = dict(current_job().get("params") or {}) | build_params(args)
    elif args.task is not None or _task_flags_given(args):
        # Parameters without --task amend the job's task rather than replace it.
        changes["task"] = build_task(args, None if args.task else current_job().get("task"))
    if args.tag:
        changes["tags"] = dict(current_job().get("tags") or {}) | build_tags(args.tag)
    schedule = build_schedule(args, default_now=False)
    if schedule is not None:
        changes["schedule"] = schedule
    if retry := build_retry(args):
        if len(retry) < 3:  # keep the settings not given on the command line
            retry = dict(current_job().get("retry") or {}) | retry
        changes["retry"] = retry
    if args.timeout is not None:
        changes["timeout_seconds"] = parse_duration(args.timeout)
    if policy := build_policy(args) | cli_monitoring.policy_fields(args):
        # (a PATCH replaces the whole policy: keep the settings not given on the command line)
        changes["policy"] = dict(current_job().get("policy") or {}) | policy
    changes.update(cli_monitoring.job_fields(args, updating=True))
    if not changes:
        raise UsageError(
            "nothing to change: give --name, a schedule, a task, or retry, timeout, policy or "
            "monitoring options"
        )
    show(client.update_job(args.job, changes), args, job_views.job_details)
    return EXIT_OK


def cmd_jobs_list(client: PunctualClient, args: argparse.Namespace) -> int:
    status: str | None = args.status
    outcome: str | None = args.outcome
    alias = cli_monitoring.OUTCOME_STATUSES.get(status or "")
    if alias is not None:
        # (a job's status is not FAILED: its last run's outcome is; --status FAILED means that)
        if outcome is not None and outcome != alias:
            raise UsageError(f"--status {status} is --outcome {alias}")
        status, outcome = None, alias
    filters = {
        "status": status,
        "outcome": outcome,
        "name_prefix": args.name_prefix,
        "tag": args.tag,
        "task": args.task,
    }
    if args.all:
        jobs = list(client.iter_jobs(limit=args.limit, **filters))
        page: JsonObject = {"items": jobs, "next_cursor": None}
    else:
        page = client.list_jobs(limit=args.limit, cursor=args.cursor, **filters)
    show_page(page, args, job_views.jobs_table, "jobs")
    return EXIT_OK


def cmd_jobs_get(client: PunctualClient, args: argparse.Namespace) -> int:
    show(client.get_job(args.job), args, job_views.job_details)
    return EXIT_OK


def cmd_jobs_cancel(client: PunctualClient, args: argparse.Namespace) -> int:
    show(client.cancel_job(args.job), args, _job_row)
    return EXIT_OK


def _one_or_tagged(args: argparse.Namespace) -> None:
    if (args.job is None) == (args.tag is None):
        raise UsageError("give a job id, or --tag KEY=VALUE for every job with that tag")


def _bulk(
    client: PunctualClient, args: argparse.Namespace, call: Callable[..., JsonObject], verb: str
) -> int:
    """Page through POST /jobs/pause|resume?tag= until its cursor runs out (bounded a request)."""
    changed: list[JsonObject] = []
    failed: list[JsonObject] = []
    cursor: str | None = None
    while True:
        page = call(args.tag, cursor=cursor)
        changed += page.get("changed") or []
        failed += page.get("failed") or []
        cursor = page.get("next_cursor")
        if not cursor:
            break
    if args.json:
        emit_json({"changed": changed, "failed": failed})
    else:
        print(job_views.jobs_table(changed) if changed else f"no job {verb}")
        for failure in failed:
            print(f"not {verb}: {failure.get('id')}: {failure.get('message')}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK


def cmd_jobs_pause(client: PunctualClient, args: argparse.Namespace) -> int:
    _one_or_tagged(args)
    if args.tag is not None:
        if args.note is not None:
            raise UsageError("--note: pausing by --tag takes no note (pause one job to give one)")
        return _bulk(client, args, client.pause_jobs, "paused")
    show(client.pause_job(args.job, note=args.note), args, _job_row)
    return EXIT_OK


def cmd_jobs_resume(client: PunctualClient, args: argparse.Namespace) -> int:
    _one_or_tagged(args)
    if args.tag is not None:
        return _bulk(client, args, client.resume_jobs, "resumed")
    show(client.resume_job(args.job), args, _job_row)
    return EXIT_OK


def cmd_jobs_run(client: PunctualClient, args: argparse.Namespace) -> int:
    execution = client.run_job(args.job)
    show(execution, args, lambda one: execution_views.executions_table([one], args.job))
    return EXIT_OK


def cmd_executions(client: PunctualClient, args: argparse.Namespace) -> int:
    filters = {
        "status": args.status,
        "since": cli_monitoring.since_value(args.since, "--since", common.clock),
        "until": cli_monitoring.since_value(args.until, "--until", common.clock),
    }
    if args.all:
        items = list(client.iter_executions(args.job, limit=args.limit, **filters))
        page: JsonObject = {"items": items, "next_cursor": None}
    else:
        page = client.list_executions(args.job, limit=args.limit, cursor=args.cursor, **filters)
    show_page(page, args, lambda items: execution_views.executions_table(items, args.job), "executions")
    return EXIT_OK


def cmd_preview(client: PunctualClient, args: argparse.Namespace) -> int:
    schedule = build_schedule(args, default_now=True)
    assert schedule is not None  # default_now
    answer = client.preview(schedule, args.count)
    if args.json:
        emit_json(answer)
        return EXIT_OK
    runs = answer.get("next_runs") or []
    if not runs:
        print("no upcoming runs")
    notes = {r.get("at"): r.get("dst") for r in answer.get("runs") or [] if isinstance(r, dict)}
    for run in runs:
        note = notes.get(run)
        mark = {"moved": "  [moved by a DST gap]", "repeated": "  [repeated hour]"}.get(note or "", "")
        print(cli_format.run_time(run, schedule) + mark)
    return EXIT_OK


def cmd_tasks(client: PunctualClient, args: argparse.Namespace) -> int:
    """`punctual tasks [list]`: the types, and your named tasks (all pages with --all)."""
    tag, limit = getattr(args, "tag", None), getattr(args, "limit", None)
    answer = client.tasks(limit=limit, cursor=getattr(args, "cursor", None), tag=tag)
    if getattr(args, "all", False):
        while answer.get("next_cursor"):
            more = client.tasks(limit=limit, cursor=answer["next_cursor"], tag=tag)
            answer = {**more, "items": [*(answer.get("items") or []), *(more.get("items") or [])]}
    show(answer, args, task_views.tasks_text)
    if not args.json and answer.get("next_cursor"):
        print(more_hint("tasks"), file=sys.stderr)
    return EXIT_OK


def _task_body(args: argparse.Namespace, *, creating: bool) -> JsonObject:
    body: JsonObject = {}
    if args.type is not None:
        body["type"] = args.type
    params = build_params(args)
    if params or creating:
        body["params"] = params
    if args.schema is not None:
        body["params_schema"] = _read_json_argument(args.schema, "--schema")
    if args.description is not None:
        body["description"] = args.description
    if args.tag:
        body["tags"] = build_tags(args.tag)
    if retry := build_retry(args):
        body["retry"] = retry
    if args.timeout is not None:
        body["timeout_seconds"] = parse_duration(args.timeout)
    return body


def _read_json_argument(text: str, flag: str) -> Any:
    """JSON given inline, or `@FILE` for a file's."""
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {text[1:]}: {exc.strerror or exc}") from None
    return parse_json(text, flag)


def cmd_tasks_create(client: PunctualClient, args: argparse.Namespace) -> int:
    if args.type is None:
        raise UsageError(f"--type is required: one of {', '.join(BUILTIN_TYPES)}")
    task = client.create_task({"name": args.name, **_task_body(args, creating=True)})
    show(task, args, task_views.task_details)
    return EXIT_OK


def cmd_tasks_get(client: PunctualClient, args: argparse.Namespace) -> int:
    show(client.get_task(args.name), args, task_views.task_details)
    return EXIT_OK


def cmd_tasks_update(client: PunctualClient, args: argparse.Namespace) -> int:
    changes = _task_body(args, creating=False)
    if args.param and args.params is None:
        # --param amends the defaults rather than replacing them all.
        changes["params"] = dict(client.get_task(args.name).get("params") or {}) | changes["params"]
    if not changes:
        raise UsageError(
            "nothing to change: give --type, --param(s), --schema, --description, --tag, retry or --timeout"
        )
    show(client.update_task(args.name, changes), args, task_views.task_details)
    return EXIT_OK


def cmd_tasks_delete(client: PunctualClient, args: argparse.Namespace) -> int:
    show(client.delete_task(args.name), args, task_views.task_details)
    return EXIT_OK


def cmd_capacity(client: PunctualClient, args: argparse.Namespace) -> int:
    """Arithmetic only, nothing is called: the plan of docs/scaling.md for this load."""
    if not 0 <= args.recurring_share <= 1:
        raise UsageError("--recurring-share is a fraction between 0 and 1")
    utilisation = None
    if args.provisioned:
        utilisation = DEFAULT_UTILISATION if args.utilisation is None else args.utilisation
        low, high = capacity.UTILISATION_RANGE
        if not low <= utilisation <= high:
            raise UsageError(
                f"--utilisation is a percent between {low} and {high} (DynamoDB auto scaling's target), "
                f"not {utilisation}"
            )
    elif args.utilisation is not None:
        raise UsageError("--utilisation is the provisioned table's target: add --provisioned")
    elif args.reserved:
        raise UsageError("--reserved prices the provisioned table's capacity: add --provisioned")
    low, high = sizing.MIN_POLLERS_RANGE
    if args.pollers and not low <= args.pollers + args.warm_pollers <= high:
        raise UsageError(f"--pollers (with --warm-pollers) is between {low} and {high}: MinimumPollers")
    if (args.warm_pollers or args.warm_hours) and not args.pollers:
        raise UsageError("--warm-pollers and --warm-hours price a mapping in provisioned mode: add --pollers")
    assumptions = capacity.Assumptions(
        task_seconds=args.task_seconds,
        scanner_memory_mb=args.scanner_memory,
        http_api=args.api == "http",
        keys_only_indexes=not args.all_indexes,
        execution_events=args.execution_events,
    )
    result = capacity.plan(
        args.jobs_per_second,
        recurring_share=args.recurring_share,
        burst_minute=args.burst,
        drain_seconds=args.drain_seconds,
        batched=args.batched,
        utilisation_percent=utilisation,
        reserved=args.reserved,
        pollers=args.pollers,
        warm_pollers=args.warm_pollers,
        warm_hours=args.warm_hours,
        assumptions=assumptions,
    )
    show(result.as_dict(), args, lambda _: capacity.render(result))
    return EXIT_OK


def cmd_console(client: PunctualClient, args: argparse.Namespace) -> int:
    """`punctual console`: the web console lives in punctual_cli.console, imported only when asked for."""
    console = importlib.import_module("punctual_cli.console")
    unreachable = (ConnectionFailed, ConfigurationError)
    return int(
        console.serve(client, port=args.port, open_browser=not args.no_browser, unreachable=unreachable)
    )


def cmd_completion(client: PunctualClient, args: argparse.Namespace) -> int:
    print(completion.script(build_parser(), args.shell))
    return EXIT_OK


def cmd_config(client: PunctualClient, args: argparse.Namespace) -> int:
    print(profiles.describe(profiles.load_profile(args.profile)))
    shown = display.current
    print(f"times shown in {shown.zone_name} (chosen by {shown.chosen_by})")
    return EXIT_OK


def run_local(args: Sequence[str]) -> int:
    """`punctual local ...`: the local stack lives in punctual_local, imported only when asked for."""
    try:
        local = importlib.import_module("punctual_local")
    except ImportError as exc:
        print(f"punctual: error: the local stack is not available: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return int(local.main(list(args)) or 0)


# -- parser ------------------------------------------------------------------------------------------


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


SCHEDULE_TITLES = {
    "create": "schedule (one of; without one the job runs now)",
    "update": "schedule (one of; replaces the job's schedule)",
    "preview": "schedule (one of)",
}


def add_schedule_options(parser: argparse.ArgumentParser, command: str = "create") -> None:
    group = parser.add_argument_group(SCHEDULE_TITLES[command])
    forms = group.add_mutually_exclusive_group()
    forms.add_argument("--now", action="store_true", help="run as soon as possible")
    forms.add_argument("--at", metavar="TIME", help="once, at an RFC 3339 time with offset")
    forms.add_argument(
        "--in",
        dest="in_",
        metavar="DURATION",
        help="once, this long after the API takes the request (30s, 5m, 1h30m)"
        + (": a retry with the same --idempotency-key is the same job" if command == "create" else ""),
    )
    forms.add_argument(
        "--cron",
        metavar="EXPR",
        help="5-field cron expression (e.g. '0 10 * * *') or a macro (@hourly, @daily, @weekly...)",
    )
    forms.add_argument("--every", metavar="DURATION", help="at a fixed rate (at least 1m)")
    group.add_argument("--tz", metavar="ZONE", help="IANA time zone of --cron (default UTC)")
    group.add_argument("--start-at", metavar="TIME", help="--cron/--every: not before this time")
    group.add_argument("--end-at", metavar="TIME", help="--cron/--every: not after this time")


def add_task_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("task")
    group.add_argument(
        "--task",
        metavar="TYPE|NAME",
        help="a type (http, lambda, sqs, sns, eventbridge, stepfunctions, noop, sleep, fail) or one of your "
        "named tasks, with its parameters as --param k=v (see `punctual tasks`)",
    )
    group.add_argument("--url", help="http: the URL to call")
    group.add_argument("--method", help="http: the method (default POST)")
    group.add_argument("--header", action="append", default=[], metavar="K=V", help="http: a header (repeat)")
    group.add_argument("--body", metavar="JSON", help="http: the JSON body")
    group.add_argument("--seconds", type=float, help="sleep: how long")
    group.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="a parameter (JSON or text)"
    )
    group.add_argument("--params", metavar="JSON", help="the parameters as a JSON object")


def add_job_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job")
    group.add_argument("--name", help="a name for people")
    group.add_argument("--tag", action="append", default=[], metavar="K=V", help="a tag (repeat)")
    group.add_argument("--max-attempts", type=positive_int, metavar="N", help="attempts before FAILED")
    group.add_argument("--backoff", metavar="DURATION", help="first retry delay (doubles each retry)")
    group.add_argument("--max-backoff", metavar="DURATION", help="longest retry delay")
    group.add_argument("--timeout", metavar="DURATION", help="time limit of one attempt")
    policy = parser.add_argument_group("policy")
    policy.add_argument(
        "--max-lateness",
        metavar="DURATION",
        help="catch-up window: a run that would start later than this after its time is SKIPPED",
    )
    policy.add_argument(
        "--overlap",
        choices=("allow", "skip", "buffer_one"),
        help="recurring: what a run does while the previous one is still under way (default allow)",
    )
    policy.add_argument(
        "--flexible-window",
        metavar="DURATION",
        help="recurring: spread each run's start over this window after its time (at most 15m)",
    )
    policy.add_argument(
        "--max-runs", type=positive_int, metavar="N", help="recurring: complete the job after N runs"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="punctual",
        description="Schedule and watch jobs on Punctual.",
        epilog="exit codes: 0 ok, 1 API error, 2 usage error, 3 endpoint unreachable",
    )
    parser.add_argument("--version", action="version", version=f"punctual {__version__}")
    connect.add_global_options(parser, None)
    everywhere = connect.global_parent()
    schedule, task, job = add_schedule_options, add_task_options, add_job_options

    def command(subparsers: Any, name: str, handler: Handler, help: str, *options: OptionAdder) -> Any:
        sub = subparsers.add_parser(name, help=help, description=help, parents=[everywhere])
        for add_options in options:
            add_options(sub)
        sub.set_defaults(handler=handler)
        return sub

    def job_argument(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("job", metavar="JOB", help="the job id")

    def paging(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--limit", type=positive_int, help="page size (1-100)")
        sub.add_argument("--cursor", help="continue from this next_cursor")
        sub.add_argument("--all", action="store_true", help="follow next_cursor to the end")

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    jobs = commands.add_parser("jobs", help="create, list and change jobs", parents=[everywhere])
    job_commands = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    create = command(
        job_commands,
        "create",
        cmd_jobs_create,
        "create a job",
        schedule,
        task,
        job,
        cli_monitoring.add_job_options,
    )
    create.add_argument(
        "--idempotency-key", metavar="KEY", help="a retry with the same key returns the same job"
    )
    batch = command(
        job_commands,
        "create-batch",
        cmd_jobs_create_batch,
        f"create 1 to {MAX_BATCH_JOBS} jobs in one request, all or none (POST /jobs/batch)",
    )
    batch.add_argument(
        "file",
        metavar="FILE",
        help='a JSON file (- for standard input): {"jobs": [...]} or a list, each job as POST /jobs takes',
    )
    batch.add_argument(
        "--idempotency-key", metavar="KEY", help="a retry with the same key returns the same jobs"
    )
    listing = command(job_commands, "list", cmd_jobs_list, "list your jobs, newest first")
    listing.add_argument(
        "--status",
        type=str.upper,
        choices=(*JOB_STATUSES, *cli_monitoring.OUTCOME_STATUSES),
        help="only jobs in this status (FAILED, SUCCEEDED: whose last run did so, as --outcome)",
    )
    listing.add_argument(
        "--outcome",
        type=str.lower,
        choices=("succeeded", "failed"),
        help="only jobs whose latest execution to run to its end did so",
    )
    listing.add_argument("--name-prefix", metavar="PREFIX", help="only jobs whose name starts so")
    listing.add_argument(
        "--tag",
        type=tag_filter,
        metavar="K=V",
        help="only jobs with this tag (KEY=VALUE, or KEY for any value)",
    )
    listing.add_argument(
        "--task", metavar="NAME", help="only the active and paused jobs using this named task"
    )
    paging(listing)
    job_argument(command(job_commands, "get", cmd_jobs_get, "show a job"))
    job_argument(
        command(
            job_commands,
            "update",
            cmd_jobs_update,
            "change a job",
            lambda sub: add_schedule_options(sub, "update"),
            task,
            job,
            lambda sub: cli_monitoring.add_job_options(sub, updating=True),
        )
    )
    job_argument(command(job_commands, "cancel", cmd_jobs_cancel, "cancel a job"))
    for name, handler, help in (
        ("pause", cmd_jobs_pause, "pause a job (with a note saying why), or every active job with --tag"),
        ("resume", cmd_jobs_resume, "resume a paused job, or every paused job with --tag"),
    ):
        sub = command(job_commands, name, handler, help)
        sub.add_argument("job", metavar="JOB", nargs="?", help="the job id")
        sub.add_argument(
            "--tag",
            type=tag_filter,
            metavar="K=V",
            help="instead of JOB: every job with this tag (KEY=VALUE, or KEY for any value)",
        )
        if name == "pause":
            sub.add_argument("--note", metavar="TEXT", help="why (shown on the job until it is resumed)")
    job_argument(command(job_commands, "run", cmd_jobs_run, "run a job once more, now"))

    executions = command(commands, "executions", cmd_executions, "list a job's executions, newest first")
    job_argument(executions)
    executions.add_argument(
        "--status",
        type=str.upper,
        choices=("PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"),
        help="only executions in this status",
    )
    executions.add_argument(
        "--since", metavar="TIME", help="scheduled at or after: an RFC 3339 time, or 2h (ago)"
    )
    executions.add_argument(
        "--until", metavar="TIME", help="scheduled before: an RFC 3339 time, or 30m (ago)"
    )
    paging(executions)

    preview = command(
        commands,
        "preview",
        cmd_preview,
        "show a schedule's next run times",
        lambda sub: add_schedule_options(sub, "preview"),
    )
    preview.add_argument("--count", type=positive_int, default=5, help="how many (1-50, default 5)")

    watch = command(
        commands,
        "watch",
        cli_watch.cmd_watch,
        "follow a job's executions live until Ctrl-C; without a job, every job's (a live tail: "
        "state changes as they happen, lateness, errors)",
    )
    watch.add_argument("job", metavar="JOB", nargs="?", help="the job id (none: all your jobs)")
    watch.add_argument(
        "--name-prefix", metavar="PREFIX", help="without a job: only jobs whose name starts so"
    )
    watch.add_argument("--interval", type=_positive_float, default=2.0, metavar="SECONDS", help="poll period")
    watch.add_argument(
        "--until-final", action="store_true", help="stop once the job is COMPLETED or CANCELLED"
    )
    watch.add_argument(
        "--count",
        type=positive_int,
        metavar="N",
        help="stop once N executions have finished (earlier ones count)",
    )
    watch.add_argument(
        "--timeout", type=_positive_float, metavar="SECONDS", help="give up (exit 1) after this"
    )
    watch.add_argument("--limit", type=positive_int, default=50, help="executions fetched per poll")

    tasks_parser = command(commands, "tasks", cmd_tasks, "the task types, and your named tasks")
    task_commands = tasks_parser.add_subparsers(dest="tasks_command", metavar="ACTION")

    def task_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("name", metavar="NAME", help="the task's name")
        group = sub.add_argument_group("task")
        group.add_argument("--type", help=f"its type: {', '.join(BUILTIN_TYPES)}")
        group.add_argument(
            "--param", action="append", default=[], metavar="K=V", help="a default parameter (repeat)"
        )
        group.add_argument("--params", metavar="JSON", help="the default parameters as a JSON object")
        group.add_argument("--schema", metavar="JSON|@FILE", help="JSON Schema of the parameters jobs give")
        group.add_argument("--description", help="what it does, for people")
        group.add_argument("--tag", action="append", default=[], metavar="K=V", help="a tag (repeat)")
        group.add_argument("--max-attempts", type=positive_int, metavar="N", help="its jobs' attempts")
        group.add_argument("--backoff", metavar="DURATION", help="first retry delay (doubles each retry)")
        group.add_argument("--max-backoff", metavar="DURATION", help="longest retry delay")
        group.add_argument("--timeout", metavar="DURATION", help="time limit of one attempt")

    def task_name(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("name", metavar="NAME", help="the task's name")

    listed = command(task_commands, "list", cmd_tasks, "the task types, and a page of your named tasks")
    listed.add_argument(
        "--tag", type=tag_filter, metavar="K=V", help="only your tasks with this tag (KEY=VALUE, or KEY)"
    )
    paging(listed)
    command(task_commands, "create", cmd_tasks_create, "define a named task", task_options)
    command(task_commands, "get", cmd_tasks_get, "show a named task", task_name)
    command(
        task_commands, "update", cmd_tasks_update, "change a named task (its jobs run it next)", task_options
    )
    command(task_commands, "delete", cmd_tasks_delete, "delete a named task no active job uses", task_name)
    cli_monitoring.register(commands, job_commands, command, everywhere)

    defaults = capacity.Assumptions()
    plan = command(
        commands, "capacity", cmd_capacity, "plan shards, scanners, workers and monthly cost for a load"
    )
    plan.add_argument(
        "--jobs-per-second", type=_positive_float, required=True, metavar="N", help="executions a second"
    )
    plan.add_argument(
        "--recurring-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share that are cron/rate occurrences (default 0: all one-time jobs, created by the API)",
    )
    plan.add_argument("--burst", type=positive_int, metavar="N", help="executions due in the busiest minute")
    plan.add_argument(
        "--drain-seconds", type=_positive_float, default=30.0, help="scanner time for a minute (default 30)"
    )
    plan.add_argument(
        "--task-seconds",
        type=_positive_float,
        default=defaults.task_seconds,
        help=f"mean task duration (default {defaults.task_seconds})",
    )
    plan.add_argument(
        "--scanner-memory",
        type=positive_int,
        default=defaults.scanner_memory_mb,
        metavar="MB",
        help=f"scanner function memory (default {defaults.scanner_memory_mb})",
    )
    plan.add_argument(
        "--api",
        choices=("http", "rest"),
        default="http" if defaults.http_api else "rest",
        help="the API Gateway type deployed (-c api_type; default http: $1.00 a million requests, rest: $3.50)",
    )
    # (hidden: an alias of --api http that scripts may pass)
    plan.add_argument("--http-api", dest="api", action="store_const", const="http", help=argparse.SUPPRESS)
    plan.add_argument(
        "--batched",
        action="store_true",
        help=f"one-time jobs created {capacity.BATCH_JOBS} a request (POST /jobs/batch)",
    )
    plan.add_argument(
        "--all-indexes", action="store_true", help="price the indexes as projecting ALL (deployed: KEYS_ONLY)"
    )
    plan.add_argument(
        "--execution-events",
        choices=("all", "final", "off"),
        default=defaults.execution_events,
        help="the stack's execution events on EventBridge, as -c execution_events deploys them "
        f"(default {defaults.execution_events}: each status change, $1.00 a million events)",
    )
    plan.add_argument(
        "--provisioned",
        action="store_true",
        help="price the table provisioned and auto scaled (a steady load) and print its CDK context",
    )
    plan.add_argument(
        "--utilisation",
        type=int,
        metavar="PERCENT",
        help=f"with --provisioned: auto scaling's target, {capacity.UTILISATION_RANGE[0]}-"
        f"{capacity.UTILISATION_RANGE[1]} (default {DEFAULT_UTILISATION})",
    )
    plan.add_argument(
        "--reserved",
        action="store_true",
        help="with --provisioned: that capacity bought as one-year reserved capacity (a commitment, "
        "about 54%% under provisioned prices)",
    )

    plan.add_argument(
        "--pollers",
        type=int,
        default=0,
        metavar="N",
        help="price the worker mapping in provisioned mode with N minimum pollers (-c worker_min_pollers)",
    )
    plan.add_argument(
        "--warm-pollers",
        type=int,
        default=0,
        metavar="N",
        help="with --pollers: N more, raised ahead of bursts (-c worker_prescale) ...",
    )
    plan.add_argument(
        "--warm-hours", type=float, default=0.0, metavar="H", help="... for H hours a month in all"
    )

    console = command(
        commands, "console", cmd_console, "look at and act on your jobs in a browser (127.0.0.1)"
    )
    console.add_argument(
        "--port", type=int, default=0, metavar="N", help="its port on 127.0.0.1 (default: a free one)"
    )
    console.add_argument("--no-browser", action="store_true", help="print the URL to open, open no browser")

    shells = command(
        commands,
        "completion",
        cmd_completion,
        "print the shell completion script for bash, zsh or fish; install it with, e.g., "
        + "; ".join(completion.INSTALL.values()),
    )
    shells.add_argument("shell", choices=completion.SHELLS)
    command(
        commands,
        "config",
        cmd_config,
        "show the config file (named profiles: endpoint, token or aws_profile, region, display_zone) "
        "and the profile in use",
    )

    # Listed for --help only: main() hands `punctual local ...` to punctual_local before parsing.
    commands.add_parser(
        "local", help="run all of Punctual on this machine (punctual local --help)", add_help=False
    )
    return parser


def _local_arguments(argv: Sequence[str]) -> list[str] | None:
    """The arguments after `local` when that is the command, else None."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in connect.VALUED:
            index += 2
            continue
        if token.startswith("-"):
            index += 1
            continue
        return list(argv[index + 1 :]) if token == "local" else None
    return None


def resolve_ids(client: PunctualClient, args: argparse.Namespace) -> None:
    """Whole ids for the shortened ones the tables show (as `git` takes a shortened hash)."""
    if isinstance(getattr(args, "job", None), str):
        args.job = ids.job_id(client, args.job)
        if isinstance(getattr(args, "execution", None), str):
            args.execution = ids.execution_id(client, args.job, args.execution)
    elif isinstance(getattr(args, "execution", None), list) and args.execution:
        args.execution = ids.dead_letter_ids(client, args.execution)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`punctual ... | head`): not a failure. Point stdout at nothing so that
        # Python's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _main(argv: list[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    local_arguments = _local_arguments(arguments)
    if local_arguments is not None:
        return run_local(local_arguments)
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # --help, --version and argparse's usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    client: PunctualClient | None = None
    try:
        profile = profiles.load_profile(args.profile)
        display.current = connect.display_for(args, profile)
        client = profiles.connect(profile, args.endpoint, args.token)
        resolve_ids(client, args)
        handler: Handler = args.handler
        return handler(client, args)
    except (UsageError, ConfigurationError) as exc:
        print(f"punctual: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print_api_error(exc, args)
        return EXIT_FAILURE
    except ConnectionFailed as exc:
        print(f"punctual: error: {exc}", file=sys.stderr)
        if client is not None and is_loopback(client.endpoint):
            print(
                "  is the local stack running? start it with `punctual local` (or `make run`)",
                file=sys.stderr,
            )
        return EXIT_CONNECTION
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
