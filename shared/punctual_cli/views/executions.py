"""How the CLI shows executions: a table of them, the line `punctual watch` prints for a change,
and the dead-lettered ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from punctual_cli import display
from punctual_cli.display import Column
from punctual_cli.formatting import NONE, fitted, lateness, short_time, table, truncate

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
    ]
    # (0 is no attempt recorded yet: a run under way is stored with its attempt at its end)
    if execution.get("attempts"):
        parts.append(f"attempt {execution['attempts']}")
    if execution.get("lateness_ms") is not None:
        parts.append(f"late {lateness(execution.get('lateness_ms'))}")
    if execution.get("error"):
        parts.append(f"error: {truncate(str(execution['error']), 100)}")
    if execution.get("retry_of"):
        retried = str(execution["retry_of"])
        parts.append(f"retry of {display.execution_ids([retried])[retried]}")
    return fitted("  ".join(parts))


DEAD_LETTER_COLUMNS = (
    Column("EXECUTION"),
    Column("JOB", shrink=10, drop=3),
    Column("SCHEDULED", drop=2),
    Column("DEAD-LETTERED", drop=1),
    Column("ERROR", shrink=12, drop=4),
)


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
