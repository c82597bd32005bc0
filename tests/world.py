"""A Punctual deployment inside moto, driven like AWS drives it, on a clock the test moves.

moto's SQS reads the time for DelaySeconds and visibility timeouts; it is pointed at the test's clock
so that delayed messages and retries behave as they would, without waiting.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import boto3
import moto.sqs.models
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from functions.api.handler import lambda_handler as api_handler
from functions.dead_letter.handler import lambda_handler as dead_letter_handler
from functions.notifier.handler import lambda_handler as notifier_handler
from functions.scanner.handler import lambda_handler as scanner_handler
from functions.worker.handler import lambda_handler as worker_handler
from punctual import wiring
from punctual.platform import aws
from punctual.platform.clock import ManualClock
from punctual.platform.config import Settings
from punctual.store import keys
from punctual.wiring import Punctual
from punctual_local import provision
from punctual_local.esm import EventSourceMapping
from punctual_local.lambda_events import FakeLambdaContext, api_gateway_event, http_api_event
from punctual_local.moto.atomic import make_queues_atomic, make_writes_atomic

# API Gateway's proxy events: an HTTP API's (payload format 2.0, the deployed default) and a REST
# API's (payload format 1.0). The API function answers both.
API_EVENTS = {"http": http_api_event, "rest": api_gateway_event}
# A Lambda environment answers one request at a time, and the API's handler keeps its request (and
# its metrics) in module state: tests that call it from several threads take turns, as Lambda would.
_ONE_REQUEST_AT_A_TIME = threading.RLock()
REGION = "us-east-1"


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


class World:
    def __init__(self, punctual: Punctual, clock: ManualClock, sqs: Any, dynamodb_client: Any) -> None:
        self.punctual = punctual
        self.clock = clock
        self.sqs = sqs
        self.dynamodb_client = dynamodb_client
        self.work = EventSourceMapping(sqs, punctual.settings.queue_url, worker_handler)
        self.dead_letters = EventSourceMapping(sqs, punctual.settings.dlq_url, dead_letter_handler)
        self.notifications = EventSourceMapping(sqs, punctual.settings.notify_queue_url, notifier_handler)
        self.last_tick_minute: datetime | None = None
        self.api_format = "http"
        # Whether API requests may be answered side by side (the local stack's threaded API keeps
        # each thread's request apart); otherwise one at a time, as in a Lambda environment.
        self.side_by_side = False

    @property
    def store(self) -> Any:
        return self.punctual.store

    @contextmanager
    def counting_calls(self) -> Iterator[Counter[str]]:
        """Count AWS API calls by operation ("DynamoDB.PutItem"), from every client Punctual uses."""
        calls: Counter[str] = Counter()

        def count(event_name: str, **_: Any) -> None:
            _, service, operation = event_name.split(".", 2)
            calls[f"{service}.{operation}"] += 1

        clients = [*self.punctual.store.clients, self.sqs]
        for client in clients:
            client.meta.events.register("before-call.*.*", count)
        try:
            yield calls
        finally:
            for client in clients:
                client.meta.events.unregister("before-call.*.*", count)

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        owner: str | None = "alice",
        headers: dict[str, str] | None = None,
        query: str = "",
        raw: bytes | None = None,
        base64_body: bool = False,
    ) -> Answer:
        """Call the API function with an event in `api_format`; `base64_body` sends the body
        base64-encoded, as API Gateway does with binary media types."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        build = API_EVENTS[self.api_format]
        event = build(method, path, owner=owner, query=query, headers=all_headers, body=data)
        if base64_body and data:
            event.update(body=base64.b64encode(data).decode(), isBase64Encoded=True)
        with nullcontext() if self.side_by_side else _ONE_REQUEST_AT_A_TIME:
            response = api_handler(event, FakeLambdaContext())
        text = response.get("body") or ""
        return Answer(
            status=response["statusCode"],
            body=json.loads(text) if text else None,
            # (a REST API's answer carries its headers as lists)
            headers={
                **{k: ", ".join(v) for k, v in (response.get("multiValueHeaders") or {}).items()},
                **(response.get("headers") or {}),
            },
        )

    def create(
        self, schedule: dict[str, Any], task: dict[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        answer = self.api("POST", "/jobs", {"task": task or {"type": "noop"}, "schedule": schedule, **extra})
        assert answer.status == 201, answer.body
        return dict(answer.body)

    def job(self, job_id: str, owner: str = "alice") -> dict[str, Any]:
        answer = self.api("GET", f"/jobs/{job_id}", owner=owner)
        assert answer.status == 200, answer.body
        return dict(answer.body)

    def unread_markers(self) -> list[dict[str, Any]]:
        """Due markers the scanner has still to read: every soon marker (it deletes those it sends),
        and those in a minute's bucket at or past their shard's position (it leaves the rest to
        expire)."""
        items = self.dynamodb_client.scan(TableName=self.punctual.settings.table_name)["Items"]
        positions = self.store.scanner.positions(range(self.punctual.settings.shard_count))
        unread = []
        for item in items:
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if not keys.is_marker_pk(pk):
                continue
            shard, soon = keys.marker_place(pk)
            position = positions.get(shard)
            if soon or position is None:
                unread.append(item)
                continue
            # (bucket keys sort by minute: a later bucket's, or this one's past the position)
            at = keys.bucket_pk(position.minute, shard)
            if pk > at or (pk == at and sk >= position.after):
                unread.append(item)
        return unread

    def executions(self, job_id: str, owner: str = "alice") -> list[dict[str, Any]]:
        answer = self.api("GET", f"/jobs/{job_id}/executions", owner=owner, query="limit=100")
        assert answer.status == 200, answer.body
        return list(answer.body["items"])

    def tick(self) -> dict[str, Any]:
        self.last_tick_minute = self.clock.now().replace(second=0, microsecond=0)
        return dict(scanner_handler({}, FakeLambdaContext()))

    def drain(self) -> int:
        """Deliver what each queue holds visible now. A queue with nothing visible is not polled: such
        a poll answers nothing, and a test running an hour of clock made thousands of them (most of
        its time)."""
        settings = self.punctual.settings
        mappings = [
            (self.work, settings.queue_url),
            (self.dead_letters, settings.dlq_url),
            (self.notifications, settings.notify_queue_url),
        ]
        return sum(mapping.drain() for mapping, url in mappings if _holds_visible(url))

    def run_for(self, seconds: float, step: float = 1.0) -> None:
        """Let time pass as on AWS: the scanner ticks each minute; the workers poll all along."""
        end = self.clock.now() + timedelta(seconds=seconds)
        while self.clock.now() < end:
            minute = self.clock.now().replace(second=0, microsecond=0)
            if self.last_tick_minute != minute:
                self.tick()
            self.drain()
            self.clock.advance(step)
        self.drain()


def _holds_visible(queue_url: str) -> bool:
    """Whether moto's queue holds a message a receive would return now (as moto's own receive sees it:
    visible, not delayed)."""
    queue = moto.sqs.models.sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues.get(queue_url.rsplit("/", 1)[-1])
    return queue is None or bool(queue.messages)


@dataclass(frozen=True)
class _Clients:
    session: boto3.session.Session
    dynamodb: Any
    sqs: Any
    dynamodb_resource: Any


# A world's clients, made once a process: making a client (its endpoint rules, its handlers) cost
# more than the rest of a world's set-up. moto's hook answers a client made before its mock starts
# as one made after (each world's mock_aws still starts with no table and no queue). A test that
# changes a client does so through monkeypatch, which puts it back. The store's own client is made
# each world (from one session, which keeps what clients share), as the functions make it: its retry
# mode keeps a quota of retries that one test's throttling would otherwise spend for the next.
@functools.cache
def _clients() -> _Clients:
    return _Clients(
        session=boto3.session.Session(region_name=REGION),
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        sqs=boto3.client("sqs", region_name=REGION),
        dynamodb_resource=boto3.resource("dynamodb", region_name=REGION),
    )


def settings_for(provisioned: provision.Provisioned, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "table_name": provisioned.table_name,
        "queue_url": provisioned.queue_url,
        "dlq_url": provisioned.dlq_url,
        "notify_queue_url": provisioned.notify_queue_url,
        "shard_count": 4,
        "webhook_allowed_networks": ("127.0.0.0/8",),
        # moto's account: the topics and buses a test creates
        "notification_targets": (
            "arn:aws:sns:us-east-1:123456789012:*",
            "arn:aws:events:us-east-1:123456789012:event-bus/*",
        ),
    }
    values.update(overrides)
    return Settings(**values)


@contextmanager
def mocked_world(clock: ManualClock, **settings: Any) -> Iterator[World]:
    def now_seconds(dt: Any = None) -> float:
        return clock.now().timestamp()

    def now_millis(dt: Any = None) -> float:
        return clock.now().timestamp() * 1000

    make_writes_atomic()
    make_queues_atomic()
    with (
        # moto cannot run a function without Docker: its Lambda answers an invocation with its event.
        mock_aws(config={"lambda": {"use_docker": False}}),
        mock.patch.object(moto.sqs.models, "unix_time", now_seconds),
        mock.patch.object(moto.sqs.models, "unix_time_millis", now_millis),
    ):
        clients = _clients()
        provisioned = provision.create_all(clients.dynamodb, clients.sqs)
        chosen = settings_for(provisioned, **settings)
        punctual = wiring.build(
            chosen,
            clock=clock,
            dynamodb=clients.dynamodb_resource,
            dynamodb_client=aws.dynamodb_client(chosen, clients.session),
            sqs=clients.sqs,
        )
        wiring.set_default(punctual)
        try:
            yield World(punctual, clock, clients.sqs, clients.dynamodb)
        finally:
            wiring.set_default(None)
