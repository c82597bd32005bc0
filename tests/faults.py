"""Faults injected into a running world: a process dying, or AWS refusing a call, at one place."""

from __future__ import annotations

from typing import Any

import pytest


class Crash(Exception):
    """The process died here."""


def once(
    target: Any, name: str, error: Exception, monkeypatch: pytest.MonkeyPatch | None = None
) -> dict[str, int]:
    """Make target.name raise `error` the first time it is called; count the calls. `monkeypatch`: for
    a target that outlives the test (a world's clients, made once a process), which it puts back."""
    real = getattr(target, name)
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return real(*args, **kwargs)

    if monkeypatch is None:
        setattr(target, name, wrapper)
    else:
        monkeypatch.setattr(target, name, wrapper)
    return calls
