"""`punctual tasks`: the built-in task types, and your named tasks (create, get, update, delete)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from punctual_cli.common import (
    EXIT_OK,
    UsageError,
    add_paging_options,
    parse_duration,
    parse_json,
    positive_int,
    until_unmoved,
)
from punctual_cli.job_options import BUILTIN_TYPES, build_params, build_retry, build_tags, tag_filter
from punctual_cli.output import more_hint, show
from punctual_cli.views import tasks as task_views
from punctual_client.transport import JsonObject, PunctualClient


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
    if not changes:
        raise UsageError(
            "nothing to change: give --type, --param(s), --schema, --description, --tag, retry or --timeout"
        )
    given = changes.get("params")

    def update() -> JsonObject:
        version = None
        if args.param and args.params is None:
            # --param amends the defaults rather than replacing them all: on condition that the task is
            # still as read, so that a change made meanwhile is not undone.
            current = client.get_task(args.name)
            changes["params"] = dict(current.get("params") or {}) | dict(given or {})
            version = current.get("version") if isinstance(current.get("version"), int) else None
        return client.update_task(args.name, changes, version=version)

    show(until_unmoved(update), args, task_views.task_details)
    return EXIT_OK


def cmd_tasks_delete(client: PunctualClient, args: argparse.Namespace) -> int:
    show(client.delete_task(args.name), args, task_views.task_details)
    return EXIT_OK


def register(commands: Any, command: Callable[..., Any]) -> None:
    """Add `tasks` and its actions to the parser (`command` makes one, as build_parser does)."""
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
    add_paging_options(listed)
    command(task_commands, "create", cmd_tasks_create, "define a named task", task_options)
    command(task_commands, "get", cmd_tasks_get, "show a named task", task_name)
    command(
        task_commands, "update", cmd_tasks_update, "change a named task (its jobs run it next)", task_options
    )
    command(task_commands, "delete", cmd_tasks_delete, "delete a named task no active job uses", task_name)
