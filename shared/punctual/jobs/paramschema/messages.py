"""What a refused schema or a misfit instance reports: the errors, and the paths and values they show.

A schema's place is written by the checker as it descends (`properties.to.type`); an instance's
path (`body.to`, `items[2]`) is built here so every keyword's message names it the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class SchemaError(ValueError):
    """The schema is refused: `where` is a path into it (`properties.to.type`), empty for the root."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Invalid:
    """Why an instance does not fit: `path` into it (`body.to`, `items[2]`), empty for the whole."""

    path: str
    message: str


class BudgetExceeded(Exception):
    pass


# How much of a name, a value or a message an error shows: an error costs what its text does.
_NAME_CHARS = 64
_SHOWN_CHARS = 60
_MESSAGE_CHARS = 500


def _path(parts: list[str]) -> str:
    text = ""
    for part in parts:
        if len(part) > _NAME_CHARS:
            part = part[: _NAME_CHARS - 3] + "..."
        text += part if part.startswith("[") else (f".{part}" if text else part)
    return text


def _show(value: Any) -> str:
    """A value as JSON, cut after _SHOWN_CHARS characters, costing what the shown part does."""
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    if type(value) is int and -(10**15) < value < 10**15:
        return str(value)
    pieces: list[str] = []
    left = [_SHOWN_CHARS + 1]

    def emit(text: str) -> bool:
        pieces.append(text[: left[0]])
        left[0] -= len(text)
        return left[0] > 0

    def write(item: Any) -> bool:
        if isinstance(item, str):
            return emit(json.dumps(item[: left[0]]) if len(item) > left[0] else json.dumps(item))
        if isinstance(item, list):
            if not emit("["):
                return False
            for i, element in enumerate(item):
                if (i and not emit(", ")) or not write(element):
                    return False
            return emit("]")
        if isinstance(item, dict):
            if not emit("{"):
                return False
            for i, (key, element) in enumerate(item.items()):
                if (i and not emit(", ")) or not write(key) or not emit(": ") or not write(element):
                    return False
            return emit("}")
        return emit(json.dumps(item))

    write(value)
    text = "".join(pieces)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _clip(message: str) -> str:
    return message if len(message) <= _MESSAGE_CHARS else message[: _MESSAGE_CHARS - 3] + "..."
