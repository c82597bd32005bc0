"""References to the execution in a task's parameters, substituted when it runs.

A string parameter may name the execution it runs for: `{{ execution.id }}`,
`{{ execution.scheduled_at }}` (RFC 3339, UTC), `{{ execution.attempt }}` (1, 2, ...), `{{ job.id }}`,
`{{ job.name }}`. A string that is one reference and nothing else takes the value with its type
(`"{{ execution.attempt }}"` becomes the number 2); inside longer text it is written as text.
`{{ job.name | urlencode }}` percent-encodes the value (for a URL's path or query). `{{ "{{" }}`
writes two braces. An unknown reference is refused when the job or task is created (the field named).

Bounded: at most MAX_REFERENCES references in one task's parameters, each value short, so what is
substituted stays within a few times the parameters' size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

REFERENCES = ("execution.id", "execution.scheduled_at", "execution.attempt", "job.id", "job.name")
FILTERS = ("urlencode",)
MAX_REFERENCES = 100
_BRACES = re.compile(r"\{\{(.{0,200}?)\}\}", re.DOTALL)
_INNER = re.compile(
    r"\s*(?:(?P<name>[a-z_]+\.[a-z_]+)\s*(?:\|\s*(?P<filter>[a-z_]+)\s*)?|(?P<q>[\"'])\{\{(?P=q)\s*)"
)


class TemplateError(ValueError):
    """An unknown or malformed reference; `path` is where it is (`body.text`, `headers.X-Id`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def _strings(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string value inside `value`, with its path (keys are not templates)."""
    found: list[tuple[str, str]] = []
    pending: list[tuple[Any, str]] = [(value, path)]
    while pending:
        item, where = pending.pop()
        if isinstance(item, str):
            if "{{" in item:
                found.append((where, item))
        elif isinstance(item, dict):
            pending.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            pending.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return found


def check(value: Any) -> int:
    """Refuse (TemplateError) unknown or malformed references; returns how many there are."""
    count = 0
    for where, text in sorted(_strings(value)):
        for match in _BRACES.finditer(text):
            inner = _INNER.fullmatch(match.group(1))
            if inner is None:
                raise TemplateError(
                    where,
                    f"{match.group(0)!r} is not a reference: write {{{{ NAME }}}} with NAME one of {', '.join(REFERENCES)}",
                )
            name, applied = inner.group("name"), inner.group("filter")
            if name is not None and name not in REFERENCES:
                raise TemplateError(where, f"unknown reference {name!r}; known: {', '.join(REFERENCES)}")
            if applied is not None and applied not in FILTERS:
                raise TemplateError(where, f"unknown filter {applied!r}; known: {', '.join(FILTERS)}")
            count += 1
        if count > MAX_REFERENCES:
            raise TemplateError(where, f"more than {MAX_REFERENCES} references in one task's parameters")
    return count


def has_references(value: Any) -> bool:
    try:
        # (a reference's braces show in the JSON text as they are: most parameters, that hold none,
        # are told so without a walk of every value)
        if "{{" not in json.dumps(value):
            return False
    except (TypeError, ValueError, RecursionError):
        pass
    return bool(_strings(value))


def render(value: Any, values: Mapping[str, Any]) -> Any:
    """`value` with its references replaced by `values` (by reference name); raises TemplateError
    for a reference `check` would refuse."""
    if not has_references(value):
        return value
    check(value)
    return _render(value, values)


def _render(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return _render_text(value, values) if "{{" in value else value
    if isinstance(value, dict):
        return {k: _render(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, values) for v in value]
    return value


def _render_text(text: str, values: Mapping[str, Any]) -> Any:
    whole = _BRACES.fullmatch(text)
    if whole is not None:
        inner = _INNER.fullmatch(whole.group(1))
        if inner is not None and inner.group("name") and not inner.group("filter"):
            return values[inner.group("name")]  # the value with its own type

    def substitute(match: re.Match[str]) -> str:
        inner = _INNER.fullmatch(match.group(1))
        assert inner is not None  # (checked)
        if inner.group("name") is None:
            return "{{"
        shown = str(values[inner.group("name")])
        return quote(shown, safe="") if inner.group("filter") == "urlencode" else shown

    return _BRACES.sub(substitute, text)
