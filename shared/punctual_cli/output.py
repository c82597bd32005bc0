"""How a command prints what the API answered: as JSON (`--json`), as ids only (`-q`), or for
people; a page of a list with the hint to the rest."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from punctual_client.transport import JsonObject


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def show(value: Any, args: argparse.Namespace, render: Callable[[Any], str]) -> None:
    if getattr(args, "quiet", False):
        print_ids([value])
    elif args.json:
        emit_json(value)
    else:
        print(render(value))


def show_page(
    page: JsonObject, args: argparse.Namespace, render: Callable[[list[Any]], str], noun: str
) -> None:
    if getattr(args, "quiet", False):
        print_ids(page.get("items") or [])
        return
    if args.json:
        emit_json(page)
        return
    items = page.get("items") or []
    print(render(items) if items else f"no {noun}")
    if page.get("next_cursor"):
        print(more_hint(noun), file=sys.stderr)


def more_hint(noun: str) -> str:
    """What to do for the rest of a list: the cursor itself (hundreds of characters) is in --json."""
    return f"(more {noun}: --all, or --cursor NEXT_CURSOR from --json)"


def print_ids(items: list[Any], key: str = "id") -> None:
    for item in items:
        if isinstance(item, dict) and item.get(key):
            print(item[key])
