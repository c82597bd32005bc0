"""Faults injected into a running world: a process dying, or AWS refusing a call, at one place."""

from __future__ import annotations

from typing import Any


class Crash(Exception):
    """The process died here."""


def once(target: Any, name: str, error: Exception) -> dict[str, int]:
    """Make target.name raise `error` the first time it is called; count the calls."""
    real = getattr(target, name)
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return real(*args, **kwargs)

    setattr(target, name, wrapper)
    return calls
