"""The `http` task's parameters as the registry checks them: URLs in every spelling, loopback names,
headers and numbers; and the same URLs refused again at run time. Nothing leaves the machine."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from punctual import tasks
from punctual.domain.errors import InvalidRequest
from punctual.domain.models import TaskSpec
from punctual.tasks import TaskFailed, TaskPolicy
from tests.hostile_urls import (
    KEPT_AS_GIVEN,
    LOCAL_STACK_NETWORKS,
    MALFORMED,
    PRIVATE_SPELLINGS,
    PublicForAnyName,
)
from tests.stubs import StubResolver
from tests.unit.tasks.webhook import LOOPBACK, Webhook, context, run_http


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
