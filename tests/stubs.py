"""Name resolution stand-ins: the address guard is tested without looking anything up."""

from __future__ import annotations


class StubResolver:
    """Answers from a table, and records what it was asked."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.answers[host]


def no_lookups(host: str, port: int) -> list[str]:
    raise AssertionError(f"unexpected lookup of {host!r}")
