"""How a command prints what the API answered: as JSON (`--json`), as ids only (`-q`), or for
people; a page of a list with the hint to the rest.

What comes from outside goes out through `say` (for people), `json_text` or `print_ids`: an
execution's error is what a webhook receiver answered and an API's message may echo what was sent, and
a control character in either would reach the terminal as a command (clear the screen, set the window
title) were it not shown as its escape."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import IO, Any

from punctual_cli import display
from punctual_client.transport import JsonObject

# What JSON leaves as it is (written with its non-ASCII characters) that a terminal acts on: DEL and
# the C1 controls; JSON escapes the C0 ones itself.
_UNESCAPED_IN_JSON = re.compile(r"[\x7f-\x9f]")


def say(text: str, file: IO[str] | None = None, *, flush: bool = False) -> None:
    """Print `text` for people (stdout, else `file`), its lines kept, any other control character
    shown as its escape (display.escaped)."""
    print(display.escaped(text, keep="\n"), file=file, flush=flush)


def json_text(value: Any, indent: int | None = 2) -> str:
    """`value` as JSON, non-ASCII characters as they are but no character a terminal acts on."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _UNESCAPED_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def emit_json(value: Any) -> None:
    print(json_text(value))


def show(value: Any, args: argparse.Namespace, render: Callable[[Any], str]) -> None:
    if getattr(args, "quiet", False):
        print_ids([value])
    elif args.json:
        emit_json(value)
    else:
        say(render(value))


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
    say(render(items) if items else f"no {noun}")
    if page.get("next_cursor"):
        say(more_hint(noun), sys.stderr)


def more_hint(noun: str) -> str:
    """What to do for the rest of a list: the cursor itself (hundreds of characters) is in --json."""
    return f"(more {noun}: --all, or --cursor NEXT_CURSOR from --json)"


def print_ids(items: list[Any], key: str = "id") -> None:
    for item in items:
        if isinstance(item, dict) and item.get(key):
            print(display.escaped(str(item[key])))  # one a line, whatever it holds
