"""Named tasks' JSON Schema: what it refuses, what it validates, and that nothing it runs is unbounded."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from punctual.jobs.named_tasks import merge
from punctual.jobs.paramschema.checking import compile_schema
from punctual.jobs.paramschema.messages import SchemaError
from punctual.jobs.paramschema.regex import _Regex
from punctual.tasks import templating


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "strin"}, "type"),
        ({"required": "to"}, "required"),
        ({"properties": {"a": {"minLength": -1}}}, "properties.a.minLength"),
        ({"properties": {"a": {"$ref": "https://example.com/a.json"}}}, "properties.a.$ref"),
        ({"$ref": "#/$defs/missing"}, "$ref"),
        ({"properties": {"body": {"$ref": "#/properties"}}}, "properties.body.$ref"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
                "$ref": "#/$defs/a",
            },
            "$ref",
        ),
        ({"pattern": "(a)\\1"}, "pattern"),
        ({"pattern": "(?=a)"}, "pattern"),
        ({"pattern": "(?i)abc"}, "pattern"),
        ({"pattern": "a{1,5000}"}, "pattern"),
        ({"requird": ["a"]}, "requird"),
        ({"unevaluatedProperties": False}, "unevaluatedProperties"),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "$schema"),
        ({"exclusiveMinimum": True}, "exclusiveMinimum"),
        ({"items": [{"type": "string"}]}, "items"),
        ("string", ""),
    ],
)
def test_a_schema_that_is_not_json_schema_or_not_safe_is_refused_saying_where(
    schema: Any, where: str
) -> None:
    with pytest.raises(SchemaError) as refused:
        compile_schema(schema)
    assert refused.value.where == where


def test_size_and_depth_are_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["not"] = {}
        node = node["not"]
    with pytest.raises(SchemaError, match="nested deeper"):
        compile_schema(deep)
    with pytest.raises(SchemaError, match="bytes"):
        compile_schema({"description": "x" * 70_000})
    with pytest.raises(SchemaError, match="subschemas"):
        compile_schema({"properties": {f"p{i}": {} for i in range(2500)}})


SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["to"],
    "properties": {
        "to": {"type": "string", "format": "email", "pattern": "^[^@]+@[^@]+$"},
        "cc": {"type": "array", "items": {"$ref": "#/$defs/address"}, "uniqueItems": True, "maxItems": 3},
        "priority": {"enum": [1, 2, 3]},
        "retries": {"type": "integer", "minimum": 0, "exclusiveMaximum": 5, "multipleOf": 1},
        "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]},
    },
    "patternProperties": {"^x-": {"type": "string"}},
    "additionalProperties": False,
    "dependentRequired": {"cc": ["priority"]},
    "$defs": {"address": {"type": "string", "minLength": 3}},
}


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"to": "a@b"}, None),
        ({"to": "a@b", "cc": ["c@d"], "priority": 2, "retries": 4, "kind": "b", "x-trace": "t"}, None),
        ({}, "to"),
        ({"to": 5}, "to"),
        ({"to": "nope"}, "to"),
        ({"to": "a@b", "cc": ["c@d", "c@d"], "priority": 1}, "cc[1]"),
        ({"to": "a@b", "cc": ["ab"], "priority": 1}, "cc[0]"),
        ({"to": "a@b", "cc": ["c@d"]}, "priority"),
        ({"to": "a@b", "priority": True}, "priority"),
        ({"to": "a@b", "priority": 1.0}, None),
        ({"to": "a@b", "retries": 5}, "retries"),
        ({"to": "a@b", "retries": 2.5}, "retries"),
        ({"to": "a@b", "kind": "c"}, "kind"),
        ({"to": "a@b", "x-trace": 1}, "x-trace"),
        ({"to": "a@b", "other": 1}, "other"),
    ],
)
def test_parameters_are_validated_and_the_first_problem_named(
    params: dict[str, Any], path: str | None
) -> None:
    problem = compile_schema(SCHEMA).first_error(params)
    assert (None if problem is None else problem.path) == path, problem


def test_validation_is_bounded_by_its_budget() -> None:
    schema = compile_schema({"items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}})
    problem = schema.first_error(list(range(1000)), budget=500)
    assert problem is not None and "steps" in problem.message


def test_patterns_match_in_linear_time_where_backtracking_engines_do_not() -> None:
    # `(a+)+$` against "aaaa...!" takes Python's re exponential time; here each character costs
    # at most the automaton's size
    text = "a" * 20_000 + "!"
    started = time.monotonic()
    assert not _Regex("(a+)+$").search(text)
    assert not _Regex("^(a|aa)*$").search(text)
    assert time.monotonic() - started < 5


_PIECES = st.sampled_from(
    [
        "a",
        "b",
        "ab",
        "[ab]",
        "[^a]",
        ".",
        "\\d",
        "(a|b)",
        "(ab|a)",
        "(x?)",
        "\\w",
        "[a-c1]",
        "[^\\d!]",
    ]
)
_ANCHORS = st.sampled_from(["\\b", "\\B"])  # (no quantifier applies to one)
_QUANTIFIERS = st.sampled_from(["", "*", "+", "?", "{2}", "{1,3}"])


@given(
    st.lists(st.tuples(_PIECES, _QUANTIFIERS) | st.tuples(_ANCHORS, st.just("")), min_size=1, max_size=5),
    st.booleans(),
    st.booleans(),
    st.text(alphabet="ab1x! ", max_size=12),
)
def test_patterns_agree_with_python_re_where_both_apply(
    parts: list[tuple[str, str]], start: bool, end: bool, text: str
) -> None:
    pattern = ("^" if start else "") + "".join(p + q for p, q in parts) + ("$" if end else "")
    assume(text or "\\B" not in pattern)  # (ECMA-262's \B holds in an empty text; Python's does not)
    assert _Regex(pattern).search(text) == bool(re.search(pattern, text)), pattern


def test_defaults_merge_object_by_object_and_the_job_wins() -> None:
    defaults = {"url": "https://a", "headers": {"A": "1", "B": "2"}, "body": {"x": [1]}}
    given_params = {"headers": {"B": "3"}, "body": {"x": [2], "y": None}}
    assert merge(defaults, given_params) == {
        "url": "https://a",
        "headers": {"A": "1", "B": "3"},
        "body": {"x": [2], "y": None},
    }


def test_references_are_checked_and_substituted_with_their_types() -> None:
    values = {
        "execution.id": "e1",
        "execution.scheduled_at": "2026-12-01T09:00:00.000Z",
        "execution.attempt": 2,
        "job.id": "j1",
        "job.name": "a b/c",
    }
    given_params = {
        "url": "https://x/{{ job.name | urlencode }}?at={{execution.scheduled_at}}",
        "attempt": "{{ execution.attempt }}",
        "text": "try {{ execution.attempt }} of {{ job.id }}",
        "braces": '{{ "{{" }} literal',
        "list": ["{{ execution.id }}", 3],
    }
    assert templating.render(given_params, values) == {
        "url": "https://x/a%20b%2Fc?at=2026-12-01T09:00:00.000Z",
        "attempt": 2,
        "text": "try 2 of j1",
        "braces": "{{ literal",
        "list": ["e1", 3],
    }
    for bad, path in [
        ({"a": {"b": "{{ execution.when }}"}}, "a.b"),
        ({"a": ["{{ job.name | upper }}"]}, "a[0]"),
    ]:
        with pytest.raises(templating.TemplateError) as refused:
            templating.check(bad)
        assert refused.value.path == path
    with pytest.raises(templating.TemplateError, match="more than"):
        templating.check({"a": "{{ job.id }}" * 101})


@pytest.mark.parametrize(
    ("divisor", "value", "fits"),
    [
        (0.1, 3, True),
        (0.1, 0.3, True),
        (0.1, 2.2, True),
        (0.1, 10**300, True),
        (0.1, 0.35, False),
        (0.01, 0.07, True),
        (0.01, 0.075, False),
        (0.5, 1.5, True),
        (3, 9.0, True),
        (3, 10, False),
    ],
)
def test_multiple_of_reads_a_decimal_divisor_as_written(divisor: float, value: float, fits: bool) -> None:
    # 3 is a multiple of 0.1, though 0.1's binary float is not exactly a tenth
    problem = compile_schema({"properties": {"p": {"multipleOf": divisor}}}).first_error({"p": value})
    assert (problem is None) is fits, problem
