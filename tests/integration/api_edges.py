"""What the tests of the API's edges share (docs/api.md). A request whose handler raises is recorded
as 502 (what API Gateway, or the local server, answers when the function fails), so that a test
says what went wrong instead of raising.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from punctual.platform.timefmt import to_rfc3339
from tests.world import Answer, World

CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
NOOP = {"type": "noop"}
BOTH_FORMATS = pytest.mark.usefixtures("api_format")


def seconds_ahead(world: World, seconds: float) -> str:
    return to_rfc3339(world.clock.now() + timedelta(seconds=seconds))


def call(world: World, method: str, path: str, body: Any = None, **kwargs: Any) -> Answer:
    try:
        return world.api(method, path, body, **kwargs)
    except Exception as exc:  # the function failed: API Gateway answers 5xx
        return Answer(status=502, body={"exception": f"{type(exc).__name__}: {exc}"[:300]}, headers={})


def snapshot(world: World) -> list[dict[str, Any]]:
    """Every item, but change records: one says only that a job may have changed since its run was
    sent (its pack then compares the job with what it read), so one left by a request that lost its
    race changes nothing a reader or a run sees."""
    items = world.dynamodb_client.scan(TableName=world.punctual.settings.table_name)["Items"]
    kept = [i for i in items if not i["pk"]["S"].startswith("CHANGED#")]
    return sorted(kept, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def assert_bad_input(answer: Answer, field: str | None = None) -> None:
    assert answer.status in (400, 422), (answer.status, answer.body)
    assert isinstance(answer.body, dict) and isinstance(answer.body.get("message"), str), answer.body
    if field is not None:
        assert field in answer.body["message"], answer.body


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def http_task_raw(body_json: bytes, url: str = "https://hooks.example.com/run") -> bytes:
    return (
        b'{"task":{"type":"http","params":{"url":"' + url.encode() + b'","body":' + body_json + b"}},"
        b'"schedule":{"type":"cron","expression":"0 10 * * *"}}'
    )


SLEEP = {"type": "sleep", "params": {"seconds": 1}}
HOOK = {"type": "http", "params": {"url": "https://hooks.example.com/run"}}
