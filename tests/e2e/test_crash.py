"""A local stack killed outright keeps every change it acknowledged, and runs every due execution."""

from __future__ import annotations

import random
import signal
import threading
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from punctual_client.errors import ApiError, ConnectionFailed
from tests.e2e.conftest import (
    Stack,
    Stacks,
    Webhooks,
    eventually,
    in_seconds,
    parse_time,
    wait_for_executions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.long]

CLIENTS = 8
SCENARIO_JOBS = 120  # issue 17's scenario: 35 of these were lost before the journal
RANDOM_ROUNDS = 3
QUICK_EXIT_SECONDS = 5.0


@dataclass
class Expected:
    """What the stack acknowledged about one job (and what it may have done without saying so)."""

    path: str
    names: set[str]
    paused: bool | None = False  # None: a pause was sent and not answered
    must_run: bool = False


@dataclass
class Ledger:
    jobs: dict[str, Expected] = field(default_factory=dict)
    acknowledged: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    reached: threading.Event = field(default_factory=threading.Event)
    target: int = 0
    errors: list[str] = field(default_factory=list)  # answers other than acknowledgements

    def ack(self) -> None:
        with self.lock:
            self.acknowledged += 1
            if self.acknowledged >= self.target:
                self.reached.set()


def webhook_job(webhooks: Webhooks, *, at: str | None = None) -> tuple[dict[str, object], str]:
    path = f"/crash/{uuid.uuid4().hex}"
    schedule = {"type": "at", "at": at} if at else {"type": "now"}
    job = {
        "name": path.rsplit("/", 1)[1][:12],
        "task": {"type": "http", "params": {"url": webhooks.script(path, 200)}},
        "schedule": schedule,
    }
    return job, path


def check(stack: Stack, ledger: Ledger) -> None:
    """Every acknowledged job is there as acknowledged."""
    client = stack.client()
    for job_id, expected in ledger.jobs.items():
        try:
            job = client.get_job(job_id)
        except ApiError as exc:
            raise AssertionError(f"acknowledged job {job_id} is gone: {exc}\n{stack.log()}") from exc
        assert job["name"] in expected.names, (job, expected)
        if expected.paused is True:
            assert job["status"] == "PAUSED", job


def all_ran(stack: Stack, ledger: Ledger, webhooks: Webhooks) -> dict[str, int]:
    """Waits for every job that had to run to have called its webhook; the calls per job."""
    paths = [e.path for e in ledger.jobs.values() if e.must_run]

    def calls() -> dict[str, int] | None:
        counted = {path: len(webhooks.calls_to(path)) for path in paths}
        return counted if all(counted.values()) else None

    return eventually(calls, timeout=90, interval=0.5, what="every due execution to run", stack=stack)


def client_load(stack: Stack, webhooks: Webhooks, ledger: Ledger, seed: int, stop: threading.Event) -> None:
    """Creates, patches, pauses and runs its own jobs until stopped or the stack is gone."""
    rng = random.Random(seed)
    client = stack.client()
    later: list[tuple[str, str]] = []  # (job id, what this job is for: patch, pause or run)
    while not stop.is_set():
        roll = rng.random()
        try:
            if roll < 0.45 or not later:
                if roll < 0.3:
                    job, path = webhook_job(webhooks)
                    created = client.create_job(job)
                    ledger.jobs[created["id"]] = Expected(path, {str(job["name"])}, must_run=True)
                else:
                    job, path = webhook_job(webhooks, at=in_seconds(3600))
                    created = client.create_job(job)
                    ledger.jobs[created["id"]] = Expected(path, {str(job["name"])})
                    later.append((created["id"], rng.choice(["patch", "pause", "run"])))
            else:
                job_id, purpose = rng.choice(later)
                expected = ledger.jobs[job_id]
                if purpose == "patch":
                    name = uuid.uuid4().hex[:12]
                    expected.names.add(name)  # may be applied even if the answer never comes
                    client.update_job(job_id, {"name": name})
                    expected.names = {name}
                elif purpose == "pause":
                    if expected.paused is not False:
                        continue
                    expected.paused = None
                    client.pause_job(job_id)
                    expected.paused = True
                else:
                    client.run_job(job_id)
                    expected.must_run = True
            ledger.ack()
        except ConnectionFailed:
            return  # killed
        except ApiError as exc:
            if exc.status != 503:  # stopping
                ledger.errors.append(f"{exc.status} {exc.body}")
            return


