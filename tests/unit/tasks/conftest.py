"""One webhook receiver per test module, emptied before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.tasks.webhook import Webhook


@pytest.fixture(scope="module")
def webhook_server() -> Iterator[Webhook]:
    hook = Webhook()
    hook.thread.start()
    yield hook
    hook.release.set()
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def webhook(webhook_server: Webhook) -> Iterator[Webhook]:
    """One server for the module; each test starts with no requests and default replies."""
    webhook_server.received.clear()
    webhook_server.replies.clear()
    webhook_server.release.clear()
    yield webhook_server
    webhook_server.release.set()  # let a hanging handler finish
