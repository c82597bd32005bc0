"""How the CLI shows jobs: a table of them, one job in detail, and the summaries of a job's
schedule, task, retry, policy, notifications, tags and outcome."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from punctual_cli import display
from punctual_cli.display import Column
from punctual_cli.formatting import (
    NONE,
    counted,
    details,
    duration,
    lateness,
    run_time,
    short_time,
    table,
    truncate,
)

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


def notify_summary(rule: Any) -> str:
    if not isinstance(rule, dict):
        return NONE
    events = [
        f"late>{duration(rule.get('late_after_seconds'))}" if event == "late" else str(event)
        for event in rule.get("on") or []
    ]
    return f"{','.join(events)} -> {rule.get('to', NONE)}"


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
