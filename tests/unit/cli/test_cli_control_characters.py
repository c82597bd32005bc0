"""What the CLI prints holds no character a terminal would act on: an execution's error is what a
webhook receiver answered, and an API's message may echo what was sent, so a control character in
either is shown as its escape (in tables, details, watch lines and errors), escaped in `--json`, and
in `-q` as well."""

from __future__ import annotations

import json
import unicodedata
import urllib.parse

import pytest

from punctual_cli.display import escaped
from tests.unit.cli.fake_api import FakeApi, execution, job, run

Capsys = pytest.CaptureFixture[str]

# A receiver's status line: clear the screen, set the window title (ended by BEL), then a CSI alone
# (U+009B) to turn the text red.
HOSTILE = "HTTP/1.1 400 Bad \x1b[2J\x1b]0;PWNED\x07 thing \x9b31m"
SHOWN = "HTTP/1.1 400 Bad \\x1b[2J\\x1b]0;PWNED\\x07 thing \\x9b31m"


def raw_controls(text: str) -> list[str]:
    """The control characters (C0, DEL, C1) in `text` but its line ends."""
    return [char for char in text if unicodedata.category(char) == "Cc" and char != "\n"]


def test_each_control_character_is_shown_as_its_escape() -> None:
    # Given text holding C0 controls, DEL, a C1 control and a direction override
    text = "a\x1b[2Jb\x07c\x7fd\x9be\u202ef\tg\nh"

    # When it is shown
    shown = escaped(text)

    # Then each is written as Python writes it in a string, and nothing else changes
    assert shown == "a\\x1b[2Jb\\x07c\\x7fd\\x9be\\u202ef\\tg\\nh"
    assert escaped(text, keep="\n").endswith("g\nh")
    assert escaped("plain, é, 日本語") == "plain, é, 日本語"
    assert escaped("a\u061cb") == "a\\u061cb"  # (the Arabic letter mark turns direction too)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["executions", "job-1"], id="executions"),
        pytest.param(["jobs", "get", "job-1"], id="jobs get"),
        pytest.param(["watch", "job-1", "--count", "1"], id="watch"),
    ],
)
def test_a_receivers_control_characters_in_an_error_are_shown_escaped(
    api: FakeApi, capsys: Capsys, argv: list[str]
) -> None:
    # Given an execution whose error is what a webhook receiver answered, control characters and all
    failed = execution("ex-1", "FAILED", error=HOSTILE)
    api.answer("GET", "/jobs/job-1", job(last_execution=failed))
    api.answer("GET", "/jobs/job-1/executions", {"items": [failed], "next_cursor": None})

    # When it is shown to a person
    code, out, err = run(api, capsys, *argv)

    # Then no control character reaches the terminal: each shows as its escape
    assert code == 0
    assert raw_controls(out + err) == []
    assert SHOWN in out


def test_json_and_ids_carry_no_raw_control_character(api: FakeApi, capsys: Capsys) -> None:
    # Given an execution whose id and error hold ESC, DEL and a C1 control
    odd = execution("ex-\x1b[2J", "FAILED", error=HOSTILE + "\x7f")
    api.answer("GET", "/jobs/job-1/executions", {"items": [odd], "next_cursor": None})

    # When it is listed as JSON, and as ids
    _, as_json, _ = run(api, capsys, "--json", "executions", "job-1")
    _, ids, _ = run(api, capsys, "-q", "executions", "job-1")

    # Then the JSON escapes them and reads back the same, and the id is shown escaped
    assert raw_controls(as_json) == []
    assert json.loads(as_json)["items"][0]["error"] == HOSTILE + "\x7f"
    assert ids == "ex-\\x1b[2J\n"


def test_an_api_message_echoing_a_control_character_is_shown_escaped(api: FakeApi, capsys: Capsys) -> None:
    # Given an API whose 404 echoes the id it was sent, and lists it among its details
    given = "job_\x1b[31mRED\x07"
    api.answer(
        "GET",
        "/jobs/" + urllib.parse.quote(given, safe=""),
        {"message": f"job '{given}' not found", "errors": [f"id: no job is '{given}'"]},
        status=404,
    )

    # When that id is asked for
    code, out, err = run(api, capsys, "jobs", "get", given)

    # Then the error on stderr shows the id's control characters as their escapes
    assert code == 1
    assert out == ""
    assert raw_controls(err) == []
    assert err.splitlines() == [
        "punctual: error: job 'job_\\x1b[31mRED\\x07' not found (HTTP 404)",
        "  - id: no job is 'job_\\x1b[31mRED\\x07'",
    ]
