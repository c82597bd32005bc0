"""The CLI's monitoring: notification and signing options of jobs, outcomes, retries, dead letters,
and a webhook receiver to try notifications with on this machine (`punctual receive`). The live
views (`punctual watch`) are in watch.py."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

from punctual.platform import signing
from punctual.platform.clock import Clock
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from punctual_cli import common, display, formatting
from punctual_cli.common import add_paging_options
from punctual_cli.output import emit_json, print_ids, say
from punctual_cli.views import executions as execution_views
from punctual_client.transport import JsonObject, PunctualClient

NOTIFY_EVENTS = ("succeeded", "failed", "dead_lettered", "late", "skipped")
# The CLI's own `--status` values for `jobs list` that are outcomes, not job statuses.
OUTCOME_STATUSES = {"FAILED": "failed", "SUCCEEDED": "succeeded"}
MAX_REDRIVE = 100


def _usage(message: str) -> Exception:
    return common.UsageError(message)


def _duration(text: str) -> int:
    return common.parse_duration(text)


# -- job options ---------------------------------------------------------------------------------------


def parse_notify(text: str) -> JsonObject:
    """`failed,late:2m=https://hooks.example.com/x` -> a `notify` rule: the events before the first `=`
    (`late:DURATION` for lateness over DURATION), the target after it (a URL, a topic or bus ARN)."""
    events, sep, target = text.partition("=")
    if not sep or not target.strip() or not events.strip():
        raise _usage(
            f"--notify takes EVENTS=TARGET (e.g. failed,late:5m=https://hooks.example.com/x), got {text!r}"
        )
    rule: JsonObject = {"on": [], "to": target.strip()}
    for token in (t.strip().lower() for t in events.split(",")):
        name, colon, threshold = token.partition(":")
        if name not in NOTIFY_EVENTS:
            raise _usage(f"--notify: unknown event {name!r}; events: {', '.join(NOTIFY_EVENTS)}")
        if name == "late":
            if not colon:
                raise _usage("--notify: late needs its threshold, e.g. late:5m (lateness over five minutes)")
            rule["late_after_seconds"] = _duration(threshold)
        elif colon:
            raise _usage(f"--notify: only late takes a threshold, not {name}")
        rule["on"].append(name)
    return rule


def add_job_options(parser: argparse.ArgumentParser, *, updating: bool = False) -> None:
    group = parser.add_argument_group("monitoring")
    group.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="EVENTS=TARGET",
        help=f"tell TARGET (a webhook URL, an SNS topic or EventBridge bus ARN) of EVENTS, comma-separated "
        f"of {', '.join(NOTIFY_EVENTS)} (late:DURATION: later than that); repeat for more targets"
        + ("; replaces the job's rules" if updating else ""),
    )
    group.add_argument(
        "--signing-secret",
        metavar="SECRET",
        help="sign webhook notifications and http requests (Standard Webhooks) with this whsec_ secret "
        "(- reads it from standard input; `punctual new-secret` makes one)"
        + ("; the current one keeps signing beside it for 24 hours" if updating else ""),
    )
    group.add_argument(
        "--pause-after-failures",
        type=_positive,
        metavar="N",
        help="pause the job after N failed executions in a row (with a note saying why)",
    )
    if updating:
        group.add_argument("--no-notify", action="store_true", help="remove every notification rule")
        group.add_argument("--no-signing", action="store_true", help="sign nothing from now on")


def _positive(text: str) -> int:
    return common.positive_int(text)


def job_fields(args: argparse.Namespace, *, updating: bool = False) -> JsonObject:
    """The body fields of the monitoring options given (nothing for those left out)."""
    fields: JsonObject = {}
    if getattr(args, "no_notify", False):
        if args.notify:
            raise _usage("--no-notify removes every rule: give it without --notify")
        fields["notify"] = []
    elif args.notify:
        fields["notify"] = [parse_notify(text) for text in args.notify]
    if getattr(args, "no_signing", False):
        if args.signing_secret is not None:
            raise _usage("--no-signing stops signing: give it without --signing-secret")
        fields["signing_secret"] = None
    elif args.signing_secret is not None:
        secret = sys.stdin.readline().strip() if args.signing_secret == "-" else args.signing_secret
        fields["signing_secret"] = secret
    return fields


def policy_fields(args: argparse.Namespace) -> JsonObject:
    if getattr(args, "pause_after_failures", None) is None:
        return {}
    return {"pause_after_failures": args.pause_after_failures}


# -- commands ----------------------------------------------------------------------------------------


def cmd_retry(client: PunctualClient, args: argparse.Namespace) -> int:
    execution = client.retry_execution(args.job, args.execution)
    if args.quiet:
        print_ids([execution])
    elif args.json:
        emit_json(execution)
    else:
        say(execution_views.executions_table([execution], args.job))
    return 0


def cmd_dead_letters_list(client: PunctualClient, args: argparse.Namespace) -> int:
    if args.all:
        page: JsonObject = {"items": list(client.iter_dead_letters(limit=args.limit)), "next_cursor": None}
    else:
        page = client.dead_letters(limit=args.limit, cursor=args.cursor)
    items = page.get("items") or []
    if args.quiet:
        print_ids(items, "execution_id")
    elif args.json:
        emit_json(page)
    else:
        say(execution_views.dead_letters_table(items) if items else "no dead letters")
        if page.get("next_cursor"):
            print("(more dead letters: --all, or --cursor NEXT_CURSOR from --json)", file=sys.stderr)
    return 0


def cmd_coming_up(client: PunctualClient, args: argparse.Namespace) -> int:
    """The caller's runs in the coming hour, minute by minute (GET /coming-up): the minutes that hold
    any, with their busiest jobs, so that a burst shows before it comes."""
    answer = client.coming_up()
    if args.json:
        emit_json(answer)
        return 0
    minutes = [m for m in answer.get("minutes") or [] if m.get("count")]
    if not minutes:
        print("no runs in the coming hour")
    else:
        rows = []
        for minute in minutes:
            jobs = minute.get("jobs") or []
            named = ", ".join(f"{j.get('name') or j.get('id')} ({j.get('count')})" for j in jobs)
            more = int(minute.get("count") or 0) - sum(int(j.get("count") or 0) for j in jobs)
            rows.append(
                [
                    formatting.short_time(minute.get("at")),
                    str(minute.get("count")),
                    named + (f", and {more} more" if more > 0 else ""),
                ]
            )
        say(formatting.table(["MINUTE", "RUNS", "BUSIEST JOBS (RUNS)"], rows))
    if not answer.get("complete"):
        say(f"(counted from the first {answer.get('jobs_read')} ACTIVE jobs read: you have more)", sys.stderr)
    return 0


def cmd_dead_letters_redrive(client: PunctualClient, args: argparse.Namespace) -> int:
    ids = list(args.execution)
    if args.all:
        if ids:
            raise _usage("give execution ids or --all, not both")
        ids = [str(item["execution_id"]) for item in client.iter_dead_letters(limit=100)]
    elif not ids:
        raise _usage("name the executions to redrive (from `punctual dead-letters list`), or --all")
    results: list[JsonObject] = []
    for start in range(0, len(ids), MAX_REDRIVE):
        results += client.redrive(ids[start : start + MAX_REDRIVE])
    if args.json:
        emit_json({"items": results})
    elif args.quiet:
        print_ids([r for r in results if r.get("result") == "redriven"], "execution_id")
    else:
        for result in results:
            say(f"{result.get('execution_id')}  {result.get('result')}")
        if not results:
            print("no dead letters")
    return 1 if any(r.get("result") == "failed" for r in results) else 0


def cmd_new_secret(client: PunctualClient, args: argparse.Namespace) -> int:
    print(signing.new_secret())
    return 0


# -- a webhook receiver to try notifications with --------------------------------------------------------


def serve_receiver(
    port: int, *, secret: str | None, statuses: list[int], clock: Clock, out: IO[str]
) -> ThreadingHTTPServer:
    """A receiver on 127.0.0.1:port that prints each request (checking its signature with `secret`)
    and answers with `statuses` in order, then 200; returns it, serving in a thread."""
    lock = threading.Lock()
    script = list(statuses)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with lock:
                status = script.pop(0) if script else 200
            verdict = ""
            if secret is not None:
                try:
                    signing.verify(secret, dict(self.headers.items()), raw, clock.now())
                    verdict = "  signature ok"
                except (signing.InvalidSignature, ValueError) as exc:
                    verdict = f"  SIGNATURE REFUSED: {exc}"
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", errors="replace")
            kind = body.get("type") if isinstance(body, dict) else None
            what = kind or self.headers.get("X-Punctual-Execution-Id") or ""
            line = f"{display.current.clock(clock.now())}  {self.command} {self.path}  {what}  -> {status}{verdict}"
            with lock:
                say(line, out, flush=True)
                if body is not None:
                    say("  " + json.dumps(body)[:2000], out, flush=True)
            payload = json.dumps({"received": status < 300}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    return server


def cmd_receive(client: PunctualClient, args: argparse.Namespace) -> int:
    if args.secret is not None:
        try:
            signing.key_of(args.secret)
        except ValueError as exc:
            raise _usage(f"--secret: {exc}") from None
    statuses = [args.fail_with] * args.fail_first
    try:
        server = serve_receiver(
            args.port, secret=args.secret, statuses=statuses, clock=common.clock, out=sys.stdout
        )
    except OSError as exc:
        raise _usage(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    port = server.server_address[1]
    print(f"receiving on http://127.0.0.1:{port}/ (Ctrl-C to stop)", file=sys.stderr, flush=True)
    print(
        f"  try: punctual jobs create --task fail --max-attempts 1 --notify failed=http://127.0.0.1:{port}/hook",
        file=sys.stderr,
        flush=True,
    )
    try:
        while True:
            common.clock.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        server.shutdown()
        server.server_close()


def register(
    commands: Any, job_commands: Any, command: Callable[..., Any], everywhere: argparse.ArgumentParser
) -> None:
    """Add the monitoring commands to the parser (`command` makes one, as build_parser does;
    `everywhere` holds the options taken after any command word)."""

    retry = command(
        job_commands,
        "retry",
        cmd_retry,
        "run a failed, skipped or cancelled execution once more, now, as a new one",
    )
    retry.add_argument("job", metavar="JOB", help="the job id")
    retry.add_argument("execution", metavar="EXECUTION", help="the execution id")

    command(
        commands,
        "coming-up",
        cmd_coming_up,
        "your runs in the coming hour, minute by minute, with each minute's busiest jobs",
    )

    letters = commands.add_parser(
        "dead-letters",
        help="your executions that were dead-lettered: list and redrive them",
        parents=[everywhere],
    )
    letter_commands = letters.add_subparsers(dest="dead_letters_command", metavar="ACTION", required=True)
    add_paging_options(
        command(letter_commands, "list", cmd_dead_letters_list, "list your dead-lettered executions")
    )
    redrive = command(
        letter_commands,
        "redrive",
        cmd_dead_letters_redrive,
        "run dead-lettered executions again (the same executions, queued again)",
    )
    redrive.add_argument("execution", nargs="*", metavar="EXECUTION", help="execution ids (or --all)")
    redrive.add_argument("--all", action="store_true", help="every dead letter of yours")

    receive = command(
        commands,
        "receive",
        cmd_receive,
        "a webhook receiver on 127.0.0.1 that prints what it is sent and checks signatures (to try "
        "notifications and http jobs locally: the local stack may call loopback)",
        anywhere=("--display-zone",),  # (its lines carry the time)
    )
    receive.add_argument("--port", type=int, default=9000, help="port on 127.0.0.1 (default 9000; 0: any)")
    receive.add_argument(
        "--secret", metavar="SECRET", help="the jobs' whsec_ signing secret: check signatures"
    )
    receive.add_argument(
        "--fail-first", type=int, default=0, metavar="N", help="answer the first N requests with --fail-with"
    )
    receive.add_argument(
        "--fail-with", type=int, default=503, metavar="STATUS", help="(default 503: retried)"
    )

    command(
        commands,
        "new-secret",
        cmd_new_secret,
        "print a new signing secret (whsec_...) for --signing-secret",
        anywhere=(),
    )


def since_value(text: str | None, flag: str, clock: Clock) -> str | None:
    """`--since`/`--until`: an RFC 3339 time, or a duration back from now (`1h`: an hour ago)."""
    if text is None:
        return None
    try:
        parse_rfc3339(text)
        return text
    except ValueError:
        pass
    number = text.strip()
    if number.isdigit():
        # A bare number reads as hours to some and seconds to others: ask which.
        raise _usage(f"{flag}: give {number!r} a unit: {number}s, {number}m, {number}h or {number}d")
    try:
        return to_rfc3339(clock.now() - timedelta(seconds=_duration(text)))
    except common.UsageError:
        raise _usage(
            f"{flag}: an RFC 3339 time with offset, or a duration ago (30m, 2h, 1d), not {text!r}"
        ) from None
