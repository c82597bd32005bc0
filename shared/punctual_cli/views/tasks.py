"""How the CLI shows tasks: the built-in types with their parameters, and your named tasks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from punctual_cli.formatting import NONE, details, duration, short_time, table, truncate
from punctual_cli.views.jobs import retry_summary, tags_summary


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
