"""The ids the CLI has shown, remembered per endpoint to take shortened ones back (shown.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from punctual_cli import shown

A = "http://127.0.0.1:8080"
B = "https://abc123.execute-api.eu-west-1.amazonaws.com"


def test_ids_are_remembered_per_endpoint(tmp_path: Path) -> None:
    # Given ids shown at two endpoints
    path = tmp_path / "shown-ids"
    shown.Shown(A, path).record(["job_1a2b3c4d5e6f70819a2b", "job_9f8e7d6c5b4a39281706"])
    shown.Shown(B, path).record(["job_1a2b3c4ff00112233445"])

    # When each endpoint's are asked for by a prefix
    at_a = shown.Shown(A, path).matching(lambda i: i.startswith("job_1a2b3c4"))
    at_b = shown.Shown(B, path).matching(lambda i: i.startswith("job_1a2b3c4"))

    # Then each has its own, and a CLI not yet connected remembers and finds nothing
    assert at_a == {"job_1a2b3c4d5e6f70819a2b"}
    assert at_b == {"job_1a2b3c4ff00112233445"}
    shown.Shown(None, path).record(["job_00000000000000000000"])
    assert shown.Shown(None, path).matching(lambda i: True) == set()
    assert "job_00000000000000000000" not in path.read_text()
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_file_is_cut_to_its_latest_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a file kept to 1,000 bytes
    monkeypatch.setattr(shown, "KEPT", 1_000)
    path = tmp_path / "shown-ids"
    remembered = shown.Shown(A, path)

    # When 100 ids are shown one table at a time
    for n in range(100):
        remembered.record([f"job_{n:020x}"])

    # Then the file stays under twice that, whole lines, and holds the latest
    assert path.stat().st_size <= 2_000
    found = remembered.matching(lambda i: True)
    assert f"job_{99:020x}" in found and f"job_{0:020x}" not in found
    assert all(line.startswith(A + "\t") for line in path.read_text().splitlines())


def test_a_file_that_cannot_be_written_or_read_is_passed_over(tmp_path: Path) -> None:
    # Given a cache path under a file, not a directory
    (tmp_path / "not-a-directory").write_text("")
    remembered = shown.Shown(A, tmp_path / "not-a-directory" / "shown-ids")

    # When ids are shown and looked for, then nothing is raised and nothing found
    remembered.record(["job_1a2b3c4d5e6f70819a2b"])
    assert remembered.matching(lambda i: True) == set()


def test_ids_shown_again_by_the_same_process_are_written_once(tmp_path: Path) -> None:
    # (`watch` shows the same executions every few seconds)
    path = tmp_path / "shown-ids"
    remembered = shown.Shown(A, path)
    for _ in range(50):
        remembered.record(["job_1a2b3c4d5e6f70819a2b.19aee40ea60.1", "job_1a2b3c4d5e6f70819a2b"])
    assert len(path.read_text().splitlines()) == 2
