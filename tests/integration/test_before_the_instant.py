"""What the worker does before an execution's instant (a message received early: its reads and its
claim), and how that is undone or skipped when the job changes in between, or the worker dies."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.executions import ExecutionStatus
from punctual.domain.work import WorkItem, read_body
from punctual.execution.config import MAX_EARLY_WAIT
from punctual.execution.receipts import Disposition
from punctual.execution.run_records import unstored_execution
from punctual.platform import resources
from punctual.platform.clock import ManualClock
from punctual.platform.timefmt import parse_rfc3339, to_rfc3339
from punctual.store import Store
from punctual_local.stack import LOCAL_EARLY_VISIBILITY_SECONDS
from tests.faults import Crash
from tests.world import World, mocked_world

# Lone executions going the claim path (a guarded one, a retry, a run by hand take it too).
pytestmark = pytest.mark.usefixtures("claim_path")

EARLY = LOCAL_EARLY_VISIBILITY_SECONDS  # seconds: messages become visible this much ahead


@pytest.fixture
def early_world(clock: ManualClock) -> Iterator[World]:
    with mocked_world(clock, early_visibility_seconds=EARLY) as world:
        yield world


@pytest.fixture
def runs(early_world: World, monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """The clock's time whenever a task starts."""
    started: list[datetime] = []
    real = tasks.run

    def run(task: Any, context: Any) -> Any:
        started.append(early_world.clock.now())
        return real(task, context)

    monkeypatch.setattr(tasks, "run", run)
    return started


def claims(world: World, monkeypatch: pytest.MonkeyPatch, then: Any = None) -> list[datetime]:
    """The clock's time at each claim; `then(execution)` runs right after a claim is written."""
    made: list[datetime] = []
    real = world.store.executions.claim

    def claim(execution: Any, **kwargs: Any) -> Any:
        made.append(world.clock.now())
        claimed = real(execution, **kwargs)
        if then is not None:
            then(claimed)
        return claimed

    monkeypatch.setattr(world.store.executions, "claim", claim)
    return made


def one_time(world: World, seconds: float) -> tuple[dict[str, Any], datetime]:
    due = world.clock.now() + timedelta(seconds=seconds)
    return world.create({"type": "at", "at": to_rfc3339(due)}), due


