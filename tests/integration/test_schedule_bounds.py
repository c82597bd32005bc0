"""No schedule computation can hold up a request, a shard or its neighbours."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest

from punctual.domain import cron
from punctual.platform.clock import ManualClock
from tests.world import World, mocked_world

REPRO = {
    "schedule": {
        "type": "cron",
        "expression": "*/15 3 * * *",
        "timezone": "Pacific/Chatham",
        "start_at": "2027-04-03T13:40:00Z",
    },
    "count": 3,
}


def test_the_reported_preview_answers_at_once_with_local_times(world: World) -> None:
    started = time.perf_counter()
    answer = world.api("POST", "/schedules/preview", REPRO)
    assert time.perf_counter() - started < 1.0
    assert answer.status == 200, answer.body
    assert answer.body["next_runs"] == [
        "2027-04-03T13:45:00.000Z",
        "2027-04-03T14:15:00.000Z",
        "2027-04-03T14:30:00.000Z",
    ]
    assert [r["local"] for r in answer.body["runs"]] == [
        "2027-04-04T03:30:00+13:45",
        "2027-04-04T03:00:00+12:45",
        "2027-04-04T03:15:00+12:45",
    ]
    assert [r["dst"] for r in answer.body["runs"]] == ["repeated", "repeated", "repeated"]


def test_a_previewed_run_with_a_fraction_shows_it_on_the_wall_clock_too(world: World) -> None:
    start = "2027-06-01T10:00:00.5+05:45"
    body = {"schedule": {"type": "rate", "every_seconds": 60, "start_at": start}, "count": 2}
    answer = world.api("POST", "/schedules/preview", body)
    assert answer.status == 200, answer.body
    assert [(r["at"], r["local"]) for r in answer.body["runs"]] == [
        ("2027-06-01T04:15:00.500Z", "2027-06-01T04:15:00.500+00:00"),
        ("2027-06-01T04:16:00.500Z", "2027-06-01T04:16:00.500+00:00"),
    ]


def test_preview_marks_a_run_moved_by_a_gap(world: World) -> None:
    body = {
        "schedule": {
            "type": "cron",
            "expression": "30 2 * * *",
            "timezone": "Europe/Paris",
            "start_at": "2027-03-27T12:00:00Z",
        },
        "count": 2,
    }
    runs = world.api("POST", "/schedules/preview", body).body["runs"]
    assert [(r["local"], r["dst"]) for r in runs] == [
        ("2027-03-28T03:00:00+02:00", "moved"),
        ("2027-03-29T02:30:00+02:00", None),
    ]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 0 30 2 *", "February 30 never occurs"),
        ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
        ("@reboot", "@reboot"),
        ("cron(0 10 ? * MON-FRI *)", "'0 10 * * mon-fri'"),
    ],
)
def test_bad_expressions_are_refused_plainly(world: World, expression: str, message: str) -> None:
    answer = world.api(
        "POST", "/jobs", {"task": {"type": "noop"}, "schedule": {"type": "cron", "expression": expression}}
    )
    assert answer.status == 422
    assert answer.body["field"] == "schedule.expression"
    assert message in answer.body["message"]
    assert "Value error" not in answer.body["message"]
    assert "at least" not in answer.body["message"]
    assert world.api("GET", "/jobs").body["items"] == []


def test_cron_text_is_stored_normalised_and_macros_run(world: World) -> None:
    job = world.create({"type": "cron", "expression": " 0\t*  * * MON-FRI\n"})
    assert job["schedule"]["expression"] == "0 * * * mon-fri"
    hourly = world.create({"type": "cron", "expression": "@hourly"})
    assert hourly["next_run_at"] == "2026-12-01T09:00:00.000Z"  # the clock starts on the hour


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "right/UTC", "posix/Europe/Paris"])
def test_host_dependent_zone_names_are_refused(world: World, zone: str) -> None:
    answer = world.api(
        "POST",
        "/jobs",
        {"task": {"type": "noop"}, "schedule": {"type": "cron", "expression": "0 * * * *", "timezone": zone}},
    )
    assert answer.status == 422
    assert answer.body["field"] == "schedule.timezone"


def test_instants_past_2199_are_refused(world: World) -> None:
    answer = world.api(
        "POST",
        "/jobs",
        {"task": {"type": "noop"}, "schedule": {"type": "at", "at": "9000-12-31T23:00:00-05:00"}},
    )
    assert answer.status == 422
    assert answer.body["field"] == "schedule.at"
    assert "before 2200" in answer.body["message"]


def _tight_budget(steps: int = 20) -> mock._patch:  # type: ignore[type-arg]
    original = cron.Budget.__init__

    def init(self: cron.Budget, *args: object, **kwargs: object) -> None:
        original(self, steps=steps)

    return mock.patch.object(cron.Budget, "__init__", init)


def test_a_schedule_that_exceeds_the_bound_is_refused_at_creation_and_preview(world: World) -> None:
    schedule = {"type": "cron", "expression": "0 0 29 2 */7", "timezone": "Europe/Paris"}
    with _tight_budget():
        created = world.api("POST", "/jobs", {"task": {"type": "noop"}, "schedule": schedule})
        preview = world.api("POST", "/schedules/preview", {"schedule": schedule})
    for answer in (created, preview):
        assert answer.status == 422, answer.body
        assert answer.body["field"] == "schedule.expression"
        assert "bound" in answer.body["message"]
    assert world.api("GET", "/jobs").body["items"] == []


# The fifth Monday of February in Gaza: 2044, 2072, then 2112 (40 years of Gaza's changes of offset).
GAZA = {"type": "cron", "expression": "0 0 * 2 1#5", "timezone": "Asia/Gaza"}


def test_a_stored_job_whose_next_gap_outgrows_a_requests_bound_keeps_its_chain() -> None:
    # Given a job on the fifth Monday of February in Gaza, created just before its 2072 run: its next
    # run, in 2112, is 40 years of days and of Gaza's four changes of offset a year away (more work
    # than a request's bound, which its first run was checked within)
    clock = ManualClock(datetime(2072, 2, 28, 21, 58, tzinfo=UTC))
    schedule = GAZA
    with mocked_world(clock) as world:
        job = world.create(schedule)
        assert job["next_run_at"] == "2072-02-28T22:00:00.000Z"
        preview = world.api("POST", "/schedules/preview", {"schedule": schedule, "count": 2})
        assert preview.status == 422, preview.body  # (a request's bound: 2112 is past it)
        world.run_for(180)
        # Then it ran, and the scheduler found its next run rather than quarantining it
        assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
        assert world.job(job["id"])["next_run_at"] == "2112-02-28T22:00:00.000Z"
        assert world.store.markers.quarantined(job["id"]) == []


def test_such_a_job_with_a_flexible_window_keeps_its_chain_too() -> None:
    # Given the Gaza job with a minute's flexible window, created before its 2044 run: dispatching that
    # run finds 2072, and spreading 2072 looks for the run after it, 2112, past a request's bound
    clock = ManualClock(datetime(2044, 2, 28, 21, 58, tzinfo=UTC))
    with mocked_world(clock) as world:
        job = world.create(GAZA, policy={"flexible_window_seconds": 60})
        world.run_for(180)
        # Then its 2044 run ran, and its 2072 one is filed, within its window
        assert [e["status"] for e in world.executions(job["id"])] == ["SUCCEEDED"]
        filed = datetime.fromisoformat(world.job(job["id"])["next_run_at"])
        nominal = datetime(2072, 2, 28, 22, 0, tzinfo=UTC)
        assert nominal <= filed <= nominal + timedelta(seconds=60), filed
        assert world.store.markers.quarantined(job["id"]) == []


def test_coming_up_counts_around_a_job_whose_next_run_is_past_a_requests_bound() -> None:
    # Given the Gaza job, 30 minutes before its 2072 run (the one after is 2112), and an hourly job
    clock = ManualClock(datetime(2072, 2, 28, 21, 30, tzinfo=UTC))
    with mocked_world(clock) as world:
        gaza = world.create(GAZA)
        world.create({"type": "cron", "expression": "0 * * * *"})
        answer = world.api("GET", "/coming-up")
        # Then the hour lists both jobs' runs, rather than the request failing
        assert answer.status == 200, answer.body
        due = {job["id"]: job["count"] for minute in answer.body["minutes"] for job in minute["jobs"]}
        assert due.get(gaza["id"]) == 1 and sum(due.values()) == 2, answer.body


def test_a_stored_job_that_hits_the_bound_is_quarantined_and_its_neighbours_run() -> None:
    clock = ManualClock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    with mocked_world(clock) as world:
        # Given two every-minute jobs, one of which will find its next run too costly
        costly = world.create({"type": "cron", "expression": "* * * * *", "timezone": "Pacific/Chatham"})
        fine = world.create({"type": "cron", "expression": "* * * * *"})
        world.run_for(30)
        calls = {"n": 0}
        real_runs = cron.runs

        def runs(spec: cron.CronSpec, zone: str, after: datetime, budget: cron.Budget | None = None):  # type: ignore[no-untyped-def]
            if zone == "Pacific/Chatham":
                calls["n"] += 1
                raise cron.CronBoundExceeded("the schedule took too long to find its next run")
            return real_runs(spec, zone, after, budget)

        with mock.patch.object(cron, "runs", runs):
            world.run_for(150)
        # Then the costly job's occurrence is set aside with its reason, and the other job ran on
        quarantined = world.store.markers.quarantined(costly["id"])
        assert quarantined, "the costly job's occurrence is quarantined"
        assert "bound" in quarantined[0][1]
        assert calls["n"] >= 1
        ran = [e for e in world.executions(fine["id"]) if e["status"] == "SUCCEEDED"]
        assert len(ran) >= 2
        assert world.clock.now() - datetime(2026, 12, 1, 9, 0, tzinfo=UTC) >= timedelta(seconds=180)
