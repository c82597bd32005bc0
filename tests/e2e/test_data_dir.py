"""A data directory the stack cannot use is a clear error at start, never a silent loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from punctual_client.errors import ApiError
from tests.e2e.conftest import ROOT, Stack, free_port

pytestmark = pytest.mark.e2e


def run_stack(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`punctual local` on data_dir, expected to refuse to start."""
    command = [sys.executable, "-m", "punctual_cli", "local", "--port", str(free_port())]
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


def test_a_second_stack_on_the_same_data_directory_refuses_to_start(stack: Stack) -> None:
    # (the shared stack's directory: a stack of its own would cost a start and a stop, for a refusal
    # that leaves the running stack as it was, as this checks)
    refused = run_stack(stack.data_dir)
    assert refused.returncode == 1, refused
    assert "in use by another `punctual local`" in refused.stderr
    assert stack.client().health()


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


def test_a_disk_that_fills_up_makes_writes_fail_with_503_and_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    # Given a stack whose files cannot grow past 200 KB (as on a disk that is nearly full)
    full = Stack(tmp_path / "data", tmp_path / "full.log", file_size_limit=200_000)
    try:
        client = full.start().client()
        # When jobs are created until a creation fails
        acknowledged: list[str] = []
        job = {"task": {"type": "noop"}, "schedule": {"type": "at", "at": "2030-01-01T00:00:00Z"}}
        for _ in range(1000):
            try:
                acknowledged.append(client.create_job(job)["id"])
            except ApiError as exc:
                refused = exc
                break
        else:
            raise AssertionError("the journal never filled the file size limit")
        # Then it is answered 503, saying why, and so are the writes after it; reads go on
        assert refused.status == 503, refused.body
        assert "cannot save changes" in refused.message and "File too large" in refused.message
        with pytest.raises(ApiError) as again:
            client.update_job(acknowledged[0], {"name": "renamed"})
        assert again.value.status == 503
        assert client.get_job(acknowledged[0])["name"] != "renamed"
    finally:
        full.kill()

    # And after a restart with room again, every acknowledged job is there
    roomy = Stack(tmp_path / "data", tmp_path / "roomy.log")
    try:
        client = roomy.start().client()
        assert all(client.get_job(job_id)["id"] == job_id for job_id in acknowledged)
        assert len(acknowledged) > 10
    finally:
        roomy.kill()
