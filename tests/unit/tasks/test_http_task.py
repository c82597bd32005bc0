"""Task types: the `http` task against a real server on 127.0.0.1, the registry's validation, and the
basic noop / sleep / fail tasks. Name resolution is stubbed; nothing leaves the machine."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.errors import InvalidRequest
from punctual.domain.models import TaskSpec
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskContext, TaskFailed, TaskPolicy
from tests.hostile_urls import (
    KEPT_AS_GIVEN,
    LOCAL_STACK_NETWORKS,
    MALFORMED,
    PRIVATE_SPELLINGS,
    PublicForAnyName,
)
from tests.stubs import StubResolver, no_lookups

LOOPBACK = ("127.0.0.0/8",)
SCHEDULED_AT = datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC)
CLOCK_START = datetime(2026, 12, 1, 9, 0, 1, tzinfo=UTC)


# --- a webhook receiver on 127.0.0.1 --------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: Message
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # wait (until the test ends) before answering


class Webhook:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.replies: dict[str, Reply] = {}
        self.release = threading.Event()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                webhook.received.append(Received(self.command, self.path, self.headers, body))
                reply = webhook.replies.get(self.path.split("?")[0], Reply())
                if reply.hang:
                    webhook.release.wait(10)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (timeout test)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def webhook_server() -> Iterator[Webhook]:
    hook = Webhook()
    hook.thread.start()
    yield hook
    hook.release.set()
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def webhook(webhook_server: Webhook) -> Iterator[Webhook]:
    """One server for the module; each test starts with no requests and default replies."""
    webhook_server.received.clear()
    webhook_server.replies.clear()
    webhook_server.release.clear()
    yield webhook_server
    webhook_server.release.set()  # let a hanging handler finish


def context(**changes: Any) -> TaskContext:
    values: dict[str, Any] = {
        "job_id": "job-42",
        "execution_id": "job-42.19ad6b9e2a3.3",
        "scheduled_at": SCHEDULED_AT,
        "attempt": 2,
        "timeout_seconds": 5,
        "clock": ManualClock(CLOCK_START),
        "resolver": no_lookups,
    }
    networks = changes.pop("allowed_networks", LOOPBACK)
    return TaskContext(**(values | changes), policy=TaskPolicy(allowed_networks=networks))


def run_http(params: dict[str, Any], ctx: TaskContext | None = None) -> Any:
    ctx = ctx or context()
    spec = tasks.validate(TaskSpec(type="http", params=params), ctx.policy)
    return tasks.run(spec, ctx)


def http_failure(params: dict[str, Any], ctx: TaskContext | None = None) -> TaskFailed:
    with pytest.raises(TaskFailed) as caught:
        run_http(params, ctx)
    return caught.value


# --- what the http task sends ---------------------------------------------------------------------


def test_http_task_sends_method_path_body_headers_and_execution_identity(webhook: Webhook) -> None:
    # Given a PUT with a JSON body and a custom header, for attempt 2 of an execution
    params = {
        "url": webhook.url("/hooks/report?tenant=acme&x=1"),
        "method": "put",
        "headers": {"X-Tenant": "acme", "Authorization": "Bearer s3cret"},
        "body": {"report": "nightly", "sizes": [1, 2.5, None], "name": "café"},
    }

    # When the task runs
    run_http(params)

    # Then the receiver got exactly that request, with the four identity headers
    [request] = webhook.received
    assert request.method == "PUT"
    assert request.path == "/hooks/report?tenant=acme&x=1"
    assert json.loads(request.body) == params["body"]
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Tenant"] == "acme"
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert request.headers["X-Punctual-Job-Id"] == "job-42"
    assert request.headers["X-Punctual-Execution-Id"] == "job-42.19ad6b9e2a3.3"
    assert request.headers["X-Punctual-Scheduled-At"] == "2026-12-01T09:00:00.123Z"
    assert request.headers["X-Punctual-Attempt"] == "2"


def test_http_task_identity_headers_follow_the_context(webhook: Webhook) -> None:
    # Given another execution, attempt 1 / Then the headers say so (they are not constants)
    run_http(
        {"url": webhook.url()},
        context(
            job_id="j2",
            execution_id="j2.e",
            attempt=1,
            scheduled_at=datetime(2027, 1, 2, 3, 4, 5, tzinfo=UTC),
        ),
    )
    headers = webhook.received[0].headers
    assert (
        headers["X-Punctual-Job-Id"],
        headers["X-Punctual-Execution-Id"],
        headers["X-Punctual-Scheduled-At"],
        headers["X-Punctual-Attempt"],
    ) == ("j2", "j2.e", "2027-01-02T03:04:05.000Z", "1")


def test_http_task_posts_by_default(webhook: Webhook) -> None:
    run_http({"url": webhook.url()})
    assert webhook.received[0].method == "POST"


@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH", "HEAD"])
def test_http_task_uses_the_given_method(webhook: Webhook, method: str) -> None:
    run_http({"url": webhook.url(), "method": method})
    assert webhook.received[0].method == method


def test_http_task_without_body_sends_no_body_and_no_content_type(webhook: Webhook) -> None:
    run_http({"url": webhook.url(), "method": "GET"})
    request = webhook.received[0]
    assert request.body == b""
    assert "Content-Type" not in request.headers


@pytest.mark.parametrize(
    ("name", "value"),
    [("content-type", "application/cloudevents+json"), ("user-agent", "acme-hooks/2")],
)
def test_http_task_user_header_replaces_the_default_whatever_its_case(
    webhook: Webhook, name: str, value: str
) -> None:
    # Given a header Punctual also sets by default, written in lower case
    run_http({"url": webhook.url(), "headers": {name: value}, "body": {"a": 1}})

    # Then the receiver sees it once, with the user's value
    assert webhook.received[0].headers.get_all(name) == [value]


# --- how the http task reads the answer -----------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected_body"),
    [
        (Reply(200, b'{"ok": true, "n": 3}', {"Content-Type": "application/json"}), {"ok": True, "n": 3}),
        (Reply(201, b"created"), "created"),
        (Reply(204), None),
    ],
)
def test_http_task_2xx_succeeds_with_status_and_body(
    webhook: Webhook, reply: Reply, expected_body: Any
) -> None:
    webhook.replies["/hook"] = reply
    assert run_http({"url": webhook.url()}) == {"status": reply.status, "body": expected_body}


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (502, True),
        (503, True),
        (429, True),
        (408, True),
        (404, False),
        (400, False),
        (401, False),
        (410, False),
    ],
)
def test_http_task_error_status_fails_retryably_only_when_retrying_can_help(
    webhook: Webhook, status: int, retryable: bool
) -> None:
    # Given a receiver answering an error status
    webhook.replies["/hook"] = Reply(status, b'{"error": "nope"}')

    # When the task runs / Then it fails, retryable for 408, 429 and 5xx, with the answer as its result
    failure = http_failure({"url": webhook.url()})
    assert failure.retryable is retryable
    assert str(status) in str(failure)
    assert failure.result == {"status": status, "body": {"error": "nope"}}
    assert len(webhook.received) == 1  # one attempt per run: retries are the worker's business


def test_http_task_does_not_follow_redirects(webhook: Webhook) -> None:
    # Given a receiver redirecting to another path on the same server
    webhook.replies["/hook"] = Reply(302, headers={"Location": webhook.url("/elsewhere")})

    # When the task runs / Then the redirect is a final failure, and the target is never called
    failure = http_failure({"url": webhook.url()})
    assert failure.retryable is False
    assert failure.result["status"] == 302
    assert [r.path for r in webhook.received] == ["/hook"]


def test_http_task_connection_refused_is_retryable() -> None:
    # Given a port nothing listens on (bound, then closed)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    # When the task runs / Then it fails, retryably
    failure = http_failure({"url": f"http://127.0.0.1:{port}/hook"})
    assert failure.retryable is True


@pytest.mark.parametrize(
    ("params_timeout", "context_timeout"),
    [(0.5, 30), (10, 0.3)],
    ids=["task-timeout", "job-timeout-is-the-ceiling"],
)
def test_http_task_timeout_is_retryable(
    webhook: Webhook, params_timeout: float, context_timeout: float
) -> None:
    # Given a receiver that does not answer
    webhook.replies["/hook"] = Reply(hang=True)

    # When the task runs with the smaller of its own and the job's timeout
    started = time.monotonic()
    failure = http_failure(
        {"url": webhook.url(), "timeout_seconds": params_timeout}, context(timeout_seconds=context_timeout)
    )
    elapsed = time.monotonic() - started

    # Then it gives up after about that long, retryably
    assert failure.retryable is True
    assert min(params_timeout, context_timeout) * 0.8 <= elapsed < 3


# --- the address guard, at run time ---------------------------------------------------------------


def test_http_task_refuses_a_name_resolving_to_loopback_without_connecting(webhook: Webhook) -> None:
    # Given a deployment that allows no private network, and a name that resolves to 127.0.0.1
    resolver = StubResolver({"hooks.example.test": ["127.0.0.1"]})
    ctx = context(allowed_networks=(), resolver=resolver)

    # When the task runs / Then it fails for good, and the receiver never saw a request
    failure = http_failure({"url": webhook.url(host="hooks.example.test")}, ctx)
    assert failure.retryable is False
    assert "127.0.0.1" in str(failure)
    assert webhook.received == []


def test_http_task_refuses_a_literal_loopback_url_once_loopback_is_no_longer_allowed(
    webhook: Webhook,
) -> None:
    # Given a job validated while loopback was allowed, run by a deployment that does not allow it
    spec = tasks.validate(TaskSpec(type="http", params={"url": webhook.url()}), TaskPolicy(LOOPBACK))

    # When it runs / Then it is refused without connecting
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec, context(allowed_networks=()))
    assert caught.value.retryable is False
    assert webhook.received == []


def test_http_task_connects_to_the_checked_address_and_keeps_the_host_name(webhook: Webhook) -> None:
    # Given a name that resolves (once) to an allowed address
    resolver = StubResolver({"hooks.example.test": ["127.0.0.1"]})

    # When the task runs
    run_http({"url": webhook.url(host="hooks.example.test")}, context(resolver=resolver))

    # Then it looked the name up once (no second lookup to rebind), connected to that address, and
    # sent the name in Host
    assert resolver.asked == [("hooks.example.test", webhook.port)]
    assert webhook.received[0].headers["Host"] == f"hooks.example.test:{webhook.port}"


# --- validation through the registry --------------------------------------------------------------


def invalid(spec: dict[str, Any], allowed_networks: tuple[str, ...] = ()) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        tasks.validate(TaskSpec.model_validate(spec), TaskPolicy(allowed_networks))
    return caught.value


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://192.168.1.10:8080/",
        "http://127.0.0.1/",
        "http://127.1/",
        "http://[::1]:8080/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
    ],
)
def test_validate_refuses_a_literal_private_address(url: str) -> None:
    error = invalid({"type": "http", "params": {"url": url}})
    assert error.field == "task.params.url"
    assert str(error).startswith("task.params.url")


def test_validate_accepts_loopback_when_the_deployment_allows_it() -> None:
    spec = tasks.validate(
        TaskSpec(type="http", params={"url": "http://127.0.0.1:8080/x"}), TaskPolicy(LOOPBACK)
    )
    assert spec.params["url"] == "http://127.0.0.1:8080/x"


@pytest.mark.parametrize(
    "url",
    [
        "http://[::ffff:0:127.0.0.1]/",  # IPv4-translated (SIIT)
        "http://[::ffff:0:7f00:1]/",
        "http://[::127.0.0.1]/",  # IPv4-compatible
        "http://[::10.0.0.1]/",
        "http://[::ffff:0:169.254.169.254]/",
        "http://[64:ff9b:1::a00:1]/",  # NAT64's local-use prefix
        "http://2130706433/",  # one number
        "http://0x7f.1/",  # hexadecimal
        "http://0177.0.0.1/",  # octal
        "http://127.0.0.1./",  # a trailing dot
        "http://%31%32%37.0.0.1/",  # percent-encoded
        "http://\uff11\uff12\uff17.0.0.1/",  # full-width digits
    ],
)
def test_validate_refuses_a_private_address_in_every_spelling(url: str) -> None:
    error = invalid({"type": "http", "params": {"url": url}})
    assert error.field == "task.params.url", url


@pytest.mark.parametrize("url", PRIVATE_SPELLINGS)
def test_validate_refuses_every_spelling_of_a_private_address_where_loopback_is_allowed(url: str) -> None:
    # Given the local stack's allowed networks / When a task's URL is a private address in some
    # spelling / Then it is refused, naming the field
    error = invalid({"type": "http", "params": {"url": url}}, LOCAL_STACK_NETWORKS)
    assert error.field == "task.params.url"
    assert str(error).startswith("task.params.url: ")


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every connection the task opens, refused: a test that sees one here sent something."""
    opened: list[tuple[str, int]] = []

    def refuse(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        opened.append(address)
        raise ConnectionRefusedError("no connection in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return opened


@pytest.mark.parametrize("url", PRIVATE_SPELLINGS)
def test_a_stored_url_in_a_private_spelling_is_refused_at_run_time_without_a_lookup_or_a_connection(
    url: str, connections: list[tuple[str, int]]
) -> None:
    # Given a task stored as given (before these checks, say), and a resolver that would answer a
    # public address for any name
    resolver = PublicForAnyName()
    spec = TaskSpec(type="http", params={"url": url})

    # When it runs / Then it fails for good, having looked nothing up and connected nowhere
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec, context(allowed_networks=LOCAL_STACK_NETWORKS, resolver=resolver))
    assert caught.value.retryable is False
    assert resolver.asked == [] and connections == []


@pytest.mark.parametrize(
    "job_name",
    [
        "0xa.0.0.1",
        "167772161",
        "10.1",
        "192.168.1.1.",
        "1\uff10.0.0.1",
        "10.0.0.1\\@127.0.0.1:19900",
        "user@10.0.0.1",
        "[::ffff:10.0.0.1]",
        "10.0.0.1",
        "169.254.169.254/latest",
        "10.0.0.1@public.example.com",
    ],
)
def test_a_templated_url_is_checked_after_its_references_are_substituted(
    job_name: str, connections: list[tuple[str, int]]
) -> None:
    # Given a URL whose host is the job's name, taken at creation (with the sample name)
    resolver = PublicForAnyName()
    spec = tasks.validate(
        TaskSpec(type="http", params={"url": "http://{{ job.name }}/hook"}), TaskPolicy(LOCAL_STACK_NETWORKS)
    )

    # When it runs for a job whose name makes it a private address
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec, context(allowed_networks=LOCAL_STACK_NETWORKS, resolver=resolver, job_name=job_name))

    # Then it fails for good, having looked nothing up and connected nowhere
    assert caught.value.retryable is False
    assert resolver.asked == [] and connections == []


