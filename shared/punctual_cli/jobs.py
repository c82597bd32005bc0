"""`punctual jobs` (create, list, change, pause, resume, cancel, run) and `punctual preview`, the next
run times of a schedule."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from punctual_cli import monitoring
from punctual_cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    OptionAdder,
    UsageError,
    add_job_argument,
    add_paging_options,
    parse_duration,
    parse_json,
    positive_int,
    until_unmoved,
)
from punctual_cli.formatting import run_time
from punctual_cli.job_options import (
    add_job_options,
    add_schedule_options,
    add_task_options,
    build_params,
    build_policy,
    build_retry,
    build_schedule,
    build_tags,
    build_task,
    named_task,
    tag_filter,
    task_flags_given,
)
from punctual_cli.output import emit_json, print_ids, say, show, show_page
from punctual_cli.views import executions as execution_views
from punctual_cli.views import jobs as job_views
from punctual_client.transport import JsonObject, PunctualClient

JOB_STATUSES = ("ACTIVE", "PAUSED", "CANCELLED", "COMPLETED")
MAX_BATCH_JOBS = 100  # POST /jobs/batch


def _job_row(job: JsonObject) -> str:
    return job_views.jobs_table([job])


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
    if policy := build_policy(args) | monitoring.policy_fields(args):
        body["policy"] = policy
    body.update(monitoring.job_fields(args))
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
        print_ids(jobs)
    elif args.json:
        emit_json({"items": jobs})
    else:
        say(job_views.jobs_table(jobs))
    return EXIT_OK


def _updated_schedule(args: argparse.Namespace, current_job: Callable[[], JsonObject]) -> JsonObject | None:
    """The schedule an update sends, which replaces the job's whole schedule: so a cron job keeps its
    zone and window when only --cron is given, and its expression and window when only --tz is."""
    other_form = args.now or any(value is not None for value in (args.at, args.in_, args.every))
    if args.tz is not None and args.cron is None and not other_form:
        current = current_job().get("schedule") or {}
        if current.get("type") != "cron":
            raise UsageError(
                f"--tz: job {args.job} has a {current.get('type')} schedule, not cron: "
                "give --cron EXPR with --tz"
            )
        window = {key: current[key] for key in ("start_at", "end_at") if current.get(key)}
        schedule = build_schedule(
            argparse.Namespace(**{**vars(args), "cron": current["expression"]}), default_now=False
        )
        return window | (schedule or {})
    schedule = build_schedule(args, default_now=False)
    if schedule is not None and schedule["type"] == "cron":
        current = current_job().get("schedule") or {}
        if current.get("type") == "cron":
            # (a new expression alone: the zone and the window it had stay)
            kept = {"timezone": args.tz, "start_at": args.start_at, "end_at": args.end_at}
            for key, given in kept.items():
                if given is None and current.get(key):
                    schedule[key] = current[key]
    return schedule


def cmd_jobs_update(client: PunctualClient, args: argparse.Namespace) -> int:
    if getattr(args, "signing_secret", None) == "-":
        # Read once: each attempt builds the change again, and stdin gives the secret only once.
        args.signing_secret = sys.stdin.readline().strip()
    show(until_unmoved(lambda: _update(client, args)), args, job_views.job_details)
    return EXIT_OK


def _update(client: PunctualClient, args: argparse.Namespace) -> JsonObject:
    """The job changed as the command line says. What is amended from the job as read (its task's
    parameters, tags, retry, policy, schedule) is sent on condition that the job is still as read
    (If-Match): a change landing between would otherwise be undone."""
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
    elif args.task is not None or task_flags_given(args):
        # Parameters without --task amend the job's task rather than replace it.
        changes["task"] = build_task(args, None if args.task else current_job().get("task"))
    if args.tag:
        changes["tags"] = dict(current_job().get("tags") or {}) | build_tags(args.tag)
    schedule = _updated_schedule(args, current_job)
    if schedule is not None:
        changes["schedule"] = schedule
    if retry := build_retry(args):
        if len(retry) < 3:  # keep the settings not given on the command line
            retry = dict(current_job().get("retry") or {}) | retry
        changes["retry"] = retry
    if args.timeout is not None:
        changes["timeout_seconds"] = parse_duration(args.timeout)
    if policy := build_policy(args) | monitoring.policy_fields(args):
        # (a PATCH replaces the whole policy: keep the settings not given on the command line)
        changes["policy"] = dict(current_job().get("policy") or {}) | policy
    changes.update(monitoring.job_fields(args, updating=True))
    if not changes:
        raise UsageError(
            "nothing to change: give --name, a schedule, a task, or retry, timeout, policy or "
            "monitoring options"
        )
    revision = None if current is None else current.get("revision")
    return client.update_job(args.job, changes, revision=revision if isinstance(revision, int) else None)


def cmd_jobs_list(client: PunctualClient, args: argparse.Namespace) -> int:
    status: str | None = args.status
    outcome: str | None = args.outcome
    alias = monitoring.OUTCOME_STATUSES.get(status or "")
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
        say(job_views.jobs_table(changed) if changed else f"no job {verb}")
        for failure in failed:
            say(f"not {verb}: {failure.get('id')}: {failure.get('message')}", sys.stderr)
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
        say(run_time(run, schedule) + mark)
    return EXIT_OK


def register(commands: Any, command: Callable[..., Any], everywhere: argparse.ArgumentParser) -> Any:
    """Add `jobs` and `preview` to the parser (`command` makes one, as build_parser does; `everywhere`
    holds the options taken after any command word); returns the `jobs` actions, for more of them."""
    schedule: OptionAdder = add_schedule_options
    task: OptionAdder = add_task_options
    job: OptionAdder = add_job_options
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
        monitoring.add_job_options,
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
        choices=(*JOB_STATUSES, *monitoring.OUTCOME_STATUSES),
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
    add_paging_options(listing)
    add_job_argument(command(job_commands, "get", cmd_jobs_get, "show a job"))
    add_job_argument(
        command(
            job_commands,
            "update",
            cmd_jobs_update,
            "change a job",
            lambda sub: add_schedule_options(sub, "update"),
            task,
            job,
            lambda sub: monitoring.add_job_options(sub, updating=True),
        )
    )
    add_job_argument(command(job_commands, "cancel", cmd_jobs_cancel, "cancel a job"))
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
    add_job_argument(command(job_commands, "run", cmd_jobs_run, "run a job once more, now"))

    preview = command(
        commands,
        "preview",
        cmd_preview,
        "show a schedule's next run times",
        lambda sub: add_schedule_options(sub, "preview"),
    )
    preview.add_argument("--count", type=positive_int, default=5, help="how many (1-50, default 5)")
    return job_commands
