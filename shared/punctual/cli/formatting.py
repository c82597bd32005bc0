"""How the CLI shows jobs, executions and schedules to people (`--json` bypasses all of this)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NONE = "-"

JOB_COLUMNS = ("ID", "NAME", "STATUS", "SCHEDULE", "NEXT RUN", "OUTCOME")
DEAD_LETTER_COLUMNS = ("EXECUTION", "JOB", "SCHEDULED", "DEAD-LETTERED", "ERROR")
EXECUTION_COLUMNS = ("ID", "STATUS", "SCHEDULED", "STARTED", "FINISHED", "ATTEMPTS", "LATENESS", "ERROR")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    lines = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)


def details(pairs: Sequence[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in pairs) + 1
    return "\n".join(f"{(key + ':').ljust(width)}  {value}" for key, value in pairs)


def truncate(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_time(value: Any) -> str:
    """`2026-12-01T09:00:00.000Z` → `2026-12-01 09:00:00Z` (the API always answers UTC)."""
    if not value:
        return NONE
    text = str(value)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if parsed.tzinfo is None:
        return text
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def in_zone(value: str, zone: str) -> str:
    """A UTC timestamp shown as wall-clock time in an IANA zone, or "" if either cannot be read."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        local = parsed.astimezone(ZoneInfo(zone))
    except (ValueError, ZoneInfoNotFoundError):
        return ""
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