@pytest.mark.parametrize(("url", "says"), MALFORMED)
def test_validate_refuses_what_is_not_an_absolute_http_url_saying_why(url: str, says: str) -> None:
    error = invalid({"type": "http", "params": {"url": url}})
    assert error.field == "task.params.url"
    assert str(error).startswith("task.params.url: ")
    assert says in str(error)


@pytest.mark.parametrize("url", KEPT_AS_GIVEN)
def test_validate_stores_the_url_exactly_as_given(url: str) -> None:
    spec = tasks.validate(TaskSpec(type="http", params={"url": url}), TaskPolicy())
    assert spec.params["url"] == url


def test_http_task_sends_the_path_and_query_as_given(webhook: Webhook) -> None:
    # Given a URL with dot segments, escapes and an empty query value (which URL normalisers rewrite)
    target = "/a/../b/./c%2fd;p=1?x=%41&y="

    # When the task runs
    run_http({"url": webhook.url(target)})

    # Then the receiver is asked for exactly that target
    assert [r.path for r in webhook.received] == [target]


LOCALHOST_NAMES = [
    "localhost",
    "LOCALHOST",
    "localhost.",
    "LocalHost.",
    "hooks.localhost",
    "a.b.localhost.",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
]


@pytest.mark.parametrize("host", LOCALHOST_NAMES)
def test_validate_refuses_a_loopback_name_without_looking_it_up(host: str) -> None:
    # (nothing is resolved: the resolver is not even given to validation)
    error = invalid({"type": "http", "params": {"url": f"http://{host}:8080/hook"}})
    assert error.field == "task.params.url"
    assert "loopback" in str(error)


