"""A job's executions: listed (`punctual executions`), and followed live (`punctual watch`).

The live views. Of one job: its executions as they were when the watch began, at
their own times, then each new one and each change. Of every job (Tail): the latest runs and the next
one due, then the changes of the jobs with something going on."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from punctual.platform.clock import Clock
from punctual.platform.timefmt import parse_rfc3339
from punctual_cli import common, display, monitoring
from punctual_cli import formatting as cli_format
from punctual_cli.common import (
    EXIT_OK,
    UsageError,
    add_job_argument,
    add_paging_options,
    positive_float,
    positive_int,
)
from punctual_cli.output import json_text, say, show_page
from punctual_cli.views import executions as execution_views
from punctual_client.errors import ConnectionFailed
from punctual_client.transport import JsonObject, PunctualClient

FINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"})
WIDE = 100  # columns from which the all-jobs view gives job names their full room
HISTORY_LINES = 10  # `watch` without a job: the latest executions shown as they were when it began


# -- one job -----------------------------------------------------------------------------------------------


def _watch_done(args: argparse.Namespace, job: Mapping[str, Any], seen: Mapping[str, JsonObject]) -> bool:
    statuses = [str(execution.get("status")) for execution in seen.values()]
    if args.count is not None and sum(s in FINAL for s in statuses) >= args.count:
        return True
    if args.until_final:
        if job.get("status") == "COMPLETED":
            return all(s in FINAL for s in statuses)
        if job.get("status") == "CANCELLED":
            # Executions that had not started will never run; one already running may still finish.
            return "RUNNING" not in statuses
    return False


def _print_watch_changes(
    args: argparse.Namespace,
    now: datetime,
    executions: list[JsonObject],
    seen: dict[str, JsonObject],
    *,
    history: bool = False,
) -> None:
    """Each new execution and each change; on the first poll (`history`) the executions as they were
    when the watch began, each at its own time, then a line where the live changes start."""
    short = display.execution_ids([str(execution.get("id")) for execution in executions], args.job)
    for execution in reversed(executions):  # the API lists newest first; a log reads oldest first
        execution_id = str(execution.get("id"))
        previous = seen.get(execution_id)
        if previous is None or _changed(previous, execution):
            if args.quiet:
                print(display.escaped(execution_id), flush=True)
            elif args.json:
                print(json_text(execution, indent=None), flush=True)
            else:
                line = execution_views.watch_line(
                    now, execution, previous, short[execution_id], history=history
                )
                say(line, flush=True)
        seen[execution_id] = execution
    if history and not (args.quiet or args.json):
        # (a job with no run yet has no history: the line still says where the live changes start)
        print(cli_format.fitted(f"--- live from {display.current.clock(now)} ---"), flush=True)


def cmd_watch(client: PunctualClient, args: argparse.Namespace) -> int:
    """Poll the job's executions; print each new one and each change, until Ctrl-C or a stop option.
    Without a job: every job's (Tail)."""
    if args.job is None:
        if args.until_final:
            raise UsageError("--until-final watches one job: name it")
        return watch_all(client, args, common.clock)
    deadline = common.clock.now() + timedelta(seconds=args.timeout) if args.timeout is not None else None
    seen: dict[str, JsonObject] = {}
    job_status: str | None = None
    if not args.json:
        say(f"watching job {args.job} every {args.interval:g}s (Ctrl-C to stop)", sys.stderr)
    try:
        while True:
            try:
                job = client.get_job(args.job)
                page = client.list_executions(args.job, limit=args.limit)
            except ConnectionFailed as exc:
                if job_status is None:
                    raise  # never reached it: a wrong endpoint, not a restart
                # The local stack restarting is no reason to end a live view.
                say(f"punctual: watch: {exc}; retrying", sys.stderr)
            else:
                now = common.clock.now()
                first = job_status is None
                changed = job.get("status") != job_status and not args.json
                line = f"{display.current.clock(now)}  job {args.job}  "
                if changed and first:
                    say(line + str(job.get("status")), flush=True)
                # (a run's end before the job's change it brings: a one-time job completes as its run ends)
                _print_watch_changes(args, now, page.get("items") or [], seen, history=first)
                if changed and not first:
                    say(line + f"{job_status} -> {job.get('status')}", flush=True)
                job_status = str(job.get("status"))
                if _watch_done(args, job, seen):
                    return 0
            if deadline is not None and common.clock.now() >= deadline:
                print(f"punctual: watch: gave up after {args.timeout:g}s", file=sys.stderr)
                return 1
            common.clock.sleep(args.interval)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a person ends a live view


# -- every job ------------------------------------------------------------------------------------------