def test_an_early_message_is_claimed_before_its_instant_and_runs_at_it(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    leases: list[Any] = []
    made = claims(world, monkeypatch, then=leases.append)
    # Given a job due in 30.5 s
    job, due = one_time(world, 30.5)
    # When time passes in small steps and its message is received ahead of its instant
    world.run_for(40, step=0.25)
    # Then it was claimed before its instant, with a lease counted from the instant, and ran once, not
    # before it; its start and lateness were recorded with its outcome
    assert len(made) == 1 and made[0] < due
    assert leases[0].started_at is None and leases[0].lease_until >= due + timedelta(seconds=60)
    assert len(runs) == 1 and runs[0] >= due
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED" and execution["attempts"] == 1
    assert parse_rfc3339(execution["started_at"]) >= due
    assert 0 <= execution["lateness_ms"] < 250


@pytest.mark.parametrize("change", ["pause", "cancel", "reschedule"])
def test_a_job_changed_between_the_early_claim_and_the_instant_does_not_run_then(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    world = early_world
    job, due = one_time(world, 30.5)
    later = due + timedelta(seconds=60)

    def change_the_job(claimed: Any) -> None:
        if claimed.scheduled_at != due:
            return  # (the rescheduled run's own claim)
        if change == "reschedule":
            body = {"schedule": {"type": "at", "at": to_rfc3339(later)}}
            assert world.api("PATCH", f"/jobs/{job['id']}", body).status == 200
        elif change == "cancel":
            assert world.api("DELETE", f"/jobs/{job['id']}").status == 200
        else:
            assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200

    # Given a job that is paused, cancelled or rescheduled right after its execution was claimed early
    made = claims(world, monkeypatch, then=change_the_job)
    # When its instant comes (and, rescheduled, its new one)
    world.run_for(100, step=0.25)
    # Then the early claim did not make it run at its old instant: the claimed run was cancelled
    assert made[0] < due
    executions = {e["scheduled_at"]: e for e in world.executions(job["id"])}
    old = executions[to_rfc3339(due)]
    assert old["status"] == "CANCELLED" and old["started_at"] is None and old["attempts"] == 0
    if change == "reschedule":
        # and the job ran at its new instant instead, once
        assert executions[to_rfc3339(later)]["status"] == "SUCCEEDED"
        assert len(runs) == 1 and runs[0] >= later
    else:
        assert runs == []


def test_a_paused_then_resumed_job_runs_its_early_claimed_execution_at_its_instant(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    job, due = one_time(world, 30.5)

    def pause_and_resume(claimed: Any) -> None:
        if claimed.attempts > 1:
            return
        assert world.api("POST", f"/jobs/{job['id']}/pause").status == 200
        assert world.api("POST", f"/jobs/{job['id']}/resume").status == 200

    # Given a job paused and resumed between its early claim and its instant
    claims(world, monkeypatch, then=pause_and_resume)
    world.run_for(100, step=0.25)
    # Then its run happened once, not before its instant
    assert len(runs) == 1 and runs[0] >= due
    assert [e["status"] for e in world.executions(job["id"])].count("SUCCEEDED") == 1


def test_a_worker_dying_after_its_early_claim_still_runs_the_execution_once(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    job, due = one_time(world, 30.5)
    died = []

    def die(claimed: Any) -> None:
        if not died:
            died.append(claimed)
            raise Crash("after the early claim")

    # Given a worker that dies right after claiming an execution ahead of its instant
    claims(world, monkeypatch, then=die)
    # When its message comes back (its visibility timeout) and its lease has run out
    world.run_for(resources.WORK_QUEUE.visibility_timeout_seconds + 60, step=5)
    # Then the execution ran, once, after its instant
    assert died and len(runs) == 1 and runs[0] >= due
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SUCCEEDED" and execution["attempts"] == 2


def test_an_early_claimed_run_that_wakes_past_its_catch_up_window_is_skipped(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    due = world.clock.now() + timedelta(seconds=30.5)
    job = world.create({"type": "at", "at": to_rfc3339(due)}, policy={"max_lateness_seconds": 1})
    real_sleep = world.clock.sleep

    def oversleep(seconds: float) -> None:
        real_sleep(seconds + 5)  # a worker held up well past the instant

    # Given a run claimed early whose worker wakes 5 s after its instant, past its 1 s window
    claims(world, monkeypatch, then=lambda claimed: monkeypatch.setattr(world.clock, "sleep", oversleep))
    world.run_for(60, step=0.25)
    # Then it was skipped by the job's policy, not run
    assert runs == []
    [execution] = world.executions(job["id"])
    assert execution["status"] == "SKIPPED"


def test_a_run_whose_overlap_policy_is_judged_at_its_instant_is_not_claimed_before_it(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    # Given an every-minute job that skips a run while its previous one is under way
    job = world.create({"type": "cron", "expression": "* * * * *"}, policy={"overlap": "skip"})
    first = parse_rfc3339(job["next_run_at"])
    made = claims(world, monkeypatch)
    # When its first instant passes
    world.run_for((first - world.clock.now()).total_seconds() + 5, step=0.25)
    # Then its run was claimed at its instant, not before (whether the previous run still runs is
    # a question for then), and ran
    assert made and made[0] >= first
    assert runs and runs[0] >= first


def test_the_start_of_an_early_claimed_run_is_kept_by_its_outcome_write(early_world: World) -> None:
    # The store: a claim without a start leaves it to the outcome; a claim with one keeps its own
    world = early_world
    store: Store = world.store
    job, due = one_time(world, 200)  # left to the scanner: nothing runs it here
    execution = unstored_execution(
        WorkItem(job["id"], "exec_early", due, 1),
        world.store.jobs.get(job["id"]),
        due,
        store.retention,
    )
    assert execution is not None
    claimed = store.executions.claim(
        execution, now=due - timedelta(seconds=2), lease_until=due + timedelta(seconds=90), lateness_ms=None
    )
    assert claimed.started_at is None and claimed.lateness_ms is None
    began = due + timedelta(milliseconds=40)
    finished = store.executions.finish_attempt(
        replace(claimed, started_at=began, lateness_ms=40),
        status=ExecutionStatus.SUCCEEDED,
        finished_at=began,
        error=None,
        result=None,
    )
    assert (finished.started_at, finished.lateness_ms) == (began, 40)


def test_a_message_as_early_as_the_deployment_makes_them_waits_in_the_worker(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    made = claims(world, monkeypatch)
    # Given a job due in 60.5 s, its message received as soon as it is visible (EARLY s ahead, past
    # the wait a worker allows any early message)
    _job, due = one_time(world, 60.5)
    assert MAX_EARLY_WAIT.total_seconds() < EARLY
    world.clock.advance(60.5 - EARLY)
    queue = world.punctual.settings.queue_url
    [message] = world.sqs.receive_message(QueueUrl=queue, AttributeNames=["All"]).get("Messages", [])
    # When the worker handles it
    outcome = world.punctual.worker.handle(read_body(message["Body"]).items[0], message["ReceiptHandle"])
    # Then it was claimed then and run at its instant, not sent back to wait on the queue
    assert outcome is Disposition.DONE
    assert len(made) == 1 and made[0] <= due - timedelta(seconds=EARLY - 1)
    assert len(runs) == 1 and runs[0] >= due


def test_a_message_further_ahead_than_the_deployment_makes_them_goes_back_to_the_queue(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    made = claims(world, monkeypatch)
    later: list[float] = []
    monkeypatch.setattr(world.punctual.worker, "_later", lambda receipt, seconds: later.append(seconds))
    # Given a message for an instant further ahead than the deployment's head start and the wait a
    # worker allows any early message
    _job, _due = one_time(world, 60.5)
    world.clock.advance(60.5 - EARLY)
    queue = world.punctual.settings.queue_url
    [message] = world.sqs.receive_message(QueueUrl=queue, AttributeNames=["All"]).get("Messages", [])
    item = read_body(message["Body"]).items[0]
    ahead = EARLY + MAX_EARLY_WAIT.total_seconds() + 1
    far = replace(item, scheduled_at=world.clock.now() + timedelta(seconds=ahead))
    # When the worker handles it
    world.punctual.worker.handle(far, message["ReceiptHandle"])
    # Then it neither claimed nor ran it: the message waits on the queue for about that long
    assert made == [] and runs == []
    assert later == [pytest.approx(ahead)]


def test_jobs_sharing_an_instant_are_read_at_it_and_one_paused_while_they_wait_does_not_run(
    early_world: World, runs: list[datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    # Given three one-time jobs due at the same instant, claimed ahead of it
    due = world.clock.now() + timedelta(seconds=30.5)
    jobs = [world.create({"type": "at", "at": to_rfc3339(due)}) for _ in range(3)]
    paused = jobs[1]["id"]
    reads: list[tuple[datetime, list[str]]] = []
    real_stamps = world.store.jobs.stamps

    def stamps(job_ids: Any) -> Any:
        job_ids = list(job_ids)
        reads.append((world.clock.now(), job_ids))
        return real_stamps(job_ids)

    monkeypatch.setattr(world.store.jobs, "stamps", stamps)
    real_sleep = world.clock.sleep
    pauses: list[datetime] = []
    one_at_a_time = threading.Lock()  # (no other run's sleep moves the clock while the pause is made)

    def sleep(seconds: float) -> None:
        # When one of them is paused while the claimed runs wait for their instant
        with one_at_a_time:
            if not pauses and world.clock.now() + timedelta(seconds=seconds) >= due:
                pauses.append(world.clock.now())
                assert world.api("POST", f"/jobs/{paused}/pause").status == 200
            real_sleep(seconds)

    monkeypatch.setattr(world.clock, "sleep", sleep)
    world.run_for(40, step=0.25)
    # Then whether each job changed was read at the instant, not before, and the pause was seen
    assert pauses and pauses[0] < due
    assert reads and all(at >= due for at, _ in reads)
    assert {job_id for _, ids in reads for job_id in ids} >= {
        job["id"] for job in jobs if job["id"] != paused
    }
    statuses = {job["id"]: world.executions(job["id"])[0]["status"] for job in jobs}
    assert statuses[paused] == "CANCELLED"
    assert [s for job_id, s in statuses.items() if job_id != paused] == ["SUCCEEDED", "SUCCEEDED"]
    assert len(runs) == 2 and all(at >= due for at in runs)


def test_an_early_claimed_run_reads_queued_until_it_starts_and_running_from_its_start(
    early_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = early_world
    job, due = one_time(world, 30.5)

    def shown(query: str = "") -> list[dict[str, Any]]:
        answer = world.api("GET", f"/jobs/{job['id']}/executions", query=query)
        assert answer.status == 200, answer.body
        return list(answer.body["items"])

    before: list[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]] = []
    # Given a run claimed ahead of its instant, read through the API right after its claim
    made = claims(
        world,
        monkeypatch,
        then=lambda _: before.append((shown(), shown("status=QUEUED"), shown("status=RUNNING"))),
    )
    during: list[list[dict[str, Any]]] = []
    real = tasks.run

    def run(task: Any, context: Any) -> Any:
        during.append(shown("status=RUNNING"))  # and while its task runs
        return real(task, context)

    monkeypatch.setattr(tasks, "run", run)
    world.run_for(40, step=0.25)
    # Then before its instant it read QUEUED, no attempt started, and listed as QUEUED, not RUNNING
    assert made and made[0] < due
    [(listed, queued, running)] = before
    [waiting] = listed
    assert (waiting["status"], waiting["attempts"], waiting["started_at"]) == ("QUEUED", 0, None)
    assert [e["id"] for e in queued] == [waiting["id"]] and running == []
    # and from its start it read RUNNING, its first attempt under way
    [[under_way]] = during
    assert (under_way["status"], under_way["attempts"]) == ("RUNNING", 1)
    [ended] = shown()
    assert ended["status"] == "SUCCEEDED" and ended["attempts"] == 1