@pytest.mark.parametrize("allowed", [("127.0.0.0/8",), ("::1/128",), ("127.0.0.0/8", "::1/128")])
@pytest.mark.parametrize("host", LOCALHOST_NAMES)
def test_validate_takes_a_loopback_name_when_run_time_would_call_it(
    host: str, allowed: tuple[str, ...]
) -> None:
    # The local stack allows loopback webhooks: what run time would call, creation takes
    spec = tasks.validate(TaskSpec(type="http", params={"url": f"http://{host}/x"}), TaskPolicy(allowed))
    assert spec.params["url"].startswith("http://")


@pytest.mark.parametrize(
    "url",
    ["http://localhost.example.com/", "http://mylocalhost/", "http://localhostx/", "http://[::8.8.8.8]/"],
)
def test_validate_takes_names_that_only_look_local(url: str) -> None:
    assert tasks.validate(TaskSpec(type="http", params={"url": url}), TaskPolicy()).params["url"]


@pytest.mark.parametrize("host", ["localhost.", "hooks.localhost"])
def test_http_task_still_refuses_a_loopback_name_at_run_time(host: str, webhook: Webhook) -> None:
    # Given a job taken while loopback was allowed, run where it no longer is (the name resolved by a stub)
    url = webhook.url(host=host)  # (were it not refused, the call would reach this test's receiver)
    spec = tasks.validate(TaskSpec(type="http", params={"url": url}), TaskPolicy(LOOPBACK))
    resolver = StubResolver({host: ["127.0.0.1"]})

    # When it runs / Then it is refused without connecting
    with pytest.raises(TaskFailed) as caught:
        tasks.run(spec, context(allowed_networks=(), resolver=resolver))
    assert caught.value.retryable is False
    assert webhook.received == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"url": "https://h.example.com", "timeout_seconds": "5"}, "task.params.timeout_seconds"),
        ({"url": "https://h.example.com", "timeout_seconds": True}, "task.params.timeout_seconds"),
    ],
)
def test_validate_refuses_a_number_sent_as_a_string_or_boolean(params: dict[str, Any], field: str) -> None:
    assert invalid({"type": "http", "params": params}).field == field


