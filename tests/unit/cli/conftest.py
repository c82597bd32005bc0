"""The API's test double on 127.0.0.1 for each CLI test, the CLI's clock held at NOW, and a cache
directory of the test's own (the ids the CLI has shown)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from punctual.platform.clock import ManualClock
from punctual_cli import common
from tests.unit.cli.fake_api import NOW, FakeApi, _handler_for


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeApi]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for variable in ("PUNCTUAL_ENDPOINT", "PUNCTUAL_PORT", "PUNCTUAL_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(common, "clock", ManualClock(NOW))
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
