"""Checking a schema when a task is defined: the subset of JSON Schema Punctual reads, and its limits.

Anything outside the subset, over the size limits, or a `$ref` that is not local is refused with a
SchemaError naming where; what passes is compiled (patterns built, `$ref`s resolved) so that
validating a job's parameters never meets a surprise.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import unquote

from punctual.domain.validation import json_problem
from punctual.jobs.paramschema.keywords import _is_number, checks_for
from punctual.jobs.paramschema.messages import SchemaError
from punctual.jobs.paramschema.regex import _Regex
from punctual.jobs.paramschema.validation import CompiledSchema

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_SUBSCHEMAS = 2000
# All of a schema's distinct patterns together: how many, their characters (reading a pattern
# costs a few microseconds a character) and their compiled instructions: what compiling costs.
MAX_SCHEMA_PATTERNS = 200
MAX_SCHEMA_PATTERN_CHARS = 4000
MAX_SCHEMA_PATTERN_PROGRAM = 8000

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema"

TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "$schema",
    }
)
_UNSUPPORTED = {
    "$id": "schemas have no base URI here: refer to parts with a local $ref (#/$defs/NAME)",
    "$anchor": "refer to parts with a JSON pointer ($ref: #/$defs/NAME)",
    "$dynamicRef": "dynamic references are not supported",
    "$dynamicAnchor": "dynamic references are not supported",
    "$recursiveRef": "dynamic references are not supported",
    "$recursiveAnchor": "dynamic references are not supported",
    "$vocabulary": "meta-schemas are not supported",
    "unevaluatedProperties": "not supported: use additionalProperties",
    "unevaluatedItems": "not supported: use items",
    "dependencies": "draft-07's dependencies: write dependentRequired or dependentSchemas",
}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_VALUES = (
    "additionalProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "contentSchema",
    "additionalItems",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
# Applicators that apply a subschema to the same instance (no descent): a loop of these never ends.
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "$ref")
_COUNTS = (
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
    "minContains",
    "maxContains",
)
_NUMBERS = ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum")


def compile_schema(schema: Any) -> CompiledSchema:
    """Check a schema and prepare it for validation; SchemaError says what is wrong, and where."""
    # The size first: measuring it is quick, and bounds the walk that checks the rest.
    try:
        size = len(json.dumps(schema).encode())
    except RecursionError:
        size = 0  # (nested past what json can write: json_problem says so)
    if size > MAX_SCHEMA_BYTES:
        raise SchemaError("", f"{size:,} bytes as JSON; at most {MAX_SCHEMA_BYTES:,}")
    problem = json_problem(schema, MAX_SCHEMA_DEPTH)
    if problem is not None:
        raise SchemaError("", problem)
    if not isinstance(schema, dict | bool):
        raise SchemaError("", "a schema is a JSON object (or true or false)")
    compiled = CompiledSchema(schema)
    draft = schema.get("$schema") if isinstance(schema, dict) else None
    if draft is not None:
        if not isinstance(draft, str) or draft.rstrip("#") not in (DRAFT_2020_12, DRAFT_07):
            raise SchemaError(
                "$schema", f"only JSON Schema 2020-12 ({DRAFT_2020_12}) or draft-07 is supported"
            )
        compiled.draft_07 = draft.rstrip("#") == DRAFT_07
    checker = _Checker(compiled)
    checker.check(schema, "", (), top=True)
    checker.resolve_refs()
    compiled.refuse_loops()
    return compiled


def _is_count(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0 and float(value).is_integer()


class _Checker:
    def __init__(self, compiled: CompiledSchema) -> None:
        self._compiled = compiled
        # Where the subschemas are (JSON pointers, as tuples of their parts): what a $ref may name.
        self._places: set[tuple[str, ...]] = set()
        # The $refs met: the subschema holding one, its value, and where it is written.
        self._refs: list[tuple[dict[str, Any], Any, str]] = []

    def check(self, schema: Any, where: str, pointer: tuple[str, ...], *, top: bool = False) -> None:
        compiled = self._compiled
        compiled.subschemas += 1
        if compiled.subschemas > MAX_SUBSCHEMAS:
            raise SchemaError(where, f"more than {MAX_SUBSCHEMAS} subschemas")
        self._places.add(pointer)
        if isinstance(schema, bool):
            return
        if not isinstance(schema, dict):
            raise SchemaError(where, "a schema is a JSON object (or true or false)")
        in_place: list[Any] = []
        for keyword, value in schema.items():
            at = f"{where}.{keyword}" if where else keyword
            if keyword == "$schema" and not top:
                raise SchemaError(at, "$schema belongs at the top of the schema only")
            if keyword in _UNSUPPORTED:
                raise SchemaError(at, _UNSUPPORTED[keyword])
            here = (*pointer, keyword)
            if keyword in _ANNOTATIONS or keyword.startswith("x-"):
                self._annotation(keyword, value, at, here)
            elif keyword == "type":
                self._type(value, at)
            elif keyword in ("enum", "examples"):
                if not isinstance(value, list):
                    raise SchemaError(at, "must be an array")
            elif keyword == "const":
                pass
            elif keyword == "multipleOf":
                if not _is_number(value) or value <= 0:
                    raise SchemaError(at, "must be a number greater than 0")
            elif keyword in _NUMBERS:
                if not _is_number(value):
                    hint = (
                        " (2020-12 writes the bound itself here, not a boolean)"
                        if isinstance(value, bool)
                        else ""
                    )
                    raise SchemaError(at, "must be a number" + hint)
            elif keyword in _COUNTS:
                if not _is_count(value):
                    raise SchemaError(at, "must be a non-negative integer")
            elif keyword == "pattern":
                if not isinstance(value, str):
                    raise SchemaError(at, "must be a string (a regular expression)")
                self._pattern(value, at)
            elif keyword == "uniqueItems":
                if not isinstance(value, bool):
                    raise SchemaError(at, "must be true or false")
            elif keyword == "required":
                self._names(value, at)
            elif keyword == "dependentRequired":
                if not isinstance(value, dict):
                    raise SchemaError(at, "must be an object of property names to arrays of names")
                for name, names in value.items():
                    self._names(names, f"{at}.{name}")
            elif keyword == "items":
                if isinstance(value, list) and compiled.draft_07:
                    for i, item in enumerate(value):
                        self.check(item, f"{at}[{i}]", (*here, str(i)))
                elif isinstance(value, list):
                    raise SchemaError(at, "a schema in 2020-12 (for a tuple, write prefixItems)")
                else:
                    self.check(value, at, here)
            elif keyword in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    raise SchemaError(at, "must be a non-empty array of schemas")
                for i, item in enumerate(value):
                    self.check(item, f"{at}[{i}]", (*here, str(i)))
                if keyword != "prefixItems":
                    in_place.extend(value)
            elif keyword in _SCHEMA_MAPS:
                if not isinstance(value, dict):
                    raise SchemaError(at, "must be an object of schemas")
                for name, item in value.items():
                    if keyword == "patternProperties":
                        self._pattern(name, f"{at}.{name}")
                    self.check(item, f"{at}.{name}", (*here, name))
                if keyword == "dependentSchemas":
                    in_place.extend(value.values())
            elif keyword in _SCHEMA_VALUES:
                self.check(value, at, here)
                if keyword in _IN_PLACE:
                    in_place.append(value)
            elif keyword == "$ref":
                if not isinstance(value, str):
                    raise SchemaError(at, "must be a string")
                if not value.startswith("#"):
                    raise SchemaError(
                        at, "only local references (#, #/$defs/NAME) are allowed: nothing is fetched"
                    )
                self._refs.append((schema, value, at))
            else:
                raise SchemaError(at, "not a JSON Schema keyword Punctual knows (see docs/tasks.md)")
        compiled.checks[id(schema)] = checks_for(schema)
        if in_place:
            compiled.in_place[id(schema)] = [s for s in in_place if isinstance(s, dict)]
            compiled.nodes[id(schema)] = schema

    def resolve_refs(self) -> None:
        """Point each $ref at its subschema, once the whole schema has been read (a reference may
        name a place further on). A reference to a place that holds no schema is refused: the
        value there (`#/properties`, a map of names to schemas) would be read as a schema."""
        compiled = self._compiled
        for schema, reference, at in self._refs:
            parts = _pointer_parts(reference[1:], at)
            if parts not in self._places:
                _pointer(compiled.root, parts, at)  # (SchemaError when there is nothing there)
                raise SchemaError(at, f"{reference} is not a schema (a $ref names a subschema)")
            target = _pointer(compiled.root, parts, at)
            compiled.targets[reference] = target
            if isinstance(target, dict):
                compiled.in_place.setdefault(id(schema), []).append(target)
                compiled.nodes[id(schema)] = schema

    def _annotation(self, keyword: str, value: Any, at: str, here: tuple[str, ...]) -> None:
        if keyword in ("title", "description", "$comment", "format", "contentEncoding", "contentMediaType"):
            if not isinstance(value, str):
                raise SchemaError(at, "must be a string")
        elif keyword in ("deprecated", "readOnly", "writeOnly") and not isinstance(value, bool):
            raise SchemaError(at, "must be true or false")
        elif keyword == "examples" and not isinstance(value, list):
            raise SchemaError(at, "must be an array")
        elif keyword == "contentSchema":
            self.check(value, at, here)

    def _type(self, value: Any, at: str) -> None:
        names = value if isinstance(value, list) else [value]
        if not names or any(not isinstance(n, str) or n not in TYPES for n in names):
            raise SchemaError(at, f"must be one of {', '.join(sorted(TYPES))}, or an array of them")
        if len(set(names)) != len(names):
            raise SchemaError(at, "lists a type twice")

    def _names(self, value: Any, at: str) -> None:
        if not isinstance(value, list) or any(not isinstance(n, str) for n in value):
            raise SchemaError(at, "must be an array of property names")
        if len(set(value)) != len(value):
            raise SchemaError(at, "lists a name twice")

    def _pattern(self, pattern: str, at: str) -> None:
        compiled = self._compiled
        if pattern in compiled.patterns:
            return
        if len(compiled.patterns) >= MAX_SCHEMA_PATTERNS:
            raise SchemaError(at, f"more than {MAX_SCHEMA_PATTERNS} distinct patterns")
        compiled.pattern_chars += len(pattern)
        if compiled.pattern_chars > MAX_SCHEMA_PATTERN_CHARS:
            raise SchemaError(
                at, f"the schema's patterns have more than {MAX_SCHEMA_PATTERN_CHARS:,} characters in all"
            )
        try:
            regex = _Regex(pattern)
        except ValueError as exc:
            raise SchemaError(at, str(exc)) from None
        compiled.pattern_program += len(regex.program)
        if compiled.pattern_program > MAX_SCHEMA_PATTERN_PROGRAM:
            raise SchemaError(
                at,
                f"the schema's patterns compile to more than {MAX_SCHEMA_PATTERN_PROGRAM:,} instructions "
                "in all (counted repeats expand)",
            )
        compiled.patterns[pattern] = regex


def _pointer_parts(pointer: str, at: str) -> tuple[str, ...]:
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise SchemaError(at, "a local reference is # followed by a JSON pointer (#/$defs/NAME)")
    return tuple(unquote(raw).replace("~1", "/").replace("~0", "~") for raw in pointer[1:].split("/"))


def _pointer(root: Any, parts: tuple[str, ...], at: str) -> Any:
    node = root
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            pointer = "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
            raise SchemaError(at, f"#{pointer} does not exist in this schema")
    return node
