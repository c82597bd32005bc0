"""Smoke test of a deployed Punctual stack.

Reads the API URL from the stack's CloudFormation outputs, creates a `noop` job due 10 seconds
ahead with SigV4-signed requests (the caller's AWS credentials), waits until its execution
succeeds and prints the result, lateness included, as JSON. Exits 1 if it does not succeed.

    .venv/bin/python scripts/smoke.py --stack Punctual --region eu-west-1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

API_URL_OUTPUT = "ApiUrl"  # the output infra/stack.py declares
FINAL_STATUSES = {"SUCCEEDED", "FAILED", "CANCELLED"}


class SignedApi:
    """A minimal client of the Punctual API that signs each request with SigV4 (execute-api)."""

    def __init__(self, base_url: str, session: boto3.Session) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session
        self._region = session.region_name

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        url = f"{self.base_url}{path}"
        data = json.dumps(body).encode() if body is not None else None
        request = AWSRequest(method=method, url=url, data=data, headers=dict(headers or {}))
        if data is not None:
            request.headers["Content-Type"] = "application/json"
        credentials = self._session.get_credentials()
        if credentials is None:
            raise SystemExit("no AWS credentials found")
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", self._region).add_auth(request)
        outgoing = urllib.request.Request(
            url, data=data, method=method, headers=dict(request.headers.items())
        )
        try:
            with urllib.request.urlopen(outgoing, timeout=30) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as error:
            return error.code, _json(error.read())


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


def api_url(session: boto3.Session, stack: str) -> str:
    cloudformation = session.client("cloudformation")
    outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    for output in outputs:
        if output["OutputKey"] == API_URL_OUTPUT:
            return str(output["OutputValue"])
    raise SystemExit(f"stack {stack} has no {API_URL_OUTPUT} output; is it a Punctual stack?")


def expect(status: int, body: Any, wanted: int, what: str) -> None:
    if status != wanted:
        raise SystemExit(f"{what}: expected HTTP {wanted}, got {status}: {body}")


def run(api: SignedApi, *, lead_seconds: float, timeout_seconds: float) -> dict[str, Any]:
    expect(*api.call("GET", "/health"), 200, "GET /health")
    due = datetime.now(UTC) + timedelta(seconds=lead_seconds)
    status, job = api.call(
        "POST",
        "/jobs",
        {
            "name": f"smoke-{due:%Y%m%dT%H%M%S}",
            "task": {"type": "noop"},
            "schedule": {"type": "at", "at": due.isoformat(timespec="milliseconds")},
        },
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    expect(status, job, 201, "POST /jobs")
    started = time.monotonic()
    execution: dict[str, Any] | None = None
    while time.monotonic() - started < lead_seconds + timeout_seconds:
        status, page = api.call("GET", f"/jobs/{job['id']}/executions?limit=1")
        expect(status, page, 200, "GET /jobs/{id}/executions")
        execution = page["items"][0] if page["items"] else None
        if execution is not None and execution["status"] in FINAL_STATUSES:
            break
        time.sleep(2)
    else:
        api.call("DELETE", f"/jobs/{job['id']}")  # don't leave a late run behind
    return {
        "api_url": api.base_url,
        "job_id": job["id"],
        "scheduled_at": execution["scheduled_at"] if execution else due.isoformat(),
        "status": execution["status"] if execution else "TIMED_OUT",
        "attempts": execution.get("attempts") if execution else None,
        "started_at": execution.get("started_at") if execution else None,
        "finished_at": execution.get("finished_at") if execution else None,
        "lateness_ms": execution.get("lateness_ms") if execution else None,
        "error": execution.get("error") if execution else None,
        "waited_seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="Punctual", help="CloudFormation stack name (default Punctual)")
    parser.add_argument("--region", help="AWS region (default: the AWS CLI/SDK configuration)")
    parser.add_argument("--profile", help="AWS profile")
    parser.add_argument("--lead", type=float, default=10.0, help="seconds between now and the run")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait after the run time")
    args = parser.parse_args(argv)

    session = boto3.Session(region_name=args.region, profile_name=args.profile)
    api = SignedApi(api_url(session, args.stack), session)
    report = run(api, lead_seconds=args.lead, timeout_seconds=args.timeout)
    print(json.dumps(report, indent=2))
    return 0 if report["status"] == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
