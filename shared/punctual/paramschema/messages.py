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


def _path(parts: list[str]) -> str:
    text = ""
    for part in parts:
        text += part if part.startswith("[") else (f".{part}" if text else part)
    return text


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
