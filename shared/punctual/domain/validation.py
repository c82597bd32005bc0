"""Validation shared by the API's input models."""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any, get_args

from pydantic import AfterValidator, BeforeValidator, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema


class _JsonNumber:
    """A numeric field of a request body takes a JSON number and nothing else: pydantic would read
    `true` as 1, `"60"` as 60 and, for an integer field, `2.0` as 2. A client that sends those has
    a bug (or means something else) that coercion would hide, so the field is refused, by name.

    An integer field (its type `int`, or `int | None`) also refuses a number written with a fraction
    part or an exponent, whatever its value (`2.0` as much as `2.5`): a client that computes a count
    as a float will one day send a fraction, and should hear so now. A float field takes an integer."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        check = _json_integer if _is_integer_type(source) else _json_number
        return core_schema.no_info_before_validator_function(check, handler(source))


def _is_integer_type(source: Any) -> bool:
    members = get_args(source) or (source,)
    return int in members and float not in members


def _json_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    if isinstance(value, str):
        raise ValueError("expected a number, not a string: write the number without quotes")
    if isinstance(value, float) and value == 0:
        return 0.0  # (-0.0 is 0, and is shown back so)
    return value


def _json_integer(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected an integer, not a boolean")
    if isinstance(value, str):
        raise ValueError("expected an integer, not a string: write the number without quotes")
    if isinstance(value, float):
        # (-0.0 is shown as 0: "send -0" would read as a sign to keep)
        shown = f"{value + 0.0:.0f}" if value.is_integer() and abs(value) < 1e16 else "a whole number"
        raise ValueError(
            f"expected an integer, not {value!r}: send {shown}, without a decimal point or exponent"
        )
    return value


# For a numeric field of a request body: `Annotated[int, JSON_NUMBER]`, `Annotated[float, JSON_NUMBER]`.
JSON_NUMBER = _JsonNumber()

# More digits than any integer a query parameter takes: refused before it is parsed.
_MAX_QUERY_DIGITS = 9


def _query_integer(value: Any) -> Any:
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            raise ValueError(
                f"expected an integer written in digits 0-9, not {value[:40]!r} (no sign, point, "
                "exponent, underscore or space)"
            )
        if len(value) > _MAX_QUERY_DIGITS:
            raise ValueError(f"{value[:20]}... is out of range")
    return value


# For an integer query parameter (`?limit=`): digits only. pydantic would read `1.0`, `+5`, ` 5` and
# `5_0` as integers; a client that sends those computes the value wrongly, and should hear so.
QUERY_INTEGER = BeforeValidator(_query_integer)


class _NotNull:
    """An optional field of a request body whose absence means something (its default; in a PATCH,
    no change) but whose null the contract gives no meaning: null is refused, not read as absent,
    and the JSON Schema shows no null. (Left out, the field keeps its default of None.)"""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(_not_null, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        shown = handler(schema)
        branches = [branch for branch in shown.get("anyOf", ()) if branch != {"type": "null"}]
        if len(branches) == 1:
            del shown["anyOf"]
            shown.update(branches[0])
        elif branches:
            shown["anyOf"] = branches
        return shown


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("null is not a value of this field: leave the field out instead")
    return value


# For such a field: `Annotated[str | None, NOT_NULL] = None`.
NOT_NULL = _NotNull()


# Unicode's control characters (category Cc), found by one regular expression search: a loop over
# the characters in Python took 0.7 s of CPU to refuse a 10 MB name, before its length was checked.
# And Unicode's line and paragraph separators, which editors, JavaScript and some terminals break a
# line at.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _plain_text(value: Any) -> Any:
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found is not None:
            what = "control character" if found.group() < "\u2028" else "line separator"
            raise ValueError(
                f"{what} U+{ord(found.group()):04X} at position {found.start()}: plain text only"
            )
    return value


def _not_blank(value: Any) -> Any:
    if isinstance(value, str) and value and not value.strip():
        raise ValueError("is only spaces: give a name with something to read, or none")
    return value


# For a text field shown to people (a job's name): no control characters (NUL, line breaks, tabs,
# escape sequences), which logs, terminals and the CLI's tables would act on or mangle.
PLAIN_TEXT = AfterValidator(_plain_text)
# For a name, which lists and tables show to tell one job from another: not spaces alone.
NOT_BLANK = AfterValidator(_not_blank)


def refuse_constant(name: str) -> Any:
    """For `json.loads(..., parse_constant=)`: NaN, Infinity and -Infinity are not JSON."""
    raise ValueError(f"{name} is not a JSON value")


# What may make a string hold an unpaired surrogate: JSON's escape of one (\ud800-\udfff; paired, as
# json.dumps writes an emoji, it is fine) or one in the text itself. Only the strings holding one are
# read again to tell.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")
# A JSON string, escapes and all (unrolled: linear, and quick on long strings).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# What is left of JSON text once its strings are gone, but its brackets.
_NOT_BRACKETS = str.maketrans("", "", ",:0123456789.eE+-truefalsn \t\n\r")
# An empty array or object: the innermost pairs, taken away in one pass (a pair they leave empty
# waits for the next).
_INNERMOST = re.compile(r"\[\]|\{\}")
# How many passes take the innermost pairs away before the rest is counted bracket by bracket (a
# pass costs the text's length: a few take most bodies' brackets all).
_PASSES = 3
# A bracket's step in depth, by byte: [ and { one level in, ] and } one out.
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def without_strings(text: str) -> str:
    """JSON text with its strings taken away: what is left is brackets, numbers and literals."""
    return _JSON_STRING.sub("", text)


# An integer as long as the largest a float holds (1.8e308: 309 digits), or longer.
_LONG_INTEGER = re.compile(r"(?<![\d.eE+-])-?\d{309,}(?![\d.eE])")


def integer_beyond_a_float(bare: str) -> bool:
    """Whether JSON text without its strings (`without_strings`) holds an integer no float holds:
    json.loads keeps any integer whole, up to the interpreter's digits limit."""
    for found in _LONG_INTEGER.finditer(bare):
        try:
            float(int(found.group()))
        except OverflowError:
            return True
    return False


