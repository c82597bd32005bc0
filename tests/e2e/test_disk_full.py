"""The local stack on a disk that fills up and frees again: a refused write is never shown, calls that
store nothing go on, and the stack takes writes again by itself."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from punctual_client.errors import ApiError
from punctual_client.transport import PunctualClient
from punctual_local.moto.faults import ENVIRONMENT_SWITCH
from tests.e2e.conftest import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # two starts of the stack

JOB = {"task": {"type": "noop"}, "schedule": {"type": "at", "at": "2030-01-01T00:00:00Z"}}


def fill_disk(stack: Stack, state: str) -> None:
    """Its journal's disk `full` or `free` (moto's process, started with the fault switch)."""
    request = urllib.request.Request(f"{stack.moto_url()}/_punctual/disk", data=state.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:
        answer.read()


def listed(client: PunctualClient) -> set[str]:
    return {job["id"] for job in client.iter_jobs()}


def refusal(call: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()  # type: ignore[operator]
    return caught.value


def test_a_full_disk_shows_only_what_was_saved_and_the_stack_recovers_when_it_has_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stack whose journal's disk fills on demand, with one job saved
    monkeypatch.setenv(ENVIRONMENT_SWITCH, "1")
    stack = Stack(tmp_path / "data", tmp_path / "stack.log")
    try:
        client = stack.start().client()
        saved = client.create_job(JOB)["id"]

        # When the disk is full, Then a creation and a batch are refused with 503 saying why
        fill_disk(stack, "full")
        one = refusal(lambda: client.create_job(JOB))
        assert one.status == 503 and "No space left on device" in one.message, one.body
        batch = [{**JOB, "name": f"batch-{n}"} for n in range(30)]
        assert refusal(lambda: client.create_jobs(batch, idempotency_key="batch-1")).status == 503
        # And none of what they stored is shown, while reads and a preview, which stores nothing, go on
        assert listed(client) == {saved}
        assert client.get_job(saved)["id"] == saved
        assert client.preview({"type": "cron", "expression": "0 10 * * *"}, count=2)

        # When the disk has room again, Then writes succeed without a restart, the batch's retry too
        fill_disk(stack, "free")
        created = client.create_job(JOB)["id"]
        jobs = client.create_jobs(batch, idempotency_key="batch-1")
        assert len({job["id"] for job in jobs}) == 30
        shown = listed(client)
        assert shown == {saved, created} | {job["id"] for job in jobs}
    finally:
        stack.kill()

    # And a restart reads back exactly what was shown
    again = Stack(tmp_path / "data", tmp_path / "again.log")
    try:
        assert listed(again.start().client()) == shown
    finally:
        again.kill()
