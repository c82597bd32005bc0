"""The collector paused while a request is answered (platform/collector.py): on again after it, as it
was before. (Across the local stack's threads: tests/local/test_collector.py.)"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from punctual.platform import collector


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_off_in_the_block_and_on_again_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_off_before_stays_off() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()
