"""The CLI's monitoring commands and options against the in-process HTTP test double (test_cli)."""

from __future__ import annotations

import io
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from http.server import ThreadingHTTPServer
from typing import Any, cast

import pytest

from punctual.platform import signing
from punctual.platform.clock import ManualClock
from punctual_cli import common
from punctual_cli.monitoring import serve_receiver
from punctual_cli.watch import Tail
from punctual_client.transport import PunctualClient
from tests.unit.cli.fake_api import NOW, FakeApi, _handler_for, execution, job, run

SECRET = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    """test_cli's HTTP test double on 127.0.0.1, and the CLI's clock at NOW."""
    for variable in ("PUNCTUAL_ENDPOINT", "PUNCTUAL_PORT", "PUNCTUAL_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(common, "clock", ManualClock(NOW))
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield fake
    server.shutdown()
    server.server_close()


def test_create_with_notifications_a_signing_secret_and_a_failure_limit(api: FakeApi, capsys: Capsys) -> None:
    api.answer("POST", "/jobs", job(), status=201)
    code, _, _ = run(
        api, capsys, "jobs", "create", "--task", "noop", "--every", "5m",
        "--notify", "failed,dead_lettered=https://hooks.example.com/ops",
        "--notify", "late:2m,succeeded=arn:aws:sns:us-east-1:123456789012:alerts",
        "--signing-secret", SECRET, "--pause-after-failures", "3",
    )  # fmt: skip
    assert code == 0
    [request] = api.sent()
    assert request.body["notify"] == [
        {"on": ["failed", "dead_lettered"], "to": "https://hooks.example.com/ops"},
        {
            "on": ["late", "succeeded"],
            "to": "arn:aws:sns:us-east-1:123456789012:alerts",
            "late_after_seconds": 120,
        },
    ]
    assert request.body["signing_secret"] == SECRET
    assert request.body["policy"] == {"pause_after_failures": 3}


@pytest.mark.parametrize(
    ("notify", "said"),
    [
        ("exploded=https://x.example.com", "unknown event 'exploded'"),
        ("late=https://x.example.com", "late needs its threshold"),
        ("failed:5m=https://x.example.com", "only late takes a threshold"),
        ("https://x.example.com", "EVENTS=TARGET"),
    ],
)
def test_a_notify_option_that_makes_no_sense_is_a_usage_error(
    api: FakeApi, capsys: Capsys, notify: str, said: str
) -> None:
    code, _, err = run(api, capsys, "jobs", "create", "--task", "noop", "--notify", notify)
    assert code == 2 and said in err
    assert api.sent() == []


def test_update_replaces_or_clears_notifications_and_rotates_or_stops_signing(
    api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.answer("PATCH", "/jobs/job-1", job())
    assert run(api, capsys, "jobs", "update", "job-1", "--no-notify", "--no-signing")[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert run(api, capsys, "jobs", "update", "job-1", "--signing-secret", "-")[0] == 0
    first, second = api.sent()
    assert first.body == {"notify": [], "signing_secret": None}
    assert second.body == {"signing_secret": SECRET}  # read from standard input, not the command line


def test_jobs_list_finds_failed_jobs_by_status_or_outcome_and_prints_ids_quietly(
    api: FakeApi, capsys: Capsys
) -> None:
    outcome = {
        "status": "FAILED",
        "at": "2026-06-01T11:00:00.000Z",
        "execution_id": "ex-1",
        "consecutive_failures": 3,
    }
    api.answer("GET", "/jobs", {"items": [job("job-1", outcome=outcome), job("job-2")], "next_cursor": None})
    code, out, _ = run(api, capsys, "jobs", "list", "--status", "FAILED")
    assert code == 0 and "FAILED (3 in a row)" in out.splitlines()[1]
    code, out, _ = run(api, capsys, "-q", "jobs", "list", "--outcome", "failed", "--name-prefix", "nightly")
    assert (code, out) == (0, "job-1\njob-2\n")
    first, second = api.sent()
    assert first.query == {"outcome": ["failed"]}
    assert second.query == {"outcome": ["failed"], "name_prefix": ["nightly"]}
    code, _, err = run(api, capsys, "jobs", "list", "--status", "FAILED", "--outcome", "succeeded")
    assert code == 2 and "is --outcome failed" in err


def test_pause_with_a_note_retry_and_filtered_executions(api: FakeApi, capsys: Capsys) -> None:
    api.answer("POST", "/jobs/job-1/pause", job(status="PAUSED", pause_note="moving the database"))
    api.answer(
        "POST", "/jobs/job-1/executions/ex-1/retry", execution("ex-2", "QUEUED", 0, retry_of="ex-1"), 202
    )
    api.answer("GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "FAILED")], "next_cursor": None})
    assert run(api, capsys, "jobs", "pause", "job-1", "--note", "moving the database")[0] == 0
    code, out, _ = run(api, capsys, "-q", "jobs", "retry", "job-1", "ex-1")
    assert (code, out) == (0, "ex-2\n")
    assert run(api, capsys, "executions", "job-1", "--status", "failed", "--since", "2h")[0] == 0
    pause, retry, executions = api.sent()
    assert pause.body == {"note": "moving the database"}
    assert (retry.method, retry.path) == ("POST", "/jobs/job-1/executions/ex-1/retry")
    since = (NOW - timedelta(hours=2)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert executions.query == {"status": ["FAILED"], "since": [since]}


def test_dead_letters_are_listed_and_redriven(api: FakeApi, capsys: Capsys) -> None:
    letter = {
        "execution_id": "ex-9",
        "job_id": "job-1",
        "job_name": "nightly-report",
        "scheduled_at": "2026-06-01T10:00:00.000Z",
        "dead_lettered_at": "2026-06-01T11:00:00.000Z",
        "error": "gave up: the message exhausted its deliveries (dead-letter queue)",
    }
    api.answer("GET", "/dead-letters", {"items": [letter], "next_cursor": None})
    api.answer("POST", "/dead-letters/redrive", {"items": [{"execution_id": "ex-9", "result": "redriven"}]})
    code, out, _ = run(api, capsys, "dead-letters", "list")
    assert code == 0 and "ex-9" in out and "nightly-report" in out and "DEAD-LETTERED" in out
    code, out, _ = run(api, capsys, "dead-letters", "redrive", "--all")
    assert (code, out) == (0, "ex-9  redriven\n")
    assert api.sent("POST")[0].body == {"execution_ids": ["ex-9"]}
    api.answer("POST", "/dead-letters/redrive", {"items": [{"execution_id": "ex-9", "result": "failed"}]})
    api.routes[("POST", "/dead-letters/redrive")].pop(0)
    assert run(api, capsys, "dead-letters", "redrive", "ex-9")[0] == 1  # not sent: try again
    assert run(api, capsys, "dead-letters", "redrive")[0] == 2


def test_watch_without_a_job_tails_every_jobs_executions(api: FakeApi, capsys: Capsys) -> None:
    # Given two jobs: one due now, which runs and fails, then is paused; one due tomorrow
    due = job("job-1", name="billing", next_run_at="2026-06-01T12:00:00.000Z")
    later = job("job-2", name="report", next_run_at="2026-06-02T08:00:00.000Z")
    failed = {
        "status": "FAILED",
        "at": "2026-06-01T12:00:03.000Z",
        "execution_id": "ex-1",
        "consecutive_failures": 1,
    }
    paused = job(
        "job-1", name="billing", status="PAUSED", next_run_at=None, outcome=failed, pause_note="too many"
    )
    for jobs in ([due, later], [due, later], [paused, later]):
        api.answer("GET", "/jobs", {"items": jobs, "next_cursor": None})
    for items in (
        [execution("ex-1", "RUNNING", lateness_ms=1500)],
        [
            execution(
                "ex-1", "FAILED", error="HTTP 500", lateness_ms=1500, finished_at="2026-06-01T12:00:03.000Z"
            )
        ],
    ):
        api.answer("GET", "/jobs/job-1/executions", {"items": items, "next_cursor": None})
    # When every job is watched until one execution has finished
    code, out, _ = run(api, capsys, "watch", "--count", "1", "--interval", "1")
    # Then the run's changes come as they happen, with lateness and error, and only the busy job's
    # executions are read
    assert code == 0
    lines = out.splitlines()
    live = next(i for i, line in enumerate(lines) if line.startswith("--- 2 jobs; live from"))
    assert "billing" in lines[live + 1] and "ex-1  new RUNNING" in lines[live + 1]
    assert "late 1.5s" in lines[live + 1]
    assert "RUNNING -> FAILED" in lines[live + 2] and "error: HTTP 500" in lines[live + 2]
    assert all(r.path != "/jobs/job-2/executions" for r in api.sent())
    # and with -q only the ids, and the job's own change is told (with its note) when not quiet
    api.requests.clear()
    common.clock = ManualClock(NOW)  # (the fixture's monkeypatch puts the real one back)
    for jobs in ([due, later], [paused, later]):
        api.answer("GET", "/jobs", {"items": jobs, "next_cursor": None})
    api.routes[("GET", "/jobs")] = api.routes[("GET", "/jobs")][-2:]
    code, out, _ = run(api, capsys, "watch", "--timeout", "1", "--interval", "1")
    assert "job job-1 (billing)  ACTIVE -> PAUSED  (too many)" in out


class _Jobs:
    """A client with the two reads Tail makes, answering what the test last set."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.executions: dict[str, list[dict[str, Any]]] = {}

    def iter_jobs(self, **_: Any) -> Iterator[dict[str, Any]]:
        return iter(self.jobs)

    def list_executions(self, job_id: str, **_: Any) -> dict[str, Any]:
        return {"items": self.executions.get(job_id, []), "next_cursor": None}


def test_watching_every_job_follows_a_job_created_and_run_between_two_polls() -> None:
    # Given a tail of every job, started when there was one job due tomorrow
    clock = ManualClock(NOW)
    client = _Jobs()
    later = job("job-2", name="report", next_run_at="2026-06-02T08:00:00.000Z")
    client.jobs = [later]
    lines: list[str] = []
    tail = Tail(cast(PunctualClient, client), clock, interval=2, out=lines.append, quiet=True)
    tail.poll()
    # and a job created after that poll, that ran at once and finished before the next one
    clock.advance(2)
    done = job(
        "job-3", name="once", status="COMPLETED", next_run_at=None, created_at="2026-06-01T12:00:01.000Z"
    )
    client.jobs = [done, later]
    client.executions["job-3"] = [
        execution("ex-3", "SUCCEEDED", job_id="job-3", finished_at="2026-06-01T12:00:01.500Z")
    ]

    # When the tail polls again
    tail.poll()

    # Then the new job's run is told, and counts towards --count
    assert lines == ["ex-3"]
    assert tail.finished == 1


def test_watching_every_job_skips_runs_that_ended_before_it_began_even_of_a_job_new_to_it() -> None:
    # Given a tail started with no job, and a job listed on its second poll (say, newly matching
    # --name-prefix) whose only run had finished before the watch began
    clock = ManualClock(NOW)
    client = _Jobs()
    lines: list[str] = []
    tail = Tail(cast(PunctualClient, client), clock, interval=2, out=lines.append, quiet=True)
    tail.poll()
    clock.advance(2)
    client.jobs = [job("job-3", status="COMPLETED", next_run_at=None)]
    client.executions["job-3"] = [
        execution("ex-3", "SUCCEEDED", job_id="job-3", finished_at="2026-06-01T11:59:00.000Z")
    ]

    # When the tail polls again
    tail.poll()

    # Then that run is history: not told, not counted
    assert lines == []
    assert tail.finished == 0


def test_watching_every_job_counts_one_job_in_the_singular() -> None:
    # Given one job
    client = _Jobs()
    client.jobs = [job("job-2", name="report")]
    lines: list[str] = []

    # When a tail polls for the first time
    Tail(cast(PunctualClient, client), ManualClock(NOW), interval=2, out=lines.append).poll()

    # Then the line where the live changes start counts it as one job
    assert lines[-1].startswith("--- 1 job; live from")


def test_the_receiver_checks_signatures_and_answers_as_told() -> None:
    out = io.StringIO()
    clock = ManualClock(NOW)
    server = serve_receiver(0, secret=SECRET, statuses=[503], clock=clock, out=out)
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    body = json.dumps({"type": "execution.failed"}).encode()
    try:
        statuses = []
        for headers in (signing.headers([signing.key_of(SECRET)], "msg_1", NOW, body), {}):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    statuses.append(answer.status)
            except urllib.error.HTTPError as error:
                statuses.append(error.code)
    finally:
        server.shutdown()
        server.server_close()
    assert statuses == [503, 200]
    printed = out.getvalue().splitlines()
    assert "execution.failed  -> 503  signature ok" in printed[0]
    assert printed[0].startswith("12:00:00Z  POST /hook")  # the time of day with its zone
    assert "SIGNATURE REFUSED" in printed[2]


def test_new_secret_prints_one_that_signs(api: FakeApi, capsys: Capsys) -> None:
    code, out, _ = run(api, capsys, "new-secret")
    assert code == 0 and signing.key_of(out.strip())


def test_a_bare_number_since_asks_for_its_unit(api: FakeApi, capsys: Capsys) -> None:
    code, _, err = run(api, capsys, "executions", "job-1", "--since", "24")
    assert code == 2 and "24h" in err and "24s" in err
    assert api.sent() == []


def test_coming_up_shows_the_minutes_with_runs_and_their_busiest_jobs(api: FakeApi, capsys: Capsys) -> None:
    # Given an hour in which two minutes hold runs, one with more runs than its named jobs
    api.answer(
        "GET",
        "/coming-up",
        {
            "now": "2026-06-01T10:00:20.000Z",
            "minutes": [
                {"at": "2026-06-01T10:00:00.000Z", "count": 0, "jobs": []},
                {
                    "at": "2026-06-01T10:01:00.000Z",
                    "count": 12,
                    "jobs": [
                        {"id": "job_a", "name": "nightly", "count": 10},
                        {"id": "job_b", "name": None, "count": 1},
                    ],
                },
                {
                    "at": "2026-06-01T10:02:00.000Z",
                    "count": 1,
                    "jobs": [{"id": "job_c", "name": "c", "count": 1}],
                },
            ],
            "jobs_read": 600,
            "complete": False,
        },
    )
    # When coming-up is asked
    code, out, err = run(api, capsys, "coming-up")
    # Then each minute with runs is a row, with its jobs and what they leave uncounted
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["MINUTE", "RUNS", "BUSIEST", "JOBS", "(RUNS)"]
    assert len(lines) == 3 and "10:00:00" not in out
    assert "12" in lines[1] and "nightly (10), job_b (1), and 1 more" in lines[1]
    # and an incomplete count says so
    assert "first 600 ACTIVE jobs" in err
    # and --json prints the answer as it came
    code, out, _ = run(api, capsys, "coming-up", "--json")
    assert json.loads(out)["jobs_read"] == 600
