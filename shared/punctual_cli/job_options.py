"""The options that describe a job — its schedule, task, retry and policy — and the API request
body they make (`--cron '0 9 * * *' --tz Europe/Paris` to `{"type": "cron", ...}`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from punctual_cli import display
from punctual_cli.common import (
    UsageError,
    check_timestamp,
    parse_duration,
    parse_json,
    parse_pair,
    positive_int,
)
from punctual_client.endpoints import scheme_hint
from punctual_client.transport import JsonObject

# The built-in task types: any other --task names one of your named tasks (whose names never clash).
BUILTIN_TYPES = ("http", "lambda", "sqs", "sns", "eventbridge", "stepfunctions", "noop", "sleep", "fail")
MIN_EVERY_SECONDS = 60  # a rate schedule's shortest period (schedule.every_seconds)


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


def task_flags_given(args: argparse.Namespace) -> bool:
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
    if ":" in text.partition("=")[0] and "\\=" not in text:
        return text
    key, value = split_tag(text)
    if not key.strip():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE or KEY, got {text!r}")
    return key.strip() if value is None else f"{key.strip()}:{value}"


def split_tag(text: str) -> tuple[str, str | None]:
    """`KEY=VALUE` at its first `=` not written `\\=`: a tag key may hold `=` (docs/api.md), written
    so. A key holds no backslash, so `\\=` in one can only be that. No `=`: the key alone."""
    i = 0
    while (i := text.find("=", i)) != -1:
        if i == 0 or text[i - 1] != "\\":
            # (a value's `\=` is read as `=` too: whoever wrote one meant it)
            return text[:i].replace("\\=", "="), text[i + 1 :].replace("\\=", "=")
        i += 1
    return text.replace("\\=", "="), None


def build_tags(items: Sequence[str]) -> JsonObject:
    tags: JsonObject = {}
    for item in items:
        key, value = split_tag(item)
        if value is None or not key.strip():
            raise UsageError(f"--tag takes KEY=VALUE (a key's own = written \\=), got {item!r}")
        tags[key.strip()] = value
    return tags


def named_task(args: argparse.Namespace) -> str | None:
    """The named task --task names (not a built-in type), or None."""
    task = getattr(args, "task", None)
    return task if task is not None and task not in BUILTIN_TYPES else None


def build_task(args: argparse.Namespace, current: Mapping[str, Any] | None = None) -> JsonObject | None:
    """The API task from --task and its parameters.

    Without --task, parameters change the `current` task (a job being updated) and keep the rest.
    Precedence: --params, then --param k=v, then the specific flags (--url, --seconds, ...).
    """
    if args.task is None and not task_flags_given(args):
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
    zone_help = (
        "IANA time zone of --cron (default: the job's zone); alone, a cron job's new zone"
        if command == "update"
        else "IANA time zone of --cron (default UTC)"
    )
    group.add_argument("--tz", metavar="ZONE", help=zone_help)
    group.add_argument("--start-at", metavar="TIME", help="--cron/--every: not before this time")
    group.add_argument("--end-at", metavar="TIME", help="--cron/--every: runs before this time (none at it)")


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
