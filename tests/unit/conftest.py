"""The `punctual` command's surroundings held still in unit tests: no config file of this machine, no
terminal width, and times shown in UTC whatever this machine's zone (a test sets its own)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from punctual.platform.clock import ManualClock
from punctual_cli import common, display
from tests.unit.cli.fake_api import NOW, FakeApi, _handler_for


@pytest.fixture(autouse=True)
def cli_surroundings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for variable in ("COLUMNS", "PUNCTUAL_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("PUNCTUAL_DISPLAY_ZONE", "UTC")
    monkeypatch.setattr(display, "current", display.Display())
    yield


@pytest.fixture
def cli_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    """The API's HTTP test double (fake_api.py) on 127.0.0.1, and the CLI's clock at its NOW."""
    for variable in ("PUNCTUAL_ENDPOINT", "PUNCTUAL_PORT", "PUNCTUAL_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(common, "clock", ManualClock(NOW))
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield fake
    server.shutdown()
    server.server_close()
