"""Checks of a request's body before the resolver parses it: JSON only (415 otherwise), parsed
strictly (no repeated keys, no NaN, bounded nesting), the Content-Type's case ignored."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

from punctual.api.errors import NOT_AN_OBJECT, error_event_response
from punctual.domain.validation import (
    integer_beyond_a_float,
    json_problem,
    nested_within,
    refuse_constant,
    unpaired_surrogate,
    without_strings,
)

# A request body nests at most this deep (a task's parameters, inside it, at most 32 levels).
MAX_BODY_DEPTH = 64
# A body longer than this is refused (413) before it is parsed: a job's parameters take 256 KiB at
# most, and all the rest of a job, a named task, a preview or a pause far less.
BODY_MAX_CHARS = 1 << 20
# A batch's: 3 MiB. Lambda takes an event of at most 6 MiB, the body in it a JSON string whose quotes
# are escaped; the batch's answer repeats its jobs, escaped the same way, within the same 6 MiB
# (responses.ANSWER_MAX_BYTES). And parsing and checking a batch costs in proportion to its size: the
# cap bounds its CPU, refused or created, to about three single creates'.
BATCH_BODY_MAX_CHARS = 3 << 20
BATCH_ROUTE = "/jobs/batch"

_WHITESPACE = " \t\n\r"


def strict_json(text: str) -> Any:
    """A request body parsed as JSON, refusing (as JSONDecodeError, which the resolver answers 422)
    what `json.loads` lets through but no store can keep (`json_problem`: nesting past MAX_BODY_DEPTH,
    numbers no float holds, unpaired surrogates; and NaN and Infinity), an object that repeats a key
    (`json.loads` keeps the last, silently: which one the client meant is anyone's guess, and other
    parsers keep the first), and what it raises instead of JSONDecodeError: nesting past the
    interpreter's recursion limit, an integer thousands of digits long."""
    try:
        value = json.loads(
            text, parse_constant=refuse_constant, parse_float=_finite, object_pairs_hook=_unique_keys
        )
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {MAX_BODY_DEPTH} levels", text, 0) from None
    except ValueError as exc:
        why = str(exc)
        if "integer string conversion" in why:  # (the interpreter's own words, and advice to its user)
            why = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        raise json.JSONDecodeError(why, text, 0) from None
    # (json_problem's walk of every value costs seconds on a body of millions of tiny ones: what it
    # looks for is read from the text instead, and walked for only where the text cannot tell)
    bare = without_strings(text)
    if integer_beyond_a_float(bare):
        raise json.JSONDecodeError(OUT_OF_RANGE, text, 0)
    within = nested_within(text, MAX_BODY_DEPTH, bare=bare)
    if within is False:
        raise json.JSONDecodeError(f"nested deeper than {MAX_BODY_DEPTH} levels", text, 0)
    if within is None:
        problem = json_problem(value, MAX_BODY_DEPTH)
        if problem is not None:
            raise json.JSONDecodeError(problem, text, 0)
    elif unpaired_surrogate(text):
        raise json.JSONDecodeError(
            "a string holds an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text", text, 0
        )
    if not isinstance(value, dict):
        # Every body a route reads is an object. The validator would take an array's first element
        # as the body, and drop the rest without a word.
        raise json.JSONDecodeError(f"{NOT_AN_OBJECT}, not {_kind(value)}", text, 0)
    return value


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # (1e400 parses as infinity, which no store keeps)
        raise ValueError(OUT_OF_RANGE)
    if number == 0.0 and _NONZERO_MANTISSA.match(text):
        # (1e-400 parses as 0.0: the body sent on would say 0, not what was written)
        raise ValueError("a number is too small for a float (below about 4.9e-324): write 0 for zero")
    return number


OUT_OF_RANGE = "a number is out of range (beyond about 1.8e308)"
# A number's digits before its exponent, one of them not zero.
_NONZERO_MANTISSA = re.compile(r"-?0*\.?0*[1-9]")


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict; ValueError (a 422 naming the key) if one key comes twice."""
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {json.dumps(key[:100])} appears more than once in one object")
            seen.add(key)
    return value


JSON_MEDIA_TYPE = "application/json"
# Charsets a JSON body may name: UTF-8, and ASCII, which is UTF-8 too.
UTF8_CHARSETS = frozenset({None, "utf-8", "utf8", "us-ascii", "ascii"})


def content_media_type(event: Mapping[str, Any]) -> str | None:
    """The Content-Type's media type, lower case, without parameters; None when there is none."""
    value = _header(event, "content-type")
    return value.split(";")[0].strip().lower() if value else None


