"""Every action on a job in every status, as docs/api.md's table says, and changes that race a run
or a stale read: a 409 leaves stored data as it was.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from punctual.domain.errors import LostRace
from punctual.jobs import changes
from tests.integration.api_edges import CRON, call, seconds_ahead, snapshot
from tests.world import World


# ------------------------------------------------------------------------------------------------
# Every action on a job in every status.
# ------------------------------------------------------------------------------------------------
def job_in(world: World, status: str) -> dict[str, Any]:
    if status == "COMPLETED":
        job = world.create({"type": "now"})
        world.drain()
    else:
        job = world.create(CRON)
        if status == "PAUSED":
            world.api("POST", f"/jobs/{job['id']}/pause")
        elif status == "CANCELLED":
            world.api("DELETE", f"/jobs/{job['id']}")
    job = world.job(job["id"])
    assert job["status"] == status
    return job


# (status, method, suffix, body) -> (answer status, job status after) as docs/api.md and its documented choices say
TRANSITIONS = {
    ("ACTIVE", "POST", "/pause", None): (200, "PAUSED"),
    ("ACTIVE", "POST", "/resume", None): (200, "ACTIVE"),
    ("ACTIVE", "POST", "/run", None): (202, "ACTIVE"),
    ("ACTIVE", "PATCH", "", "name"): (200, "ACTIVE"),
    ("ACTIVE", "DELETE", "", None): (200, "CANCELLED"),
    ("PAUSED", "POST", "/pause", None): (200, "PAUSED"),
    ("PAUSED", "POST", "/resume", None): (200, "ACTIVE"),
    ("PAUSED", "POST", "/run", None): (409, "PAUSED"),
    ("PAUSED", "PATCH", "", "name"): (200, "PAUSED"),
    ("PAUSED", "PATCH", "", "schedule"): (200, "PAUSED"),
    ("PAUSED", "DELETE", "", None): (200, "CANCELLED"),
    ("COMPLETED", "POST", "/pause", None): (409, "COMPLETED"),
    ("COMPLETED", "POST", "/resume", None): (409, "COMPLETED"),
    ("COMPLETED", "POST", "/run", None): (202, "COMPLETED"),
    ("COMPLETED", "PATCH", "", "schedule"): (200, "ACTIVE"),
    ("COMPLETED", "DELETE", "", None): (200, "CANCELLED"),
    ("CANCELLED", "POST", "/pause", None): (409, "CANCELLED"),
    ("CANCELLED", "POST", "/resume", None): (409, "CANCELLED"),
    ("CANCELLED", "POST", "/run", None): (409, "CANCELLED"),
    ("CANCELLED", "PATCH", "", "schedule"): (409, "CANCELLED"),
    ("CANCELLED", "DELETE", "", None): (200, "CANCELLED"),
}
BODIES = {
    None: None,
    "name": {"name": "renamed"},
    "schedule": {"schedule": {"type": "rate", "every_seconds": 600}},
}


def test_every_action_in_every_status(world: World) -> None:
    for (status, method, suffix, body), (expected_status, expected_job) in TRANSITIONS.items():
        case = (status, method, suffix, body)
        job = job_in(world, status)
        before = snapshot(world)
        answer = world.api(method, f"/jobs/{job['id']}{suffix}", BODIES[body])
        assert answer.status == expected_status, (case, answer.body)
        assert world.job(job["id"])["status"] == expected_job, case
        if answer.status >= 400:
            assert snapshot(world) == before, case
            assert "message" in answer.body
        elif suffix == "/run":
            assert answer.body["job_id"] == job["id"] and answer.body["manual"] is True
        else:
            assert answer.body["status"] == expected_job, case


def test_a_completed_job_can_be_renamed_and_stays_completed(world: World) -> None:
    # docs/api.md: PATCH changes the name ... -> 200 Job; only a new schedule revives the job
    job = job_in(world, "COMPLETED")
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"name": "renamed"})
    assert answer.status == 200, answer.body
    assert (answer.body["name"], answer.body["status"]) == ("renamed", "COMPLETED")
    assert world.job(job["id"])["status"] == "COMPLETED"


def test_a_cancelled_job_refuses_every_change_alike(world: World) -> None:
    job = job_in(world, "CANCELLED")
    renamed = world.api("PATCH", f"/jobs/{job['id']}", {"name": "renamed"})
    rescheduled = world.api("PATCH", f"/jobs/{job['id']}", BODIES["schedule"])
    assert (renamed.status, rescheduled.status) == (409, 409)
    assert renamed.body["message"] == rescheduled.body["message"] == "job is CANCELLED and cannot be changed"


# ------------------------------------------------------------------------------------------------
# DELETE racing the end of a run: the job changes between the request's read and its write.
# ------------------------------------------------------------------------------------------------
def test_a_cancel_racing_the_run_that_completes_the_job_still_cancels_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-time job whose run is queued
    job = world.create({"type": "now"})
    real = world.store.jobs.get_with_last_execution
    reads: list[str] = []

    def read_then_run(job_id: str, owner: str | None = None) -> Any:
        found = real(job_id, owner)
        reads.append(found.status.value)
        if len(reads) == 1:
            world.drain()  # the run ends (the job COMPLETED) after DELETE read the job, before it writes
        return found

    monkeypatch.setattr(world.store.jobs, "get_with_last_execution", read_then_run)
    # When it is cancelled meanwhile
    answer = call(world, "DELETE", f"/jobs/{job['id']}")
    # Then the request read the job again and cancelled it: 200, not 409
    assert answer.status == 200, answer.body
    assert answer.body["status"] == "CANCELLED"
    assert reads == ["ACTIVE", "COMPLETED"]
    monkeypatch.undo()
    shown = world.job(job["id"])
    assert shown["status"] == "CANCELLED"
    assert shown["last_execution"]["status"] == "SUCCEEDED"  # the run it raced did run


def test_a_cancel_that_keeps_losing_the_race_gives_up_with_409(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = world.create(CRON)
    before = snapshot(world)
    lost = mock.Mock(side_effect=LostRace("ConditionalCheckFailed"))
    monkeypatch.setattr(world.store.jobs, "update", lost)
    answer = call(world, "DELETE", f"/jobs/{job['id']}")
    assert answer.status == 409 and "changed while this request ran" in answer.body["message"], answer.body
    assert lost.call_count == 3  # bounded
    assert snapshot(world) == before


@pytest.mark.parametrize(
    ("change", "ends"),
    [
        (("POST", "/pause", {}), ("CANCELLED", "job paused")),
        (("DELETE", "", None), ("CANCELLED", "job cancelled")),
        (("PATCH", "", {"schedule": {"type": "cron", "expression": "0 11 * * *"}}), ("SUCCEEDED", None)),
    ],
)
def test_a_run_by_hand_acknowledged_as_a_change_lands_stays_in_the_history(
    world: World, monkeypatch: pytest.MonkeyPatch, change: tuple[str, str, Any], ends: tuple[str, Any]
) -> None:
    # Given a recurring job, and a run by hand whose request read the job before a change landed
    job = world.create(CRON)
    method, path, body = change
    filed = changes.file_one
    landed: list[Any] = []
    changing: list[bool] = []

    def change_lands_first(*args: Any, **kwargs: Any) -> Any:
        if not changing:  # (the run's filing; the change's own, a new schedule's, is let through)
            changing.append(True)
            landed.append(world.api(method, f"/jobs/{job['id']}{path}", body))
        return filed(*args, **kwargs)

    monkeypatch.setattr(changes, "file_one", change_lands_first)
    run = world.api("POST", f"/jobs/{job['id']}/run")
    monkeypatch.setattr(changes, "file_one", filed)

    # When both were acknowledged, and a minute passes
    assert run.status == 202 and [answer.status for answer in landed] == [200]
    listed_at_once = {e["id"] for e in world.executions(job["id"])}
    world.run_for(60)

    # Then the run was listed at once and ends, saying why when it did not run: never dropped unseen
    assert run.body["id"] in listed_at_once
    [execution] = [e for e in world.executions(job["id"]) if e["id"] == run.body["id"]]
    assert (execution["status"], execution["error"]) == ends


def test_a_patch_on_condition_of_the_revision_read_changes_only_that_revision(world: World) -> None:
    # Given a job read by two clients, its ETag its revision, as its creation answered it
    created = world.api("POST", "/jobs", {"task": {"type": "noop"}, "schedule": CRON})
    job = created.body
    read = world.api("GET", f"/jobs/{job['id']}")
    assert (created.headers["ETag"], job["revision"]) == (read.headers["ETag"], read.body["revision"])
    at = read.body["revision"]
    assert read.headers["ETag"] == f'"{at}"'

    # When one renames it on condition of what it read, then the other does the same from its read
    first = world.api("PATCH", f"/jobs/{job['id']}", {"name": "first"}, headers={"If-Match": f'"{at}"'})
    stale = world.api(
        "PATCH",
        f"/jobs/{job['id']}",
        {"name": "second", "policy": {"max_runs": 3}},
        headers={"If-Match": read.headers["ETag"]},
    )

    # Then the first is made (the next revision, its ETag with it) and the second refused with 412,
    # changing nothing: no lost update
    assert (first.status, first.body["revision"], first.headers["ETag"]) == (200, at + 1, f'"{at + 1}"')
    assert stale.status == 412, stale.body
    assert f"revision {at + 1}, not {at}" in stale.body["message"]
    after = world.job(job["id"])
    assert (after["name"], after["policy"].get("max_runs"), after["revision"]) == ("first", None, at + 1)
    # and any revision (`*`) or none changes it as before
    assert (
        world.api("PATCH", f"/jobs/{job['id']}", {"name": "third"}, headers={"If-Match": "*"}).status == 200
    )
    assert world.api("PATCH", f"/jobs/{job['id']}", {"name": "fourth"}).body["revision"] == at + 3


def test_a_job_stored_before_revisions_were_kept_is_at_revision_0_and_changes_on_condition(
    world: World,
) -> None:
    # Given a job whose item carries no revision (written by an earlier version)
    job = world.create(CRON)
    world.dynamodb_client.update_item(
        TableName=world.punctual.settings.table_name,
        Key={"pk": {"S": f"JOB#{job['id']}"}, "sk": {"S": "JOB"}},
        UpdateExpression="REMOVE revision",
    )
    read = world.api("GET", f"/jobs/{job['id']}")
    assert (read.headers["ETag"], read.body["revision"]) == ('"0"', 0)
    # When it is changed on condition of that, then again from the same read
    first = world.api("PATCH", f"/jobs/{job['id']}", {"name": "first"}, headers={"If-Match": '"0"'})
    stale = world.api("PATCH", f"/jobs/{job['id']}", {"name": "second"}, headers={"If-Match": '"0"'})
    # Then the first is made, at revision 1, and the second refused
    assert (first.status, first.body["revision"]) == (200, 1), first.body
    assert stale.status == 412, stale.body
    assert world.job(job["id"])["name"] == "first"


@pytest.mark.parametrize("given", ['W/"1"', "1", '"1", "2"', '"x"', '""', '"' + "9" * 20 + '"'])
def test_an_if_match_that_is_no_etag_of_a_job_is_refused(world: World, given: str) -> None:
    job = world.create(CRON)
    answer = world.api("PATCH", f"/jobs/{job['id']}", {"name": "renamed"}, headers={"If-Match": given})
    assert (answer.status, answer.body["field"]) == (400, "header if-match"), answer.body
    assert world.job(job["id"])["name"] == job["name"]


def test_a_patch_on_condition_losing_the_race_to_another_change_is_412(world: World) -> None:
    # Given a job as read, and another change landing between the PATCH's read and its write
    job = world.create(CRON)
    etag = world.api("GET", f"/jobs/{job['id']}").headers["ETag"]
    theirs: list[Any] = []

    write = changes.JobLifecycle._write

    def another_change_first(lifecycle: Any, read: Any, *args: Any, **kwargs: Any) -> Any:
        if not theirs:
            theirs.append(None)  # (the other change's own write goes through)
            theirs[0] = world.api("PATCH", f"/jobs/{read.id}", {"name": "theirs"})
        return write(lifecycle, read, *args, **kwargs)

    with mock.patch.object(changes.JobLifecycle, "_write", another_change_first):
        answer = world.api("PATCH", f"/jobs/{job['id']}", {"name": "mine"}, headers={"If-Match": etag})
    assert [t.status for t in theirs] == [200]

    # Then it is refused with 412, and the other change stands
    assert answer.status == 412, answer.body
    assert world.job(job["id"])["name"] == "theirs"


def test_a_patch_from_a_stale_read_is_409_and_leaves_no_run_behind(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two clients that read the same one-time job
    job = world.create({"type": "at", "at": seconds_ahead(world, 600)})
    stale = world.store.jobs.get_with_last_execution(job["id"])
    first = world.api(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": seconds_ahead(world, 700)}}
    )
    # When the second changes it from its stale read
    monkeypatch.setattr(world.store.jobs, "get_with_last_execution", lambda *_args: stale)
    second = world.api(
        "PATCH", f"/jobs/{job['id']}", {"schedule": {"type": "at", "at": seconds_ahead(world, 800)}}
    )
    monkeypatch.undo()
    world.run_for(900)
    # Then it is refused, and only the first change runs
    assert first.status == 200
    assert second.status == 409
    ran = [e["scheduled_at"] for e in world.executions(job["id"]) if e["status"] == "SUCCEEDED"]
    assert ran == [first.body["next_run_at"]]


def test_an_empty_patch_changes_nothing(world: World) -> None:
    # Given a job and a named task
    job = world.create(CRON, name="nightly")
    assert world.api("POST", "/tasks", {"name": "t", "type": "noop"}).status == 201
    world.clock.advance(60)
    before = snapshot(world)
    # When each is sent a PATCH of nothing
    patched_job = call(world, "PATCH", f"/jobs/{job['id']}", {})
    patched_task = call(world, "PATCH", "/tasks/t", {})
    # Then each answers as it is: no new updated_at, no new version, nothing written
    assert patched_job.status == 200 and patched_job.body["updated_at"] == job["updated_at"]
    assert patched_task.status == 200 and patched_task.body["version"] == 1, patched_task.body
    assert snapshot(world) == before