def duration(seconds: Any) -> str:
    """300 → `5m`, 5400 → `1h30m`, 90 → `1m30s`, 0.5 → `0.5s`."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return NONE if seconds is None else str(seconds)
    if seconds != int(seconds) or seconds <= 0:
        return f"{seconds:g}s"
    remaining = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def lateness(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return NONE
    return f"{ms:.0f}ms" if abs(ms) < 1000 else f"{ms / 1000:.1f}s"


def schedule_summary(schedule: Mapping[str, Any] | None) -> str:
    if not schedule:
        return NONE
    kind = schedule.get("type")
    if kind == "now":
        text = "now"
    elif kind == "at":
        text = f"at {short_time(schedule.get('at'))}"
    elif kind == "cron":
        text = f"cron '{schedule.get('expression', '')}' {schedule.get('timezone') or 'UTC'}"
    elif kind == "rate":
        text = f"every {duration(schedule.get('every_seconds'))}"
    else:
        return json.dumps(schedule, separators=(",", ":"))
    if schedule.get("start_at"):
        text += f" from {short_time(schedule['start_at'])}"
    if schedule.get("end_at"):
        text += f" until {short_time(schedule['end_at'])}"
    return text


def task_summary(task: Mapping[str, Any] | str | None, params: Any = None) -> str:
    if isinstance(task, str):  # a named task
        shown = f" {json.dumps(params, separators=(',', ':'))}" if params else ""
        return f"{task} (named task){shown}"
    if not task:
        return NONE
    kind = str(task.get("type", "?"))
    params = task.get("params") or {}
    if kind == "http" and params.get("url"):
        return f"http {params.get('method') or 'POST'} {params['url']}"
    if kind == "sleep" and "seconds" in params:
        return f"sleep {duration(params['seconds'])}"
    if params:
        return f"{kind} {json.dumps(params, separators=(',', ':'))}"
    return kind


def retry_summary(retry: Mapping[str, Any] | None) -> str:
    if not retry:
        return NONE
    parts = []
    if "max_attempts" in retry:
        parts.append(counted(retry["max_attempts"], "attempt"))
    if "backoff_seconds" in retry:
        parts.append(f"backoff {duration(retry['backoff_seconds'])}")
    if "max_backoff_seconds" in retry:
        parts.append(f"max {duration(retry['max_backoff_seconds'])}")
    return ", ".join(parts) or json.dumps(retry)


def outcome_summary(job: Mapping[str, Any]) -> str:
    """`FAILED (3 in a row)`, `SUCCEEDED`; from the last execution for an API without outcomes."""
    outcome = job.get("outcome")
    if isinstance(outcome, dict) and outcome.get("status"):
        failures = outcome.get("consecutive_failures") or 0
        return str(outcome["status"]) + (f" ({failures} in a row)" if failures > 1 else "")
    last = job.get("last_execution")
    return str(last.get("status", NONE)) if isinstance(last, dict) else NONE


def job_row(job: Mapping[str, Any]) -> list[str]:
    return [
        str(job.get("id", NONE)),
        truncate(str(job.get("name") or NONE), 32),
        str(job.get("status", NONE)),
        schedule_summary(job.get("schedule")),
        short_time(job.get("next_run_at")),
        outcome_summary(job),
    ]


def jobs_table(jobs: Iterable[Mapping[str, Any]]) -> str:
    return table(JOB_COLUMNS, [job_row(job) for job in jobs])


def job_details(job: Mapping[str, Any]) -> str:
    pairs = [
        ("id", str(job.get("id", NONE))),
        ("name", str(job.get("name") or NONE)),
        ("status", str(job.get("status", NONE))),
        ("schedule", schedule_summary(job.get("schedule"))),
        ("task", task_summary(job.get("task"), job.get("params"))),
        ("retry", retry_summary(job.get("retry")) if job.get("retry") else _inherited(job)),
        ("timeout", duration(job.get("timeout_seconds")) if job.get("timeout_seconds") else _inherited(job)),
        ("policy", policy_summary(job.get("policy"))),
        ("tags", tags_summary(job.get("tags"))),
        ("next run", short_time(job.get("next_run_at"))),
        ("outcome", outcome_summary(job)),
        ("last execution", execution_summary(job.get("last_execution"))),
        ("created", short_time(job.get("created_at"))),
        ("updated", short_time(job.get("updated_at"))),
    ]
    if job.get("pause_note"):
        pairs.insert(3, ("paused", f"{job['pause_note']} (since {short_time(job.get('paused_at'))})"))
    for i, rule in enumerate(job.get("notify") or []):
        pairs.append((f"notify[{i}]", notify_summary(rule)))
    signing = job.get("signing")
    if isinstance(signing, dict) and signing.get("enabled"):
        until = signing.get("previous_valid_until")
        pairs.append(
            ("signing", "on" + (f" (the previous secret too until {short_time(until)})" if until else ""))
        )
    return details(pairs)


def _inherited(job: Mapping[str, Any]) -> str:
    return "the task's" if isinstance(job.get("task"), str) else NONE


def tags_summary(tags: Any) -> str:
    if not isinstance(tags, dict) or not tags:
        return NONE
    return ", ".join(f"{key}:{value}" for key, value in sorted(tags.items()))


def task_details(task: Mapping[str, Any]) -> str:
    """A named task for people."""
    schema = task.get("params_schema")
    pairs = [
        ("name", str(task.get("name", NONE))),
        ("type", str(task.get("type", NONE))),
        ("version", str(task.get("version", NONE))),
        ("description", str(task.get("description") or NONE)),
        ("params", json.dumps(task.get("params") or {}, separators=(",", ":"))),
        ("params_schema", NONE if schema is None else json.dumps(schema, separators=(",", ":"))),
        ("retry", retry_summary(task.get("retry")) if task.get("retry") else "default"),
        (
            "timeout",
            duration(task.get("timeout_seconds")) if task.get("timeout_seconds") else "default (60s)",
        ),
        ("tags", tags_summary(task.get("tags"))),
        ("created", short_time(task.get("created_at"))),
        ("updated", short_time(task.get("updated_at"))),
    ]
    return details(pairs)


TASK_COLUMNS = ("NAME", "TYPE", "VERSION", "TAGS", "DESCRIPTION")


def named_tasks_table(items: Iterable[Mapping[str, Any]]) -> str:
    rows = [
        [
            str(t.get("name")),
            str(t.get("type")),
            str(t.get("version")),
            truncate(tags_summary(t.get("tags")), 40),
            truncate(str(t.get("description") or ""), 60),
        ]
        for t in items
    ]
    return table(TASK_COLUMNS, rows)


def notify_summary(rule: Any) -> str:
    if not isinstance(rule, dict):
        return NONE
    events = [
        f"late>{duration(rule.get('late_after_seconds'))}" if event == "late" else str(event)
        for event in rule.get("on") or []
    ]
    return f"{','.join(events)} -> {rule.get('to', NONE)}"


def dead_letters_table(letters: Iterable[Mapping[str, Any]]) -> str:
    rows = [
        [
            str(letter.get("execution_id", NONE)),
            truncate(str(letter.get("job_name") or letter.get("job_id") or NONE), 32),
            short_time(letter.get("scheduled_at")),
            short_time(letter.get("dead_lettered_at")),
            truncate(str(letter.get("error") or ""), 60),
        ]
        for letter in letters
    ]
    return table(DEAD_LETTER_COLUMNS, rows)


# The job policy's fields this CLI words (`policy_summary`); any other is shown as the API gives it.
POLICY_FIELDS = frozenset(
    {"max_lateness_seconds", "overlap", "flexible_window_seconds", "max_runs", "pause_after_failures"}
)


def policy_summary(policy: Any) -> str:
    """What the job's policy changes, or `default` if nothing."""
    if not isinstance(policy, dict):
        return NONE
    parts = []
    if policy.get("max_lateness_seconds") is not None:
        parts.append(f"skip if later than {duration(policy['max_lateness_seconds'])}")
    if policy.get("overlap") not in (None, "allow"):
        parts.append(f"overlap {policy['overlap']}")
    if policy.get("flexible_window_seconds"):
        parts.append(f"spread over {duration(policy['flexible_window_seconds'])}")
    if policy.get("max_runs") is not None:
        parts.append(f"at most {counted(policy['max_runs'], 'run')}")
    if policy.get("pause_after_failures") is not None:
        parts.append(f"pause after {counted(policy['pause_after_failures'], 'failure')} in a row")
    # A field of a newer API than this CLI: shown as it is rather than hidden behind "default".
    parts += [
        f"{key} {json.dumps(value)}"
        for key, value in sorted(policy.items())
        if key not in POLICY_FIELDS and value is not None
    ]
    return ", ".join(parts) or "default"


