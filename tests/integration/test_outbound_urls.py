"""Outbound URLs through the API: an `http` task's URL and a webhook notification's target are read
by one parser and checked by one guard (docs/api.md, "Task types" and "Notify rules"); a URL that is
not a valid absolute http(s) URL is refused, naming the field; a valid one is stored as given.

The world allows loopback webhooks, as the local stack does; nothing here resolves a name.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.hostile_urls import FOUND_IN_THE_SWEEP
from tests.world import Answer, World

CRON = {"type": "cron", "expression": "0 10 * * *", "timezone": "Europe/Paris"}
NOOP = {"type": "noop"}


def with_task_url(world: World, url: str) -> Answer:
    return world.api("POST", "/jobs", {"task": {"type": "http", "params": {"url": url}}, "schedule": CRON})


def with_notify_target(world: World, url: str) -> Answer:
    rules: list[dict[str, Any]] = [{"on": ["succeeded"], "to": url}]
    return world.api("POST", "/jobs", {"task": NOOP, "schedule": CRON, "notify": rules})


def assert_refused(answer: Answer, field: str, says: str = "") -> None:
    assert (answer.status, answer.body.get("field")) == (422, field), answer.body
    assert answer.body["message"].startswith(f"{field}: "), answer.body
    assert says in answer.body["message"], answer.body


@pytest.mark.parametrize("url", FOUND_IN_THE_SWEEP)
def test_a_private_address_in_any_spelling_is_refused_as_a_task_url_and_as_a_notification_target(
    world: World, url: str
) -> None:
    # When a job is created with the URL as its task's / as a notification target
    # Then each is refused, naming its field, and no job is stored
    assert_refused(with_task_url(world, url), "task.params.url")
    assert_refused(with_notify_target(world, url), "notify[0].to")
    assert world.api("GET", "/jobs").body["items"] == []


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http:///x", "no host"),
        ("http://127.0.0.1:19900/\r\nX: y", "control character U+000D"),
        ("http://127.0.0.1:19900/a\x00b", "control character U+0000"),
    ],
)
def test_a_url_that_is_not_valid_is_refused_rather_than_rewritten(world: World, url: str, says: str) -> None:
    assert_refused(with_task_url(world, url), "task.params.url", says)
    assert_refused(with_notify_target(world, url), "notify[0].to", says)
    assert world.api("GET", "/jobs").body["items"] == []


def test_a_valid_url_is_stored_and_shown_exactly_as_given(world: World) -> None:
    # Given a URL that a URL normaliser would rewrite (host case, dot segments, an empty query value)
    url = "http://Hooks.Example.COM:8080/a/../b/./c%2f?x=%41&y="

    # When it is a job's task URL and its notification target
    answer = world.api(
        "POST",
        "/jobs",
        {
            "task": {"type": "http", "params": {"url": url}},
            "schedule": CRON,
            "notify": [{"on": ["failed"], "to": url}],
        },
    )

    # Then it is stored and shown as given
    assert answer.status == 201, answer.body
    shown = world.job(answer.body["id"])
    assert shown["task"]["params"]["url"] == url
    assert shown["notify"][0]["to"] == url
