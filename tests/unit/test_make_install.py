"""The first `make run` installs for a minute or more: it says what it is doing, step by step."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_each_install_step_is_announced_before_it_runs() -> None:
    # Given the install recipe as make would run it on a fresh clone (printed, not run)
    printed = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", ".venv/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.splitlines()

    # Then every command that takes time comes right after a line that says what it does
    slow = [i for i, line in enumerate(printed) if " -m venv " in line or "pip install" in line]
    assert len(slow) == 3
    for index in slow:
        assert printed[index - 1].startswith("echo "), printed[index]
    assert "pip install" in printed[slow[-1]] and "about a minute" in printed[slow[-1] - 1]
