"""A data directory the stack cannot use is a clear error at start, never a silent loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, Stack, free_port

pytestmark = pytest.mark.e2e


def run_stack(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`punctual local` on data_dir, expected to refuse to start."""
    command = [sys.executable, "-m", "punctual.cli", "local", "--port", str(free_port())]
    command += ["--data-dir", str(data_dir)]
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack(tmp_path / "data", tmp_path / "stack.log")
    try:
        yield stack.start()
    finally:
        stack.kill()


def test_a_second_stack_on_the_same_data_directory_refuses_to_start(running: Stack) -> None:
    refused = run_stack(running.data_dir)
    assert refused.returncode == 1, refused
    assert "in use by another `punctual local`" in refused.stderr
    assert running.client().health()


def test_data_written_by_a_newer_format_is_refused_not_misread(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    header = {"format": "punctual-local-snapshot", "version": 99, "through": 0, "items": 0}
    (data_dir / "snapshot.jsonl").write_text(json.dumps(header) + "\n")
    refused = run_stack(data_dir)
    assert refused.returncode == 1, refused
    assert "newer Punctual (format version 99" in refused.stderr
    assert (data_dir / "snapshot.jsonl").read_text() == json.dumps(header) + "\n"  # left as it was


def test_a_data_directory_that_cannot_be_created_is_refused_saying_why(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    refused = run_stack(blocker / "data")
    assert refused.returncode == 1, refused
    assert "cannot use the data directory" in refused.stderr
    assert "Traceback" not in refused.stderr