def _charset(event: Mapping[str, Any]) -> str | None:
    """The Content-Type's charset parameter, lower case, unquoted; None when it names none."""
    for parameter in (_header(event, "content-type") or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def _encoded(event: Mapping[str, Any]) -> str | None:
    """The body's Content-Encoding, if it has one other than none (`identity`)."""
    encoding = (_header(event, "content-encoding") or "").strip()
    return encoding if event.get("body") and encoding and encoding.lower() != "identity" else None


def _header(event: Mapping[str, Any], wanted: str) -> str | None:
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == wanted and value:
            return str(value)
    return None


def _reads_a_body(event: Mapping[str, Any]) -> bool:
    """Whether the request goes to a route that reads its body: POST /jobs, /jobs/batch, /tasks,
    /schedules/preview, /jobs/{id}/pause (optional) and /dead-letters/redrive, PATCH /jobs/{id} and
    /tasks/{name}. (Others ignore a body, whatever its type.) The path may carry a
    stage (`/v1/jobs`)."""
    method = event.get("httpMethod") or (event.get("requestContext") or {}).get("http", {}).get("method")
    path = request_path(event)
    if str(method).upper() == "PATCH":
        return True
    return str(method).upper() == "POST" and path.endswith(
        ("/jobs", "/jobs/batch", "/schedules/preview", "/tasks", "/pause", "/dead-letters/redrive")
    )


# Routes whose body is optional, where a client may send one it does not mean (`curl -d` sends a
# form): a body that is not JSON is dropped, not refused.
OPTIONAL_BODY_ROUTES = ("/pause",)


def request_path(event: Mapping[str, Any]) -> str:
    return str(event.get("rawPath") or event.get("path") or "").rstrip("/")


def refuse_oversized(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """413 for a body longer than any its route could take (BODY_MAX_CHARS, a batch's
    BATCH_BODY_MAX_CHARS), before it is parsed: a refusal costs nothing whatever the body holds."""
    body = event.get("body")
    if not body:
        return None
    batch = request_path(event).endswith(BATCH_ROUTE)
    most = BATCH_BODY_MAX_CHARS if batch else BODY_MAX_CHARS
    if event.get("isBase64Encoded"):
        length, unit = len(body) * 3 // 4, "bytes"
    else:
        # (whitespace not counted: a job sent pretty-printed is the same job)
        length = len(body) - sum(body.count(c) for c in _WHITESPACE)
        unit = "characters besides whitespace"
    if length <= most:
        return None
    hint = (
        "send the jobs in smaller batches"
        if batch
        else "a job's parameters at most 262,144 bytes; up to 100 jobs in one request: POST /jobs/batch"
    )
    return error_event_response(
        413, f"the body is {length:,} {unit}; this route takes at most {most:,} ({hint})", "body"
    )


def refuse_non_json(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """415 for a body that is not JSON (docs/api.md: JSON in and out; the resolver would parse forms too),
    an empty one too, on a route that needs one. A body without a Content-Type is read as JSON."""
    if not _reads_a_body(event) or request_path(event).endswith(OPTIONAL_BODY_ROUTES):
        return None
    encoding = _encoded(event)
    if encoding is not None:
        # (read as it came, a compressed body would be refused as bad JSON, or worse taken as it is)
        return error_event_response(
            415,
            f"Content-Encoding {encoding} is not supported: send the body as it is",
            "header content-encoding",
        )
    media_type = content_media_type(event)
    if media_type == JSON_MEDIA_TYPE and (charset := _charset(event)) not in UTF8_CHARSETS:
        # (read as UTF-8 whatever it said, a UTF-16 body would be refused as bad JSON, or misread)
        return error_event_response(
            415, f"charset {charset} is not supported: send JSON in UTF-8", "header content-type"
        )
    if media_type in (None, JSON_MEDIA_TYPE):
        return None
    return error_event_response(
        415,
        f"Content-Type {media_type} is not supported: send JSON, with Content-Type: {JSON_MEDIA_TYPE}",
        "header content-type",
    )


def without_foreign_body(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """On a route whose body is optional, the event without a body that is not JSON, and without its
    Content-Type (the validator would answer 415 to it, in a shape of its own): dropped, not refused."""
    media_type = content_media_type(event)
    foreign = (
        media_type not in (None, JSON_MEDIA_TYPE)
        or _encoded(event) is not None
        or _charset(event) not in UTF8_CHARSETS
    )
    if not foreign or not request_path(event).endswith(OPTIONAL_BODY_ROUTES):
        return event

    def unspelt(headers: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-encoding")}

    fixed = {**event, "body": None, "isBase64Encoded": False, "headers": unspelt(event.get("headers") or {})}
    if event.get("multiValueHeaders"):
        fixed["multiValueHeaders"] = unspelt(event["multiValueHeaders"])
    return fixed


def with_json_media_type(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event with its Content-Type's media type in lower case, as the resolver compares it (media
    types ignore case: `Application/JSON` is JSON too)."""

    def lowered(value: str) -> str:
        media_type, sep, parameters = value.partition(";")
        return media_type.strip().lower() + sep + parameters

    def spelt(headers: Mapping[str, Any]) -> dict[str, Any]:
        return {
            name: (
                ([lowered(str(v)) for v in value] if isinstance(value, list) else lowered(str(value)))
                if name.lower() == "content-type" and value
                else value
            )
            for name, value in headers.items()
        }

    fixed = {**event, "headers": spelt(event.get("headers") or {})}
    if event.get("multiValueHeaders"):
        fixed["multiValueHeaders"] = spelt(event["multiValueHeaders"])
    return fixed