def test_validate_leaves_names_to_run_time() -> None:
    # A name is checked when it is resolved, at run time (its addresses may change in between).
    spec = tasks.validate(TaskSpec(type="http", params={"url": "https://hooks.example.com/x"}), TaskPolicy())
    assert spec.params["url"] == "https://hooks.example.com/x"


@pytest.mark.parametrize(
    "url", ["ftp://example.com/file", "file:///etc/passwd", "gopher://example.com/", "example.com/hook", ""]
)
def test_validate_refuses_a_url_that_is_not_http(url: str) -> None:
    assert invalid({"type": "http", "params": {"url": url}}).field == "task.params.url"


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "internal.example"},
        {"content-length": "0"},
        {"Transfer-Encoding": "chunked"},
        {"Connection": "upgrade"},
        {"X-Punctual-Job-Id": "forged"},
        {"x-punctual-attempt": "1"},
        {"X-Punctual-Anything": "x"},
        {"X-Injected": "a\r\nHost: evil"},
        {"": "empty"},
    ],
)
def test_validate_refuses_reserved_or_malformed_headers(headers: dict[str, str]) -> None:
    error = invalid({"type": "http", "params": {"url": "https://hooks.example.com/", "headers": headers}})
    assert error.field == "task.params.headers"


@pytest.mark.parametrize(
    "headers",
    [{"X-Bad:Name": "1"}, {" X-Leading-Space": "1"}, {"X-Arrow": "a→b"}],
    ids=["colon", "space", "non-latin-1"],
)
def test_validate_refuses_headers_that_cannot_be_sent(headers: dict[str, str]) -> None:
    error = invalid({"type": "http", "params": {"url": "https://hooks.example.com/", "headers": headers}})
    assert error.field == "task.params.headers"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "http", "params": {"url": "https://h.example/", "retries": 3}}, "task.params.retries"),
        ({"type": "http", "params": {}}, "task.params.url"),
        ({"type": "http", "params": {"url": "https://h.example/", "method": "TRACE"}}, "task.params.method"),
        (
            {"type": "http", "params": {"url": "https://h.example/", "timeout_seconds": 0}},
            "task.params.timeout_seconds",
        ),
        (
            {"type": "http", "params": {"url": "https://h.example/", "timeout_seconds": 301}},
            "task.params.timeout_seconds",
        ),
        ({"type": "noop", "params": {"x": 1}}, "task.params.x"),
        ({"type": "sleep", "params": {}}, "task.params.seconds"),
        ({"type": "sleep", "params": {"seconds": -1}}, "task.params.seconds"),
        ({"type": "sleep", "params": {"seconds": 901}}, "task.params.seconds"),
        ({"type": "fail", "params": {"message": "x" * 1001}}, "task.params.message"),
    ],
)
def test_validate_names_the_offending_parameter(spec: dict[str, Any], field: str) -> None:
    error = invalid(spec)
    assert error.field == field
    assert str(error).startswith(field + ":")


