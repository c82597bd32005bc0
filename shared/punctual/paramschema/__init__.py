"""JSON Schema (2020-12) for a named task's parameters: checked when a task is defined, applied to
every job that uses it, with every computation bounded.

Punctual validates schemas itself rather than through a JSON Schema library because a schema comes
from a user and runs in the API and the worker: the libraries resolve remote `$ref`s over the
network, follow `$ref` loops until the stack runs out, and hand `pattern` to a backtracking regex
engine (`(a+)+$` takes exponential time). Here:

- a schema is refused (SchemaError, naming where) unless it is 2020-12 (or draft-07) made of the
  keywords below, within MAX_SCHEMA_BYTES, MAX_SUBSCHEMAS and the parameters' nesting depth;
- `$ref` is local only (`#`, `#/$defs/...`): resolved when the schema is compiled, never fetched; a
  loop of `$ref`s and in-place applicators (`allOf`, `not`, `if`, ...) that never descends into the
  instance is refused, so validation always moves on;
- `pattern` and `patternProperties` run on a Thompson automaton (`_Regex`): time linear in the text,
  ECMA-262 syntax without backreferences or lookaround;
- validation counts its steps and stops at VALIDATION_BUDGET (an error, not a hang).

Supported: type, enum, const, multipleOf, maximum, exclusiveMaximum, minimum, exclusiveMinimum,
maxLength, minLength, pattern, items, prefixItems, maxItems, minItems, uniqueItems, contains,
minContains, maxContains, maxProperties, minProperties, required, properties, patternProperties,
additionalProperties, propertyNames, dependentRequired, dependentSchemas, allOf, anyOf, oneOf, not,
if, then, else, $ref, $defs (and draft-07's definitions, additionalItems and array form of items);
annotations (title, description, default, examples, deprecated, readOnly, writeOnly, $comment,
format, content*, and `x-` extensions) are accepted and not asserted. `format` is an annotation, as
2020-12 specifies by default.
"""

from __future__ import annotations

import json
import math
import re
import re._constants as sre  # the standard library's regex parser, used only to read a pattern
import re._parser as sre_parse
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from urllib.parse import unquote

from punctual.validation import json_problem

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_SUBSCHEMAS = 2000
MAX_PATTERN_CHARS = 1000
# Instructions of one compiled pattern (a counted repeat is expanded): its cost per character.
MAX_PATTERN_PROGRAM = 2000
# Steps of one validation (keywords applied, and automaton states visited per character).
VALIDATION_BUDGET = 500_000

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


