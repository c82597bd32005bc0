"""The local stack's log lines (punctual_local.logs): what a request puts in them cannot drive a terminal."""

from __future__ import annotations

import json
import logging
import sys

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from punctual_local.logs import ReadableFormatter

# The request of the sweep that coloured and rewrote the stack's log (with a NUL for good measure).
INJECTED = "/x\x1b[31mINJECTED\x1b[0m\x08\x08\x07\x00"


def record(message: str, **extra: object) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "punctual", "levelno": logging.INFO, "levelname": "INFO", "msg": message, **extra}
    )


def test_a_readable_line_escapes_the_control_characters_of_its_message_and_fields():
    # Given a line whose message and fields carry a request's escape codes, a NUL and separators
    line = ReadableFormatter().format(
        record(f"no such endpoint: GET {INJECTED}", path=INJECTED, agent="a b\x1b[2J\u2028\u202e")
    )
    # Then the line holds no character a terminal would act on, and each is shown as its escape
    assert line.isprintable()
    assert "GET /x\\x1b[31mINJECTED\\x1b[0m\\x08\\x08\\x07\\x00" in line
    assert "path=/x\\x1b[31mINJECTED\\x1b[0m\\x08\\x08\\x07\\x00" in line
    assert "agent='a b\\x1b[2J\\u2028\\u202e'" in line


def test_a_traceback_keeps_its_lines_and_escapes_the_rest():
    try:
        raise ValueError(f"bad path {INJECTED}\rFAKE LINE")
    except ValueError:
        failed = record("request failed", exc_info=sys.exc_info())
    lines = ReadableFormatter().format(failed).split("\n")
    assert len(lines) > 2 and all(line.isprintable() for line in lines)
    assert lines[-1] == "ValueError: bad path /x\\x1b[31mINJECTED\\x1b[0m\\x08\\x08\\x07\\x00\\rFAKE LINE"


def test_a_json_line_escapes_control_characters_by_jsons_rules():
    # (--json locally, and every line on Lambda: Powertools' formatter)
    line = LambdaPowertoolsFormatter().format(record(f"no such endpoint: GET {INJECTED}", path=INJECTED))
    assert line.isprintable()
    assert json.loads(line)["path"] == INJECTED


def test_a_packs_line_reads_as_a_line_an_execution():
    # Given the worker's one line for a pack's successes
    pack = record(
        "pack succeeded",
        pack_id="p1",
        succeeded=[["job_a.1a2.1", "http", 12, 40], ["job_b.1a2.3", "noop", 0, 1]],
    )
    # Then a person reads a line for each execution, with its job, lateness and duration
    lines = ReadableFormatter().format(pack).split("\n")
    assert [line.split(" ", 1)[1] for line in lines] == [
        "execution succeeded    job=job_a execution=job_a.1a2.1 late_ms=12 took_ms=40 task=http",
        "execution succeeded    job=job_b execution=job_b.1a2.3 late_ms=0 took_ms=1 task=noop",
    ]
