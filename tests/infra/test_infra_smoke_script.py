"""scripts/smoke.py, run offline against a stand-in for a deployed API on the loopback interface."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from scripts import smoke


class FakeApi(BaseHTTPRequestHandler):
    """Answers like a Punctual stage named v1: the job's execution succeeds on the second poll."""

    requests: list[dict[str, Any]] = []
    polls = 0

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _answer(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _record(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        entry = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        FakeApi.requests.append(entry)
        return entry

    def do_GET(self) -> None:
        self._record()
        if self.path == "/v1/health":
            self._answer(200, {"status": "ok"})
        elif self.path == "/v1/jobs/job-1/executions?limit=1":
            FakeApi.polls += 1
            items = []
            if FakeApi.polls > 1:
                items = [
                    {
                        "id": "exec-1",
                        "job_id": "job-1",
                        "scheduled_at": "2026-12-01T09:00:00.000Z",
                        "status": "SUCCEEDED",
                        "attempts": 1,
                        "started_at": "2026-12-01T09:00:00.042Z",
                        "finished_at": "2026-12-01T09:00:00.050Z",
                        "lateness_ms": 42,
                        "error": None,
                    }
                ]
            self._answer(200, {"items": items, "next_cursor": None})
        else:
            self._answer(404, {"message": "not found"})

    def do_POST(self) -> None:
        entry = self._record()
        if self.path == "/v1/jobs":
            self._answer(201, {"id": "job-1", "status": "ACTIVE", **entry["body"]})
        else:
            self._answer(404, {"message": "not found"})


@pytest.fixture
def fake_api() -> Iterator[str]:
    FakeApi.requests = []
    FakeApi.polls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="not-a-secret", region_name="eu-west-1"
    )


def test_smoke_creates_a_job_ten_seconds_ahead_and_reports_its_lateness(
    fake_api: str, session: boto3.Session, monkeypatch: pytest.MonkeyPatch
):
    # Given a deployed API (stand-in) and no waiting between polls
    monkeypatch.setattr(smoke.time, "sleep", lambda seconds: None)
    # When the smoke run goes
    report = smoke.run(smoke.SignedApi(fake_api, session), lead_seconds=10, timeout_seconds=5)
    # Then it reports the execution's success and lateness
    assert report["status"] == "SUCCEEDED"
    assert report["lateness_ms"] == 42
    assert report["job_id"] == "job-1"
    # and it created a noop job at an instant with an offset, with an idempotency key
    (create,) = [r for r in FakeApi.requests if r["method"] == "POST"]
    assert create["body"]["task"] == {"type": "noop"}
    assert create["body"]["schedule"]["type"] == "at"
    assert create["body"]["schedule"]["at"].endswith("+00:00")
    assert create["headers"]["Idempotency-Key"]


def test_smoke_signs_every_request_with_sigv4_for_execute_api(
    fake_api: str, session: boto3.Session, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(smoke.time, "sleep", lambda seconds: None)
    smoke.run(smoke.SignedApi(fake_api, session), lead_seconds=0, timeout_seconds=5)
    assert FakeApi.requests
    for request in FakeApi.requests:
        authorization = request["headers"]["Authorization"]
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/execute-api/aws4_request" in authorization
        assert request["headers"]["X-Amz-Date"]


def test_api_url_comes_from_the_stack_outputs(session: boto3.Session, monkeypatch: pytest.MonkeyPatch):
    client = session.client("cloudformation")
    stubber = Stubber(client)
    stack = {
        "StackName": "Punctual",
        "CreationTime": "2026-01-01T00:00:00Z",
        "StackStatus": "CREATE_COMPLETE",
        "Outputs": [
            {"OutputKey": "TableName", "OutputValue": "t"},
            {
                "OutputKey": smoke.API_URL_OUTPUT,
                "OutputValue": "https://abc.execute-api.eu-west-1.amazonaws.com/v1/",
            },
        ],
    }
    stubber.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "Punctual"})
    stubber.add_response("describe_stacks", {"Stacks": [{**stack, "Outputs": []}]}, {"StackName": "Other"})
    monkeypatch.setattr(session, "client", lambda name: client)
    with stubber:
        assert smoke.api_url(session, "Punctual") == "https://abc.execute-api.eu-west-1.amazonaws.com/v1/"
        with pytest.raises(SystemExit):
            smoke.api_url(session, "Other")


@pytest.mark.parametrize("suffix", ["/", ""])
def test_paths_join_onto_the_stage_url_with_or_without_its_trailing_slash(
    fake_api: str, session: boto3.Session, suffix: str
):
    # Given the stage URL as the ApiUrl output gives it (trailing slash), or as an HTTP API stage
    # names itself (none)
    base = fake_api.rstrip("/") + suffix
    # When the smoke script calls a path, then it reaches that path under the stage
    assert smoke.SignedApi(base, session).call("GET", "/health") == (200, {"status": "ok"})
    assert FakeApi.requests[-1]["path"] == "/v1/health"
