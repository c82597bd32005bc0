"""Two calls side by side (punctual.concurrency.side_by_side)."""

from __future__ import annotations

import threading

import pytest

from punctual.concurrency import side_by_side


def test_the_two_run_at_once_and_their_results_come_back_in_order() -> None:
    second_started = threading.Event()

    def first() -> str:
        # (would time out were the second run only after it)
        assert second_started.wait(10)
        return "a"

    def second() -> int:
        second_started.set()
        return 2

    assert side_by_side(first, second) == ("a", 2)


def test_when_the_first_raises_the_second_has_still_run_to_its_end() -> None:
    ended = threading.Event()

    def first() -> None:
        raise ValueError("first")

    def second() -> None:
        ended.wait(0.05)
        ended.set()

    with pytest.raises(ValueError, match="first"):
        side_by_side(first, second)
    assert ended.is_set()


def test_when_the_second_raises_its_error_comes_back_after_the_first_ran() -> None:
    ran: list[str] = []

    def second() -> None:
        raise KeyError("second")

    with pytest.raises(KeyError, match="second"):
        side_by_side(lambda: ran.append("first"), second)
    assert ran == ["first"]
