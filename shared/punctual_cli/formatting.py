"""How the CLI shows jobs, executions and schedules to people (`--json` bypasses all of this)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfoNotFoundError

from punctual_cli import display
from punctual_cli.display import Column

NONE = "-"

# What gives way when a table is wider than the terminal: cut columns (shrink) before leaving
# columns out (drop, 1 first); ids and statuses are never cut.
JOB_COLUMNS = (
    Column("ID"),
    Column("NAME", shrink=10, drop=3),
    Column("STATUS"),
    Column("SCHEDULE", shrink=12),
    Column("NEXT RUN", drop=2),
    Column("OUTCOME", shrink=9, drop=1),
)
DEAD_LETTER_COLUMNS = (
    Column("EXECUTION"),
    Column("JOB", shrink=10, drop=3),
    Column("SCHEDULED", drop=2),
    Column("DEAD-LETTERED", drop=1),
    Column("ERROR", shrink=12, drop=4),
)
EXECUTION_COLUMNS = (
    Column("ID"),
    Column("STATUS"),
    Column("SCHEDULED"),
    Column("STARTED", drop=2),
    Column("FINISHED", drop=1),
    Column("ATTEMPTS", drop=3),
    Column("LATENESS", drop=4),
    Column("ERROR", shrink=12, drop=5),
)


def table(headers: Sequence[str | Column], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, the last not padded, fitted to the reader's terminal."""
    columns = [h if isinstance(h, Column) else Column(h) for h in headers]
    return display.fit(columns, [list(row) for row in rows], display.current.width)


def details(pairs: Sequence[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in pairs) + 1
    return "\n".join(f"{(key + ':').ljust(width)}  {value}" for key, value in pairs)


def truncate(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_time(value: Any) -> str:
    """An API time in the display zone, marked: `2026-12-01 10:00:00 CET`, `2026-12-01 09:00:00Z`."""
    return display.current.time(value)


def run_time(value: Any, schedule: Any) -> str:
    """A run's time: a cron job's in its own zone beside UTC (and the display zone when that is a third
    one), `2026-12-07 09:00:00 CET (2026-12-07 08:00:00Z)`; any other in the display zone."""
    zone = schedule.get("timezone") if isinstance(schedule, dict) and schedule.get("type") == "cron" else None
    if not value or not zone or zone in display.UTC_NAMES or display.parse(value) is None:
        return short_time(value)
    try:
        own = display.current.time(value, zone)
    except (ZoneInfoNotFoundError, ValueError):
        return short_time(value)
    also = [display.current.time(value, "UTC")]
    if display.current.zone_name != zone and display.current.zone_name not in display.UTC_NAMES:
        also.append(short_time(value))
    return f"{own} ({', '.join(also)})"


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


def job_row(job: Mapping[str, Any], short_id: str | None = None) -> list[str]:
    return [
        short_id or str(job.get("id", NONE)),
        truncate(str(job.get("name") or NONE), 32),
        str(job.get("status", NONE)),
        schedule_summary(job.get("schedule")),
        short_time(job.get("next_run_at")),
        outcome_summary(job),
    ]


def jobs_table(jobs: Iterable[Mapping[str, Any]]) -> str:
    jobs = list(jobs)
    short = display.job_ids([str(job.get("id", NONE)) for job in jobs])
    return table(JOB_COLUMNS, [job_row(job, short[str(job.get("id", NONE))]) for job in jobs])


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
        ("next run", run_time(job.get("next_run_at"), job.get("schedule"))),
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
    letters = list(letters)
    short = display.execution_ids([str(letter.get("execution_id", NONE)) for letter in letters])
    rows = [
        [
            short[str(letter.get("execution_id", NONE))],
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


def execution_row(execution: Mapping[str, Any], short_id: str | None = None) -> list[str]:
    return [
        short_id or str(execution.get("id", NONE)),
        str(execution.get("status", NONE)),
        short_time(execution.get("scheduled_at")),
        short_time(execution.get("started_at")),
        short_time(execution.get("finished_at")),
        str(execution.get("attempts", NONE)),
        lateness(execution.get("lateness_ms")),
        truncate(str(execution.get("error") or ""), 60),
    ]


def executions_table(executions: Iterable[Mapping[str, Any]], job_id: str | None = None) -> str:
    """Executions as a table; those of `job_id` by what their ids add to the job's."""
    executions = list(executions)
    short = display.execution_ids([str(e.get("id", NONE)) for e in executions], job_id)
    rows = [execution_row(e, short[str(e.get("id", NONE))]) for e in executions]
    return table(EXECUTION_COLUMNS, rows)


def watch_line(
    now: datetime,
    execution: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    short_id: str | None = None,
    *,
    history: bool = False,
) -> str:
    """One line of `punctual watch`: a new execution, or a change of status or attempt, at `now`; or
    (`history`) an execution as it was when the watch began, at its own time (its end, its start or
    else its scheduled time)."""
    status = str(execution.get("status", NONE))
    if history:
        change = status
    elif previous is None:
        change = f"new {status}"
    elif previous.get("status") != status:
        change = f"{previous.get('status', NONE)} -> {status}"
    else:
        change = status
    own = execution.get("finished_at") or execution.get("started_at") or execution.get("scheduled_at")
    parts = [
        short_time(own) if history else display.current.clock(now),
        short_id or str(execution.get("id", NONE)),
        change,
        f"scheduled {short_time(execution.get('scheduled_at'))}",
        f"attempt {execution.get('attempts', NONE)}",
    ]
    if execution.get("lateness_ms") is not None:
        parts.append(f"late {lateness(execution.get('lateness_ms'))}")
    if execution.get("error"):
        parts.append(f"error: {truncate(str(execution['error']), 100)}")
    if execution.get("retry_of"):
        retried = str(execution["retry_of"])
        parts.append(f"retry of {display.execution_ids([retried])[retried]}")
    return fitted("  ".join(parts))


def fitted(line: str) -> str:
    """A line cut to the terminal's width (never wrapped)."""
    width = display.current.width
    return line if width is None else display.cut(line, width)


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
