"""The Python client (punctual_client) against the CLI's HTTP test double: typed results, lists as
iterators that fetch a page when reached, and the command's own errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from punctual.platform.clock import ManualClock
from punctual_client import errors
from punctual_client._client import Client
from punctual_client._results import Execution, Job
from punctual_client.errors import ApiError
from tests.unit.cli.fake_api import FakeApi, execution, job


def test_create_job_sends_the_fields_and_answers_a_typed_job(cli_api: FakeApi) -> None:
    cli_api.answer("POST", "/jobs", job("job-1", tags={"team": "billing"}), status=201)
    client = Client(cli_api.url, token="tok")

    created = client.create_job(task={"type": "noop"}, name="nightly-report", idempotency_key="k-1")

    sent = cli_api.sent("POST")[0]
    assert sent.body == {"task": {"type": "noop"}, "schedule": {"type": "now"}, "name": "nightly-report"}
    assert sent.headers["Idempotency-Key"] == "k-1" and sent.headers["Authorization"] == "Bearer tok"
    assert isinstance(created, Job)
    assert created.next_run_at == datetime(2026, 6, 2, 8, 0, tzinfo=UTC)
    assert created.tags == {"team": "billing"} and created.raw["retry"]["max_attempts"] == 3


def test_lists_are_iterators_that_fetch_the_next_page_when_reached(cli_api: FakeApi) -> None:
    cli_api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-2", "RUNNING")], "next_cursor": "p2"}
    )
    cli_api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "SUCCEEDED")], "next_cursor": None}
    )
    client = Client(cli_api.url)

    executions = client.executions("job-1", page_size=1)
    first = next(executions)
    asked_before_the_second = len(cli_api.sent())
    rest = list(executions)

    assert isinstance(first, Execution) and first.id == "ex-2" and not first.finished
    assert asked_before_the_second == 1
    assert [e.id for e in rest] == ["ex-1"] and rest[0].finished
    assert cli_api.sent()[1].query["cursor"] == ["p2"]


def test_errors_are_the_commands_own(cli_api: FakeApi) -> None:
    cli_api.answer(
        "GET",
        "/jobs/nope",
        {"message": "job not found", "errors": [{"field": "id", "message": "no such job"}]},
        status=404,
    )

    with pytest.raises(ApiError) as refused:
        Client(cli_api.url).get_job("nope")

    assert refused.type is errors.ApiError
    assert refused.value.status == 404 and refused.value.details == ["id: no such job"]


@pytest.mark.parametrize("job_id", ["job-1/executions", "job-1?limit=1", "job-1#x", "..", ""])
def test_an_id_that_would_not_reach_the_api_as_one_path_segment_is_refused(
    cli_api: FakeApi, job_id: str
) -> None:
    client = Client(cli_api.url)

    with pytest.raises(errors.InvalidId) as refused:
        client.get_job(job_id)

    assert isinstance(refused.value, errors.PunctualError) and isinstance(refused.value, ValueError)
    assert repr(job_id) in str(refused.value)
    assert cli_api.sent() == []


def test_ids_and_names_go_in_a_path_percent_encoded_each_as_one_segment(cli_api: FakeApi) -> None:
    cli_api.answer("POST", "/jobs/job%201%25/executions/ex%C3%A9%1B/retry", execution("ex-2", "QUEUED"))
    cli_api.answer("GET", "/tasks/r%C3%A9port%20x", {"name": "réport x"})

    Client(cli_api.url).retry_execution("job 1%", "exé\x1b")
    Client(cli_api.url).http.get_task("réport x")

    assert [r.path for r in cli_api.sent()] == [
        "/jobs/job%201%25/executions/ex%C3%A9%1B/retry",
        "/tasks/r%C3%A9port%20x",
    ]


def test_wait_gives_up_after_its_timeout_on_the_clients_clock(cli_api: FakeApi) -> None:
    cli_api.answer(
        "GET", "/jobs/job-1/executions", {"items": [execution("ex-1", "RUNNING")], "next_cursor": None}
    )
    clock = ManualClock(datetime(2026, 6, 1, 12, tzinfo=UTC))
    client = Client(cli_api.url, clock=clock)

    with pytest.raises(TimeoutError, match="0 of 1"):
        client.wait("job-1", timeout=3, interval=1)

    assert clock.now() == datetime(2026, 6, 1, 12, 0, 3, tzinfo=UTC)
