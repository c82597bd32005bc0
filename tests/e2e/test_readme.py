"""The README's first steps, run as written, in order, against a local stack: its shell blocks under
"Your first job", so that they cannot drift from what the CLI does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def readme_blocks() -> list[str]:
    """The shell blocks of "Your first job" that use the CLI, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Your first job", 1)[1].split("\n## ", 1)[0]
    return [block for block in re.findall(r"```bash\n(.*?)```", section, re.S) if "punctual " in block]


@pytest.fixture
def readme_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack of its own, as `make run` starts one (the token `local`), on a free port: the README's
    jobs (one fails every minute) stay out of the other tests' stack."""
    local = Stack(tmp_path / "data", tmp_path / "stack.log", tokens={"local": "local"})
    try:
        yield local.start()
    finally:
        local.kill()


def test_the_readme_runs_as_written(readme_stack: Stack, tmp_path: Path) -> None:
    # Given the README's blocks, pointed at this test's stack as its banner says (PUNCTUAL_PORT, its
    # moto), with free ports for the receivers in case 9000 is taken here
    blocks = readme_blocks()
    assert len(blocks) == 3
    script = "\n".join(blocks)
    script = script.replace("MOTO=http://127.0.0.1:PORT", f"MOTO={readme_stack.moto_url()}")
    for port in ("9000", "9001"):
        script = script.replace(port, str(free_port()))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PUNCTUAL_PORT": str(readme_stack.port),
        "PUNCTUAL_CONFIG": str(tmp_path / "none.toml"),
        "PUNCTUAL_DISPLAY_ZONE": "UTC",
        "COLUMNS": "100",
    }

    # When they run in one shell, in order, stopping at the first command that fails (its output to
    # files: the receivers it leaves in the background hold them open)
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,  # (its receivers end with its process group)
        )
        try:
            shell.wait(timeout=120)
        finally:
            os.killpg(shell.pid, signal.SIGTERM)
    out, err = out_path.read_text(), err_path.read_text()

    # Then every command succeeded, and each step did what the README says it does
    assert shell.returncode == 0, f"{out}\n{err}\n{readme_stack.log()}"
    assert "SUCCEEDED" in out  # hello ran
    assert "CET (" in out and "Z)" in out  # nightly's next run in Paris time with UTC beside it
    assert "report-eu" in out and "warm-cache" in out  # the example batch file
    assert "FAILED" in out  # once failed, and was listed
    assert "redriven" in out  # the dead letter was listed and redriven
    assert "no dead letters" not in out
    assert all(len(line) <= 100 for line in out.splitlines() if not line.startswith("  {"))