def test_sigkill_loses_no_acknowledged_change_and_every_due_execution_runs(
    stacks: Stacks, webhooks: Webhooks
) -> None:
    ledger = Ledger()
    # Given the scenario of issue 17: 120 one-time webhook jobs created by 8 concurrent clients
    stack = stacks.start(own_group=True, timeout=60)
    paths: list[list[str]] = [[] for _ in range(CLIENTS)]

    def create(n: int) -> None:
        client = stack.client()
        for _ in range(SCENARIO_JOBS // CLIENTS):
            job, path = webhook_job(webhooks)
            ledger.jobs[client.create_job(job)["id"]] = Expected(path, {str(job["name"])}, must_run=True)
            paths[n].append(path)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ledger.jobs) == SCENARIO_JOBS
    # When the stack's process group is killed right after the last answer, and started again
    stack.kill_group()
    stack = stacks.start(own_group=True, timeout=60)
    # Then none of the 120 is lost and all of them run (duplicates allowed: at least once)
    check(stack, ledger)
    calls = all_ran(stack, ledger, webhooks)
    print(f"scenario: 0 of {SCENARIO_JOBS} lost, {len(calls)} ran, {sum(calls.values()) - len(calls)} twice")

    # And the same holds through rounds of kills at random moments, while jobs are created, patched,
    # paused and run
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    print(f"seed {seed}")
    for round_number in range(RANDOM_ROUNDS):
        stop = threading.Event()
        ledger.reached.clear()
        ledger.target = ledger.acknowledged + rng.randint(10, 80)
        load = [
            threading.Thread(target=client_load, args=(stack, webhooks, ledger, rng.random(), stop))
            for _ in range(CLIENTS)
        ]
        for thread in load:
            thread.start()
        assert ledger.reached.wait(60), f"round {round_number}: too few answers\n{stack.log()}"
        stack.kill_group()
        stop.set()
        for thread in load:
            thread.join(15)
        stack = stacks.start(own_group=True, timeout=60)
        check(stack, ledger)
    # And Ctrl-C under that load stops the stack within a few seconds, with everything acknowledged kept
    stop = threading.Event()
    ledger.reached.clear()
    ledger.target = ledger.acknowledged + 30
    load = [
        threading.Thread(target=client_load, args=(stack, webhooks, ledger, rng.random(), stop))
        for _ in range(CLIENTS)
    ]
    for thread in load:
        thread.start()
    assert ledger.reached.wait(60), stack.log()
    assert stack.interrupt() < QUICK_EXIT_SECONDS, stack.log()
    assert stack.process is not None and stack.process.returncode == 0, stack.log()
    stop.set()
    for thread in load:
        thread.join(15)
    stack = stacks.start(own_group=True, timeout=60)
    check(stack, ledger)
    calls = all_ran(stack, ledger, webhooks)
    assert ledger.errors == []
    paused = sum(e.paused is True for e in ledger.jobs.values())
    print(
        f"after {RANDOM_ROUNDS} random kills: {len(ledger.jobs)} acknowledged jobs kept ({paused} paused), "
        f"{len(calls)} due ran at least once, {sum(calls.values()) - len(calls)} more than once"
    )


# On a stack's PYTHONPATH (as sitecustomize): its API's process kills the stack's whole process group
# once it has stored a job named DIES_HERE with its claimed marker, before it enqueues the job.
DIES_HERE = "dies-here"
KILLED_AT_THE_HAND_OFF = f"""
import os, signal, sys
if "punctual_local.api_process" in sys.orig_argv:
    from punctual.scheduling import handoff
    enqueue = handoff.HandOff.enqueue
    def enqueue_unless_it_dies_first(self, *markers, new_jobs=()):
        if any(job.name == "{DIES_HERE}" for job in new_jobs):
            os.killpg(os.getpgrp(), signal.SIGKILL)
        return enqueue(self, *markers, new_jobs=new_jobs)
    handoff.HandOff.enqueue = enqueue_unless_it_dies_first
"""


def test_sigkill_between_storing_a_job_and_handing_it_off_runs_it_on_time_after_a_restart(
    stacks: Stacks, webhooks: Webhooks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stack killed outright while creating a job due in a few seconds: after the job and its
    # marker (claimed by that request, to enqueue itself) were stored, before it was enqueued
    (tmp_path / "dies").mkdir()
    (tmp_path / "dies" / "sitecustomize.py").write_text(KILLED_AT_THE_HAND_OFF)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "dies"))
    stack = stacks.start(own_group=True, timeout=60)
    monkeypatch.undo()
    job, path = webhook_job(webhooks, at=in_seconds(8))
    job["name"] = DIES_HERE
    with pytest.raises(ConnectionFailed):
        stack.client().create_job(job, idempotency_key="once")
    assert stack.process is not None and stack.process.wait(10) == -signal.SIGKILL
    # When it starts again
    stack = stacks.start(own_group=True, timeout=60)
    ready = parse_time(in_seconds(0))
    # Then the job runs at its time (or at once, had the restart taken longer): the restart does not
    # wait for the dead request's claim to run out
    client = stack.client()
    [stored] = client.list_jobs(name_prefix=DIES_HERE)["items"]
    [execution] = wait_for_executions(stack, stored["id"], timeout=20)
    assert execution["status"] == "SUCCEEDED", execution
    late = parse_time(execution["started_at"]) - max(parse_time(execution["scheduled_at"]), ready)
    assert late < timedelta(seconds=5), (execution, stack.log())  # (left to its claim: about 22 s)
    # And a retry of the create answers that job, which ran once
    assert client.create_job(job, idempotency_key="once")["id"] == stored["id"]
    assert len(webhooks.calls_to(path)) == 1
