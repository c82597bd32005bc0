"""docs/client.md's first job, run as written against a local stack."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from punctual_client._client import Client
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_the_docs_first_job_from_python_runs_as_written(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given the first Python block of the page, and the stack where it looks for one
    block = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    monkeypatch.setenv("PUNCTUAL_ENDPOINT", stack.url)
    monkeypatch.setenv("PUNCTUAL_TOKEN", "alice-token")
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(tmp_path / "none.toml"))

    # When it runs
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.group(1), str(DOC), "exec"), {})

    # Then it created a job whose first execution succeeded, and said so
    job_id, status = printed.getvalue().split()[:2]
    assert status == "ACTIVE"
    assert "SUCCEEDED" in printed.getvalue().splitlines()[1]
    [execution] = Client().executions(job_id)
    assert execution.status == "SUCCEEDED" and execution.finished_at is not None