def test_validate_refuses_an_unknown_task_type_listing_the_known_ones() -> None:
    error = invalid({"type": "smtp", "params": {}})
    assert error.field == "task.type"
    assert "smtp" in str(error)
    assert all(name in str(error) for name in ("http", "lambda", "noop", "sleep", "fail"))


def test_validate_fills_in_defaults_and_normalises_the_method() -> None:
    spec = tasks.validate(
        TaskSpec(type="http", params={"url": "https://h.example/x", "method": "patch"}), TaskPolicy()
    )
    assert spec.params == {"url": "https://h.example/x", "method": "PATCH", "headers": {}}


def test_registry_lists_the_builtin_types() -> None:
    assert [t.name for t in tasks.all_types()] == [
        "eventbridge",
        "fail",
        "http",
        "lambda",
        "noop",
        "sleep",
        "sns",
        "sqs",
        "stepfunctions",
    ]


# --- noop, sleep, fail ------------------------------------------------------------------------------


def run_basic(task_type: str, params: dict[str, Any], ctx: TaskContext) -> Any:
    return tasks.run(tasks.validate(TaskSpec(type=task_type, params=params), TaskPolicy()), ctx)


def test_noop_succeeds_at_once() -> None:
    ctx = context()
    assert run_basic("noop", {}, ctx) is None
    assert ctx.clock.now() == CLOCK_START