class Tail:
    """`punctual watch` without a job: each poll lists the owner's jobs (a few reads a page, whatever
    their number) and reads the executions of those with something going on: a run due by the next
    poll or under way, a job that changed since the last poll (its outcome, status or next run), or
    one created since."""

    def __init__(
        self,
        client: PunctualClient,
        clock: Clock,
        *,
        interval: float,
        name_prefix: str | None = None,
        out: Callable[[str], None] = print,
        json_lines: bool = False,
        quiet: bool = False,
    ) -> None:
        self._client = client
        self._clock = clock
        self._interval = interval
        self._prefix = name_prefix
        self._out = out
        self._json = json_lines
        self._quiet = quiet
        self._started = clock.now()
        self._jobs: dict[str, JsonObject] = {}
        self._executions: dict[str, JsonObject] = {}
        self._busy: set[str] = set()  # jobs with an execution seen not final
        self.finished = 0  # executions seen reaching a final status
        self._polled = False

    def _history(self, now: datetime, jobs: list[JsonObject]) -> None:
        """What a reader sees before anything changes: each job's last execution as it was (at its own
        time, the latest few), the next run due, then where the live changes start."""
        last = sorted(
            (job for job in jobs if isinstance(job.get("last_execution"), dict)),
            key=lambda job: _own_time(job["last_execution"]),
        )
        for job in last[-HISTORY_LINES:]:
            execution = job["last_execution"]
            short = display.execution_ids([str(execution.get("id"))])
            line = execution_views.watch_line(
                now, execution, None, short.get(str(execution.get("id"))), history=True
            )
            self._out(cli_format.fitted(f"{_job_label(job)}  {line}"))
        upcoming = sorted(
            (job for job in jobs if job.get("status") == "ACTIVE" and job.get("next_run_at")),
            key=lambda job: parse_rfc3339(str(job["next_run_at"])),
        )
        if upcoming:
            job = upcoming[0]
            self._out(
                cli_format.fitted(
                    f"next run: {_job_label(job)}  at {cli_format.short_time(job['next_run_at'])}"
                )
            )
        elif not jobs:
            self._out("no jobs yet (punctual jobs create)")
        jobs_seen = cli_format.counted(len(jobs), "job")
        self._out(cli_format.fitted(f"--- {jobs_seen}; live from {display.current.clock(now)} ---"))

    def poll(self) -> None:
        now = self._clock.now()
        first = not self._polled
        self._polled = True
        jobs = {job["id"]: job for job in self._client.iter_jobs(limit=100, name_prefix=self._prefix)}
        if first and not (self._json or self._quiet):
            self._history(now, list(jobs.values()))
        for job_id, job in jobs.items():
            before = self._jobs.get(job_id)
            if before is not None and before.get("status") != job.get("status"):
                self._job_line(now, job, before)
            # A job first listed after the first poll was created while watching: it may have run and
            # finished between two polls, due to nothing and unchanged by the next.
            if (before is None and not first) or self._hot(job, before, now):
                self._follow(now, job)
        self._jobs = jobs

    def _hot(self, job: Mapping[str, Any], before: Mapping[str, Any] | None, now: datetime) -> bool:
        if job["id"] in self._busy:
            return True
        upcoming = job.get("next_run_at")
        if (
            upcoming
            and job.get("status") == "ACTIVE"
            and parse_rfc3339(upcoming) <= now + timedelta(seconds=self._interval)
        ):
            return True
        if before is None:
            return False
        watched = ("status", "outcome", "next_run_at", "updated_at")
        return any(before.get(key) != job.get(key) for key in watched)

    def _follow(self, now: datetime, job: Mapping[str, Any]) -> None:
        page = self._client.list_executions(job["id"], limit=10)
        busy = False
        for execution in reversed(page.get("items") or []):
            previous = self._executions.get(execution["id"])
            self._executions[execution["id"]] = execution
            status = execution.get("status")
            if status not in FINAL:
                busy = True
            if previous is None and status in FINAL and self._ended_before_start(execution):
                continue  # history from before the watch began
            if previous is None or _changed(previous, execution):
                if status in FINAL:
                    self.finished += 1
                self._line(now, job, execution, previous)
        (self._busy.add if busy else self._busy.discard)(job["id"])

    def _ended_before_start(self, execution: Mapping[str, Any]) -> bool:
        finished = execution.get("finished_at")
        return bool(finished) and parse_rfc3339(str(finished)) < self._started

    def _line(
        self,
        now: datetime,
        job: Mapping[str, Any],
        execution: Mapping[str, Any],
        previous: Mapping[str, Any] | None,
    ) -> None:
        if self._quiet:
            self._out(display.escaped(str(execution.get("id"))))
        elif self._json:
            self._out(
                json_text({"job": {"id": job["id"], "name": job.get("name")}, **execution}, indent=None)
            )
        else:
            short = display.execution_ids([str(execution.get("id"))])[str(execution.get("id"))]
            self._out(
                cli_format.fitted(
                    f"{_job_label(job)}  " + execution_views.watch_line(now, execution, previous, short)
                )
            )

    def _job_line(self, now: datetime, job: Mapping[str, Any], before: Mapping[str, Any]) -> None:
        if self._quiet:
            return
        change = {"job": job["id"], "status": job.get("status"), "previous_status": before.get("status")}
        if self._json:
            self._out(json_text({**change, "pause_note": job.get("pause_note")}, indent=None))
            return
        note = f"  ({job['pause_note']})" if job.get("pause_note") else ""
        self._out(
            cli_format.fitted(
                f"{display.current.clock(now)}  job {job['id']} ({job.get('name')})  "
                f"{before.get('status')} -> {job.get('status')}{note}"
            )
        )