class SchemaError(ValueError):
    """The schema is refused: `where` is a path into it (`properties.to.type`), empty for the root."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Invalid:
    """Why an instance does not fit: `path` into it (`body.to`, `items[2]`), empty for the whole."""

    path: str
    message: str


class BudgetExceeded(Exception):
    pass


def compile_schema(schema: Any) -> CompiledSchema:
    """Check a schema and prepare it for validation; SchemaError says what is wrong, and where."""
    problem = json_problem(schema, MAX_SCHEMA_DEPTH)
    if problem is not None:
        raise SchemaError("", problem)
    size = len(json.dumps(schema).encode())
    if size > MAX_SCHEMA_BYTES:
        raise SchemaError("", f"{size:,} bytes as JSON; at most {MAX_SCHEMA_BYTES:,}")
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
    _Checker(compiled).check(schema, "", top=True)
    compiled.refuse_loops()
    return compiled


@dataclass
class CompiledSchema:
    root: Any
    draft_07: bool = False
    # Compiled patterns, by pattern text; the schemas `$ref`s point at, by reference.
    patterns: dict[str, _Regex] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    # Subschema (by id) -> the subschemas it applies in place, for the loop check.
    in_place: dict[int, list[Any]] = field(default_factory=dict)
    nodes: dict[int, Any] = field(default_factory=dict)
    subschemas: int = 0

    def first_error(self, instance: Any, budget: int = VALIDATION_BUDGET) -> Invalid | None:
        """Why `instance` does not fit, or None when it does."""
        run = _Run(self, budget)
        try:
            return run.validate(self.root, instance, [])
        except BudgetExceeded:
            return Invalid(
                "", f"validation took more than {budget:,} steps: simplify the schema or the parameters"
            )
        except RecursionError:
            return Invalid("", "the schema nests too deeply to validate")

    def refuse_loops(self) -> None:
        """A cycle of in-place applications ($ref to itself, allOf of a $ref back) never ends."""
        state: dict[int, int] = {}  # 1 on the path, 2 done

        def visit(start: Any) -> None:
            stack: list[tuple[Any, int]] = [(start, 0)]
            state[id(start)] = 1
            while stack:
                node, index = stack.pop()
                children = self.in_place.get(id(node), [])
                if index < len(children):
                    stack.append((node, index + 1))
                    child = children[index]
                    mark = state.get(id(child))
                    if mark == 1:
                        raise SchemaError(
                            "$ref",
                            "a loop of $ref (or allOf/anyOf/oneOf/not/if) that never looks inside "
                            "the value: it would never end",
                        )
                    if mark is None:
                        state[id(child)] = 1
                        stack.append((child, 0))
                else:
                    state[id(node)] = 2

        for node_id, node in self.nodes.items():
            if node_id not in state:
                visit(node)


def _is_count(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0 and float(value).is_integer()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Checker:
    def __init__(self, compiled: CompiledSchema) -> None:
        self._compiled = compiled

    def check(self, schema: Any, where: str, *, top: bool = False) -> None:
        compiled = self._compiled
        compiled.subschemas += 1
        if compiled.subschemas > MAX_SUBSCHEMAS:
            raise SchemaError(where, f"more than {MAX_SUBSCHEMAS} subschemas")
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
            if keyword in _ANNOTATIONS or keyword.startswith("x-"):
                self._annotation(keyword, value, at)
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
                        self.check(item, f"{at}[{i}]")
                elif isinstance(value, list):
                    raise SchemaError(at, "a schema in 2020-12 (for a tuple, write prefixItems)")
                else:
                    self.check(value, at)
            elif keyword in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    raise SchemaError(at, "must be a non-empty array of schemas")
                for i, item in enumerate(value):
                    self.check(item, f"{at}[{i}]")
                if keyword != "prefixItems":
                    in_place.extend(value)
            elif keyword in _SCHEMA_MAPS:
                if not isinstance(value, dict):
                    raise SchemaError(at, "must be an object of schemas")
                for name, item in value.items():
                    if keyword == "patternProperties":
                        self._pattern(name, f"{at}.{name}")
                    self.check(item, f"{at}.{name}")
                if keyword == "dependentSchemas":
                    in_place.extend(value.values())
            elif keyword in _SCHEMA_VALUES:
                self.check(value, at)
                if keyword in _IN_PLACE:
                    in_place.append(value)
            elif keyword == "$ref":
                in_place.append(self._ref(value, at))
            else:
                raise SchemaError(at, "not a JSON Schema keyword Punctual knows (see docs/tasks.md)")
        if in_place:
            compiled.in_place[id(schema)] = [s for s in in_place if isinstance(s, dict)]
            compiled.nodes[id(schema)] = schema

    def _annotation(self, keyword: str, value: Any, at: str) -> None:
        if keyword in ("title", "description", "$comment", "format", "contentEncoding", "contentMediaType"):
            if not isinstance(value, str):
                raise SchemaError(at, "must be a string")
        elif keyword in ("deprecated", "readOnly", "writeOnly") and not isinstance(value, bool):
            raise SchemaError(at, "must be true or false")
        elif keyword == "examples" and not isinstance(value, list):
            raise SchemaError(at, "must be an array")
        elif keyword == "contentSchema":
            self.check(value, at)

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
        patterns = self._compiled.patterns
        if pattern not in patterns:
            try:
                patterns[pattern] = _Regex(pattern)
            except ValueError as exc:
                raise SchemaError(at, str(exc)) from None

    def _ref(self, value: Any, at: str) -> Any:
        if not isinstance(value, str):
            raise SchemaError(at, "must be a string")
        if not value.startswith("#"):
            raise SchemaError(at, "only local references (#, #/$defs/NAME) are allowed: nothing is fetched")
        target = _pointer(self._compiled.root, value[1:], at)
        if not isinstance(target, dict | bool):
            raise SchemaError(at, f"{value} is not a schema")
        self._compiled.targets[value] = target
        return target


def _pointer(root: Any, pointer: str, at: str) -> Any:
    if pointer == "":
        return root
    if not pointer.startswith("/"):
        raise SchemaError(at, "a local reference is # followed by a JSON pointer (#/$defs/NAME)")
    node = root
    for raw in pointer[1:].split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaError(at, f"#{pointer} does not exist in this schema")
    return node


# ------------------------------------------------------------------ validation
def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return "number"


def _has_type(value: Any, name: str) -> bool:
    actual = _type_of(value)
    return actual == name or (name == "number" and actual == "integer")


def _canonical(value: Any) -> Any:
    """A value as JSON Schema compares it: 1 and 1.0 alike, true and 1 not."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", Fraction(value))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))