def counted(count: Any, noun: str) -> str:
    """`1 attempt`, `3 attempts`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def execution_summary(execution: Any) -> str:
    if not isinstance(execution, dict):
        return NONE
    text = f"{execution.get('status', NONE)} (scheduled {short_time(execution.get('scheduled_at'))}"
    text += (
        f", attempts {execution.get('attempts', NONE)}, lateness {lateness(execution.get('lateness_ms'))})"
    )
    if execution.get("error"):
        text += f": {truncate(str(execution['error']), 80)}"
    return text


def execution_row(execution: Mapping[str, Any]) -> list[str]:
    return [
        str(execution.get("id", NONE)),
        str(execution.get("status", NONE)),
        short_time(execution.get("scheduled_at")),
        short_time(execution.get("started_at")),
        short_time(execution.get("finished_at")),
        str(execution.get("attempts", NONE)),
        lateness(execution.get("lateness_ms")),
        truncate(str(execution.get("error") or ""), 60),
    ]


def executions_table(executions: Iterable[Mapping[str, Any]]) -> str:
    return table(EXECUTION_COLUMNS, [execution_row(execution) for execution in executions])


def watch_line(now: datetime, execution: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
    """One line of `punctual watch`: a new execution, or a change of status or attempt."""
    status = str(execution.get("status", NONE))
    if previous is None:
        change = f"new {status}"
    elif previous.get("status") != status:
        change = f"{previous.get('status', NONE)} -> {status}"
    else:
        change = status
    parts = [
        now.astimezone(UTC).strftime("%H:%M:%S"),
        str(execution.get("id", NONE)),
        change,
        f"scheduled {short_time(execution.get('scheduled_at'))}",
        f"attempt {execution.get('attempts', NONE)}",
    ]
    if execution.get("lateness_ms") is not None:
        parts.append(f"late {lateness(execution.get('lateness_ms'))}")
    if execution.get("error"):
        parts.append(f"error: {truncate(str(execution['error']), 100)}")
    if execution.get("retry_of"):
        parts.append(f"retry of {execution['retry_of']}")
    return "  ".join(parts)


def tasks_text(answer: Mapping[str, Any]) -> str:
    """`GET /tasks` for people: each type, its parameters (`*` required) and what it does; then
    the caller's named tasks."""
    blocks = []
    # (`types`; an API from before named tasks listed the types as `items`)
    types = answer.get("types") if "types" in answer else answer.get("items")
    for item in types or []:
        schema = item.get("params") or {}
        required = set(schema.get("required") or [])
        params = [f"{name}*" if name in required else name for name in schema.get("properties") or {}]
        blocks.append(
            details(
                [
                    ("type", str(item.get("type"))),
                    ("params", ", ".join(params) or "none"),
                    ("does", " ".join(str(item.get("description") or "").split())),
                ]
            )
        )
    text = "\n\n".join(blocks) + "\n\n(* required; `punctual tasks --json` for each parameter's schema)"
    if "types" in answer:
        named = answer.get("items") or []
        text += "\n\nyour tasks:\n" + (named_tasks_table(named) if named else "none (punctual tasks create)")
    return text