def nested_within(text: str, most: int, *, bare: str | None = None) -> bool | None:
    """Whether JSON text (parsed already: it is valid) nests arrays and objects at most `most` deep,
    read from its brackets alone: a few passes take away the innermost pairs (each pass one level),
    and what is left is counted bracket by bracket. None if it cannot tell. `bare`: the text
    without its strings, when the caller has it already."""
    brackets = (without_strings(text) if bare is None else bare).translate(_NOT_BRACKETS)
    for _ in range(_PASSES):
        if not brackets:
            return True
        inner = _INNERMOST.sub("", brackets)
        if inner == brackets:
            return None
        brackets = inner
    if not brackets:
        return True
    if not brackets.isascii():
        return None
    deepest = max(itertools.accumulate(map(_STEP.__getitem__, brackets.encode())))
    return _PASSES + deepest <= most


def unpaired_surrogate(text: str) -> bool:
    """Whether a string of JSON text holds an unpaired surrogate: each string that may (`_SURROGATE`)
    read as JSON and written as UTF-8."""
    if not _SURROGATE.search(text):
        return False
    for match in _JSON_STRING.finditer(text):
        string = match.group()
        if _SURROGATE.search(string):
            try:
                json.loads(string).encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def json_problem(value: Any, max_depth: int) -> str | None:
    """What makes a parsed JSON value unfit to store and read back, or None: arrays and objects nested
    deeper than `max_depth` (readers stop at some depth: pydantic's JSON parser near 200), a number
    no float holds (`1e400` parses as infinity, stored as null), or a string holding an unpaired
    surrogate (JSON's `\\ud800` escape allows one; UTF-8 cannot encode it)."""
    # (read from its JSON text first, written in C: a walk of every value costs a fifth of a second
    # on 256 KiB of tiny ones; walked for only where the text cannot tell)
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and nested_within(text, max_depth) and not unpaired_surrogate(text):
        return None
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is out of range (beyond about 1.8e308, or NaN/Infinity)"
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text"
    return None


MAX_TAGS = 50
_TAG_KEY = re.compile(r"[A-Za-z0-9 _.\-/=+@]{1,128}")


def _tags(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if len(value) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
    for key, tag_value in value.items():
        if not _TAG_KEY.fullmatch(key) or key != key.strip():
            raise ValueError(
                f"tag key {key[:130]!r}: 1 to 128 letters, digits, spaces or _ . - / = + @ (no colon: "
                "`?tag=key:value` filters by tag), not starting or ending with a space"
            )
        if not isinstance(tag_value, str) or len(tag_value) > 256:
            raise ValueError(f"tag {key!r}: its value is text of at most 256 characters")
        _plain_text(tag_value)
    return value


# For a map of tags (jobs and named tasks): AWS's limits, keys without a colon.
TAGS = AfterValidator(_tags)


def parse_tag_filter(text: str) -> tuple[str, str | None]:
    """`key:value` (that value) or `key` (any value), as `?tag=` takes it; ValueError otherwise (a
    value no tag can hold, too: a control character)."""
    key, sep, value = text.partition(":")
    if not key or key != key.strip():
        raise ValueError("tag: write key:value (or key alone, for any value)")
    if len(key) > 128:
        raise ValueError("tag: a tag's key has at most 128 characters")
    if not _TAG_KEY.fullmatch(key):
        raise ValueError("tag: a tag's key holds letters, digits, spaces and _ . - / = + @ only")
    if len(value) > 256:
        raise ValueError("tag: a tag's value has at most 256 characters")
    try:
        _plain_text(value)
    except ValueError as exc:
        raise ValueError(f"tag: {exc}") from None
    return key, (value if sep else None)


def has_tag(tags: dict[str, str], wanted: tuple[str, str | None]) -> bool:
    key, value = wanted
    return key in tags and (value is None or tags[key] == value)