def _job_label(job: Mapping[str, Any]) -> str:
    """The job's name (else its id), cut to a fixed width: narrower on a narrow terminal, where the
    rest of the line needs the room more."""
    width = display.current.width
    size = 16 if width is not None and width < WIDE else 24
    return display.cut(display.escaped(str(job.get("name") or job["id"])), size).ljust(size)


def _own_time(execution: Mapping[str, Any]) -> datetime:
    own = execution.get("finished_at") or execution.get("started_at") or execution.get("scheduled_at")
    try:
        return parse_rfc3339(str(own))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    return any(before.get(key) != after.get(key) for key in ("status", "attempts", "error", "finished_at"))


def watch_all(client: PunctualClient, args: argparse.Namespace, clock: Clock) -> int:
    tail = Tail(
        client,
        clock,
        interval=args.interval,
        name_prefix=getattr(args, "name_prefix", None),
        json_lines=args.json,
        quiet=args.quiet,
        out=lambda line: say(line, flush=True),
    )
    deadline = clock.now() + timedelta(seconds=args.timeout) if args.timeout is not None else None
    if not (args.json or args.quiet):
        print(f"watching your jobs' executions every {args.interval:g}s (Ctrl-C to stop)", file=sys.stderr)
    reached = False
    try:
        while True:
            try:
                tail.poll()
                reached = True
            except ConnectionFailed as exc:
                if not reached:
                    raise
                say(f"punctual: watch: {exc}; retrying", sys.stderr)
            if args.count is not None and tail.finished >= args.count:
                return 0
            if deadline is not None and clock.now() >= deadline:
                print(f"punctual: watch: gave up after {args.timeout:g}s", file=sys.stderr)
                return 1
            clock.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def cmd_executions(client: PunctualClient, args: argparse.Namespace) -> int:
    filters = {
        "status": args.status,
        "since": monitoring.since_value(args.since, "--since", common.clock),
        "until": monitoring.since_value(args.until, "--until", common.clock),
    }
    if args.all:
        items = list(client.iter_executions(args.job, limit=args.limit, **filters))
        page: JsonObject = {"items": items, "next_cursor": None}
    else:
        page = client.list_executions(args.job, limit=args.limit, cursor=args.cursor, **filters)
    show_page(page, args, lambda items: execution_views.executions_table(items, args.job), "executions")
    return EXIT_OK


def register(commands: Any, command: Callable[..., Any]) -> None:
    """Add `executions` and `watch` to the parser (`command` makes one, as build_parser does)."""
    executions = command(commands, "executions", cmd_executions, "list a job's executions, newest first")
    add_job_argument(executions)
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
    add_paging_options(executions)

    watch = command(
        commands,
        "watch",
        cmd_watch,
        "follow a job's executions live until Ctrl-C; without a job, every job's (a live tail: "
        "state changes as they happen, lateness, errors)",
    )
    watch.add_argument("job", metavar="JOB", nargs="?", help="the job id (none: all your jobs)")
    watch.add_argument(
        "--name-prefix", metavar="PREFIX", help="without a job: only jobs whose name starts so"
    )
    watch.add_argument("--interval", type=positive_float, default=2.0, metavar="SECONDS", help="poll period")
    watch.add_argument(
        "--until-final", action="store_true", help="stop once the job is COMPLETED or CANCELLED"
    )
    watch.add_argument(
        "--count",
        type=positive_int,
        metavar="N",
        help="stop once N executions have finished (with JOB: earlier ones count; without: only "
        "those that finish while watching)",
    )
    watch.add_argument(
        "--timeout", type=positive_float, metavar="SECONDS", help="give up (exit 1) after this"
    )
    watch.add_argument("--limit", type=positive_int, default=50, help="executions fetched per poll")