def _path(parts: list[str]) -> str:
    text = ""
    for part in parts:
        text += part if part.startswith("[") else (f".{part}" if text else part)
    return text


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Run:
    def __init__(self, compiled: CompiledSchema, budget: int) -> None:
        self._compiled = compiled
        self._left = budget

    def spend(self, steps: int = 1) -> None:
        self._left -= steps
        if self._left < 0:
            raise BudgetExceeded

    def validate(self, schema: Any, value: Any, path: list[str]) -> Invalid | None:
        self.spend()
        if schema is True:
            return None
        if schema is False:
            return Invalid(_path(path), "no value is allowed here")
        for check, keywords in _GROUPS.items():
            if any(keyword in schema for keyword in keywords):
                problem = check(self, schema, value, path)
                if problem is not None:
                    return problem
        return None

    def regex(self, pattern: str) -> _Regex:
        return self._compiled.patterns[pattern]

    def ref(self, reference: str) -> Any:
        return self._compiled.targets[reference]

    @property
    def draft_07(self) -> bool:
        return self._compiled.draft_07


Check = Callable[[_Run, dict[str, Any], Any, list[str]], Invalid | None]


def _k_type(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if any(_has_type(value, name) for name in names):
        return None
    wanted = " or ".join(names)
    return Invalid(_path(path), f"expected {wanted}, got {_type_of(value)} {_show(value)}")


def _k_enum(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    run.spend(len(schema["enum"]))
    mine = _canonical(value)
    if any(_canonical(option) == mine for option in schema["enum"]):
        return None
    options = ", ".join(_show(o) for o in schema["enum"][:10])
    return Invalid(_path(path), f"{_show(value)} is not one of {options}")


def _k_const(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if _canonical(value) == _canonical(schema["const"]):
        return None
    return Invalid(_path(path), f"must be {_show(schema['const'])}")


def _k_numbers(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not _is_number(value):
        return None
    checks = (
        ("minimum", lambda b: value >= b, "at least"),
        ("exclusiveMinimum", lambda b: value > b, "greater than"),
        ("maximum", lambda b: value <= b, "at most"),
        ("exclusiveMaximum", lambda b: value < b, "less than"),
    )
    for keyword, holds, words in checks:
        if keyword in schema and not holds(schema[keyword]):
            return Invalid(_path(path), f"must be {words} {schema[keyword]}, not {value}")
    if "multipleOf" in schema:
        quotient = Fraction(value) / Fraction(schema["multipleOf"])
        if quotient.denominator != 1:
            return Invalid(_path(path), f"must be a multiple of {schema['multipleOf']}")
    return None


def _k_strings(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, str):
        return None
    length = len(value)
    if "minLength" in schema and length < schema["minLength"]:
        return Invalid(_path(path), f"must be at least {int(schema['minLength'])} characters long")
    if "maxLength" in schema and length > schema["maxLength"]:
        return Invalid(_path(path), f"must be at most {int(schema['maxLength'])} characters long")
    if "pattern" in schema and not run.regex(schema["pattern"]).search(value, run):
        return Invalid(_path(path), f"{_show(value)} does not match the pattern {schema['pattern']!r}")
    return None


def _k_arrays(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, list):
        return None
    if "minItems" in schema and len(value) < schema["minItems"]:
        return Invalid(_path(path), f"must have at least {int(schema['minItems'])} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return Invalid(_path(path), f"must have at most {int(schema['maxItems'])} items")
    if schema.get("uniqueItems"):
        run.spend(len(value))
        seen: set[Any] = set()
        for i, item in enumerate(value):
            key = _canonical(item)
            if key in seen:
                return Invalid(_path([*path, f"[{i}]"]), "repeats an earlier item (uniqueItems)")
            seen.add(key)
    prefix = schema.get("prefixItems")
    rest = schema.get("items")
    if run.draft_07 and isinstance(rest, list):
        prefix, rest = rest, schema.get("additionalItems")
    for i, item in enumerate(value):
        if prefix is not None and i < len(prefix):
            sub = prefix[i]
        elif rest is not None:
            sub = rest
        else:
            break
        problem = run.validate(sub, item, [*path, f"[{i}]"])
        if problem is not None:
            return problem
    if "contains" in schema:
        matches = sum(run.validate(schema["contains"], item, path) is None for item in value)
        least = schema.get("minContains", 1)
        if matches < least:
            return Invalid(_path(path), f"must contain at least {int(least)} matching item(s) (contains)")
        if "maxContains" in schema and matches > schema["maxContains"]:
            return Invalid(_path(path), f"must contain at most {int(schema['maxContains'])} matching item(s)")
    return None


def _k_objects(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, dict):
        return None
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        return Invalid(_path(path), f"must have at least {int(schema['minProperties'])} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        return Invalid(_path(path), f"must have at most {int(schema['maxProperties'])} properties")
    for name in schema.get("required", ()):
        if name not in value:
            return Invalid(_path([*path, name]), "is required")
    for name, names in (schema.get("dependentRequired") or {}).items():
        if name in value:
            for other in names:
                if other not in value:
                    return Invalid(_path([*path, other]), f"is required when {name} is given")
    properties = schema.get("properties") or {}
    patterns = schema.get("patternProperties") or {}
    extra = schema.get("additionalProperties")
    names_schema = schema.get("propertyNames")
    for name, item in value.items():
        run.spend()
        if names_schema is not None:
            problem = run.validate(names_schema, name, path)
            if problem is not None:
                return Invalid(_path([*path, name]), f"the name is refused: {problem.message}")
        matched = False
        if name in properties:
            matched = True
            problem = run.validate(properties[name], item, [*path, name])
            if problem is not None:
                return problem
        for pattern, sub in patterns.items():
            if run.regex(pattern).search(name, run):
                matched = True
                problem = run.validate(sub, item, [*path, name])
                if problem is not None:
                    return problem
        if not matched and extra is not None:
            if extra is False:
                return Invalid(_path([*path, name]), "is not a parameter this task takes")
            problem = run.validate(extra, item, [*path, name])
            if problem is not None:
                return problem
    for name, sub in (schema.get("dependentSchemas") or {}).items():
        if name in value:
            problem = run.validate(sub, value, path)
            if problem is not None:
                return problem
    return None


def _k_logic(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    for sub in schema.get("allOf", ()):
        problem = run.validate(sub, value, path)
        if problem is not None:
            return problem
    if "anyOf" in schema:
        problems = [run.validate(sub, value, path) for sub in schema["anyOf"]]
        if all(p is not None for p in problems):
            first = next(p for p in problems if p is not None)
            return Invalid(first.path, f"fits none of anyOf: {first.message}")
    if "oneOf" in schema:
        fits = [run.validate(sub, value, path) is None for sub in schema["oneOf"]]
        if sum(fits) != 1:
            return Invalid(_path(path), f"must fit exactly one of oneOf, fits {sum(fits)}")
    if "not" in schema and run.validate(schema["not"], value, path) is None:
        return Invalid(_path(path), "fits the schema under not")
    if "if" in schema:
        branch = "then" if run.validate(schema["if"], value, path) is None else "else"
        if branch in schema:
            return run.validate(schema[branch], value, path)
    return None


def _k_ref(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    return run.validate(run.ref(schema["$ref"]), value, path)


_KEYWORDS: dict[str, Check] = {
    "type": _k_type,
    "enum": _k_enum,
    "const": _k_const,
    **dict.fromkeys(("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf"), _k_numbers),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), _k_strings),
    **dict.fromkeys(("minItems", "maxItems", "uniqueItems", "items", "prefixItems", "contains"), _k_arrays),
    **dict.fromkeys(
        (
            "minProperties",
            "maxProperties",
            "required",
            "dependentRequired",
            "properties",
            "patternProperties",
            "additionalProperties",
            "propertyNames",
            "dependentSchemas",
        ),
        _k_objects,
    ),
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "not", "if"), _k_logic),
    "$ref": _k_ref,
}


# Each check once, with the keywords it reads (a check reads all of its own).
_GROUPS: dict[Check, tuple[str, ...]] = {}
for _keyword, _check in _KEYWORDS.items():
    _GROUPS[_check] = (*_GROUPS.get(_check, ()), _keyword)


# ------------------------------------------------------------------ patterns
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(" \t\n\r\f\v\u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    sre.CATEGORY_DIGIT: lambda c: "0" <= c <= "9",
    sre.CATEGORY_NOT_DIGIT: lambda c: not "0" <= c <= "9",
    sre.CATEGORY_WORD: lambda c: c in _WORD,
    sre.CATEGORY_NOT_WORD: lambda c: c not in _WORD,
    sre.CATEGORY_SPACE: lambda c: c in _SPACE,
    sre.CATEGORY_NOT_SPACE: lambda c: c not in _SPACE,
}
# Instructions: ("char", predicate) | ("split", a, b) | ("jmp", a) | ("assert", kind) | ("match",)


class _Regex:
    """A pattern compiled to a Thompson automaton: `search` visits each state at most once per
    character, so its time is linear in the text whatever the pattern (which backtracking engines,
    Python's `re` among them, do not promise)."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"a pattern of at most {MAX_PATTERN_CHARS} characters")
        try:
            parsed = sre_parse.parse(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if parsed.state.flags & ~(re.UNICODE | re.ASCII):
            raise ValueError("inline flags such as (?i) are not ECMA-262 (JSON Schema) regular expressions")
        self.program: list[tuple[Any, ...]] = []
        self._emit_sequence(list(parsed))
        self.program.append(("match",))

    # -- compiling
    def _add(self, instruction: tuple[Any, ...]) -> int:
        if len(self.program) >= MAX_PATTERN_PROGRAM:
            raise ValueError("the pattern is too complex (its counted repeats expand too far)")
        self.program.append(instruction)
        return len(self.program) - 1

    def _emit_sequence(self, items: list[tuple[Any, Any]]) -> None:
        for op, av in items:
            self._emit(op, av)

    def _emit(self, op: Any, av: Any) -> None:
        if op is sre.LITERAL:
            self._add(("char", _equals(chr(av))))
        elif op is sre.NOT_LITERAL:
            self._add(("char", _differs(chr(av))))
        elif op is sre.ANY:
            self._add(("char", lambda c: c not in "\n\r\u2028\u2029"))
        elif op is sre.IN:
            self._add(("char", _class(av)))
        elif op is sre.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise ValueError(
                    "inline flags such as (?i) are not ECMA-262 (JSON Schema) regular expressions"
                )
            self._emit_sequence(list(sub))
        elif op is sre.BRANCH:
            self._branch([list(alternative) for alternative in av[1]])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, sub = av
            self._repeat(list(sub), low, None if high is sre.MAXREPEAT else high)
        elif op is sre.AT:
            kinds = {
                sre.AT_BEGINNING: "begin",
                sre.AT_BEGINNING_STRING: "begin",
                sre.AT_END: "end",
                sre.AT_END_STRING: "end",
                sre.AT_BOUNDARY: "boundary",
                sre.AT_NON_BOUNDARY: "not_boundary",
            }
            if av not in kinds:
                raise ValueError(f"unsupported anchor {av}")
            self._add(("assert", kinds[av]))
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            raise ValueError("backreferences are not supported (they cannot be matched in linear time)")
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            raise ValueError("lookahead and lookbehind are not supported")
        else:
            raise ValueError(f"unsupported regular expression construct ({str(op).lower()})")

    def _branch(self, alternatives: list[list[tuple[Any, Any]]]) -> None:
        jumps: list[int] = []
        for i, alternative in enumerate(alternatives):
            if i < len(alternatives) - 1:
                split = self._add(("split", 0, 0))
                self._emit_sequence(alternative)
                jumps.append(self._add(("jmp", 0)))
                self.program[split] = ("split", split + 1, len(self.program))
            else:
                self._emit_sequence(alternative)
        for jump in jumps:
            self.program[jump] = ("jmp", len(self.program))

    def _repeat(self, sub: list[tuple[Any, Any]], low: int, high: int | None) -> None:
        for _ in range(low):
            self._emit_sequence(sub)
        if high is None:
            split = self._add(("split", 0, 0))
            self._emit_sequence(sub)
            self._add(("jmp", split))
            self.program[split] = ("split", split + 1, len(self.program))
            return
        splits = []
        for _ in range(high - low):
            splits.append(self._add(("split", 0, 0)))
            self.program[splits[-1]] = ("split", splits[-1] + 1, 0)
            self._emit_sequence(sub)
        for split in splits:
            self.program[split] = ("split", split + 1, len(self.program))

    # -- matching
    def search(self, text: str, run: _Run | None = None) -> bool:
        """Whether the pattern matches anywhere in `text` (JSON Schema's `pattern` is not anchored)."""
        program = self.program
        current: list[int] = []
        self._add_thread(current, set(), 0, text, 0)
        for position in range(len(text) + 1):
            if run is not None:
                run.spend(len(current) + 1)
            if any(program[pc][0] == "match" for pc in current):
                return True
            if position == len(text):
                return False
            char = text[position]
            following: list[int] = []
            seen: set[int] = set()
            for pc in current:
                instruction = program[pc]
                if instruction[0] == "char" and instruction[1](char):
                    self._add_thread(following, seen, pc + 1, text, position + 1)
            self._add_thread(following, seen, 0, text, position + 1)  # a match may start anywhere
            current = following
        return False

    def _add_thread(self, out: list[int], seen: set[int], start: int, text: str, position: int) -> None:
        """Add the states reachable from `start` without reading a character (splits, jumps, and
        anchors that hold at `position`), each once."""
        program = self.program
        stack = [start]
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            instruction = program[pc]
            kind = instruction[0]
            if kind == "jmp":
                stack.append(instruction[1])
            elif kind == "split":
                stack.extend((instruction[2], instruction[1]))
            elif kind == "assert":
                if _holds(instruction[1], text, position):
                    stack.append(pc + 1)
            else:
                out.append(pc)


def _holds(kind: str, text: str, position: int) -> bool:
    if kind == "begin":
        return position == 0
    if kind == "end":
        return position == len(text)
    before = position > 0 and text[position - 1] in _WORD
    after = position < len(text) and text[position] in _WORD
    return (before != after) if kind == "boundary" else (before == after)


def _equals(wanted: str) -> Callable[[str], bool]:
    return lambda c: c == wanted


def _differs(unwanted: str) -> Callable[[str], bool]:
    return lambda c: c != unwanted


def _between(low: str, high: str) -> Callable[[str], bool]:
    return lambda c: low <= c <= high


def _class(items: list[tuple[Any, Any]]) -> Callable[[str], bool]:
    negate = False
    tests: list[Callable[[str], bool]] = []
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            tests.append(_equals(chr(av)))
        elif op is sre.NOT_LITERAL:
            tests.append(_differs(chr(av)))
        elif op is sre.RANGE:
            tests.append(_between(chr(av[0]), chr(av[1])))
        elif op is sre.CATEGORY:
            if av not in _CATEGORIES:
                raise ValueError(f"unsupported character class {av}")
            tests.append(_CATEGORIES[av])
        else:
            raise ValueError(f"unsupported character class item ({str(op).lower()})")
    if negate:
        return lambda c: not any(test(c) for test in tests)
    return lambda c: any(test(c) for test in tests)