def test_sleep_sleeps_on_the_context_clock() -> None:
    # Given a manual clock / When a 42.5 s sleep runs under a 60 s timeout
    clock = ManualClock(CLOCK_START)
    result = run_basic("sleep", {"seconds": 42.5}, context(clock=clock, timeout_seconds=60))

    # Then it returns at once, the clock moved by exactly that much
    assert result == {"slept_seconds": 42.5}
    assert clock.now() == CLOCK_START + timedelta(seconds=42.5)


def test_sleep_longer_than_the_timeout_times_out_retryably_at_the_timeout() -> None:
    # Given a 100 s sleep under a 10 s timeout
    clock = ManualClock(CLOCK_START)
    with pytest.raises(TaskFailed) as caught:
        run_basic("sleep", {"seconds": 100}, context(clock=clock, timeout_seconds=10))

    # Then it fails retryably once the timeout has passed, not after the full sleep
    assert caught.value.retryable is True
    assert "timed out" in str(caught.value)
    assert clock.now() == CLOCK_START + timedelta(seconds=10)


@pytest.mark.parametrize(("params", "message"), [({}, "failed on purpose"), ({"message": "boom"}, "boom")])
def test_fail_always_fails_retryably(params: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskFailed) as caught:
        run_basic("fail", params, context())
    assert caught.value.retryable is True
    assert str(caught.value) == message
