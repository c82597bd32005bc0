"""Applying a compiled schema to an instance: each keyword's check, and the budget they share.

A check reads only its own keywords and returns the first misfit it finds, so the message names
one place the user can fix. Every step is spent against the budget (VALIDATION_BUDGET by default):
a schema and parameters that would take too long end in an error, not a hang.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from punctual.paramschema.messages import BudgetExceeded, Invalid, SchemaError, _path, _show
from punctual.paramschema.regex import _Regex

# Steps of one validation (keywords applied, and automaton states visited per character).
VALIDATION_BUDGET = 500_000


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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
