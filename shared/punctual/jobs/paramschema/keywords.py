"""Each keyword's check: what a subschema's keywords ask of a value, the first misfit found, every
step paid for on the run's budget (validation.py).

The helpers compare JSON values the way JSON Schema does (1 equals 1.0, true is not 1) and charge
each node compared; `checks_for` picks, once per subschema when it is compiled, the checks its
keywords call for.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any

from punctual.jobs.paramschema.messages import Invalid, _clip, _show
from punctual.jobs.paramschema.validation import (
    _CHARS_PER_STEP,
    _COMPARE_STEPS,
    _ERROR_STEPS,
    _MULTIPLE_STEPS,
    _UNIQUE_STEPS,
    Check,
    _Run,
)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)  # (parsed JSON holds no subclasses but bool)


# The JSON types of parsed JSON values, by Python type (a float holding an integer is an integer).
_TYPE_NAMES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
}


def _type_of(value: Any) -> str:
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    return _type_of_subclass(value)


def _type_of_subclass(value: Any) -> str:
    for kind, name in _TYPE_NAMES.items():
        if isinstance(value, kind):
            return name
    return "number"


def _canonical(run: _Run, value: Any) -> Any:
    """A value as JSON Schema compares it (1 and 1.0 alike, true and 1 not), paid for by its size
    (each container by its length: the caller pays for the value itself)."""
    if isinstance(value, list):
        run.spend(_UNIQUE_STEPS * len(value))
        return ("a", tuple([_canonical(run, v) for v in value]))
    if isinstance(value, dict):
        run.spend(_UNIQUE_STEPS * len(value))
        return ("o", frozenset([(_key(run, k), _canonical(run, v)) for k, v in value.items()]))
    if isinstance(value, str):
        run.spend(len(value) // _CHARS_PER_STEP)
        return ("s", value)
    if isinstance(value, bool) or value is None:
        return ("b", value)
    return ("n", value)  # (Python compares and hashes an int and a float by their exact values)


def _key(run: _Run, name: str) -> str:
    run.spend(_COMPARE_STEPS + len(name) // _CHARS_PER_STEP)
    return name


def _equal(run: _Run, a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON Schema compares them, paid for node by node and
    stopping at the first difference (a kind or a length that differs is seen at once)."""
    run.spend(_COMPARE_STEPS)
    if isinstance(a, str):
        if not isinstance(b, str) or len(a) != len(b):
            return False
        run.spend(len(a) // _CHARS_PER_STEP)
        return a == b
    if isinstance(a, bool) or a is None:
        return a is b
    if isinstance(a, (int, float)):
        return _is_number(b) and a == b
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(_equal(run, x, y) for x, y in zip(a, b, strict=True))
    if not isinstance(b, dict) or len(a) != len(b):
        return False
    return all(_key(run, k) in b and _equal(run, v, b[k]) for k, v in a.items())


def _k_type(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    names = schema["type"]
    actual = _type_of(value)
    if actual == names or actual in names or (actual == "integer" and "number" in names):
        return None
    wanted = names if isinstance(names, str) else " or ".join(names)
    return run.invalid(path, f"expected {wanted}, got {actual} {_show(value)}")


def _k_enum(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if any(_equal(run, option, value) for option in schema["enum"]):
        return None
    options = ", ".join(_show(o) for o in schema["enum"][:10])
    return run.invalid(path, f"{_show(value)} is not one of {options}")


def _k_const(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if _equal(run, schema["const"], value):
        return None
    return run.invalid(path, f"must be {_show(schema['const'])}")


_BOUNDS = (
    ("minimum", operator.ge, "at least"),
    ("exclusiveMinimum", operator.gt, "greater than"),
    ("maximum", operator.le, "at most"),
    ("exclusiveMaximum", operator.lt, "less than"),
)


def _k_numbers(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not _is_number(value):
        return None
    for keyword, holds, words in _BOUNDS:
        if keyword in schema and not holds(value, schema[keyword]):
            return run.invalid(path, f"must be {words} {schema[keyword]}, not {_show(value)}")
    if "multipleOf" in schema:
        run.spend(_MULTIPLE_STEPS)
        quotient = _decimal(value) / _decimal(schema["multipleOf"])
        if quotient.denominator != 1:
            return run.invalid(path, f"must be a multiple of {schema['multipleOf']}")
    return None


def _decimal(number: int | float) -> Fraction:
    """A number as the decimal JSON wrote, not as its float's binary value: 0.1 is 1/10, so 3 is a
    multiple of it (a float's repr is the shortest text that reads back as it)."""
    return Fraction(repr(number)) if isinstance(number, float) else Fraction(number)


def _k_strings(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, str):
        return None
    length = len(value)
    if "minLength" in schema and length < schema["minLength"]:
        return run.invalid(path, f"must be at least {int(schema['minLength'])} characters long")
    if "maxLength" in schema and length > schema["maxLength"]:
        return run.invalid(path, f"must be at most {int(schema['maxLength'])} characters long")
    if "pattern" in schema and not run.regex(schema["pattern"]).search(value, run):
        return run.invalid(path, f"{_show(value)} does not match the pattern {_show(schema['pattern'])}")
    return None


def _k_arrays(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, list):
        return None
    if "minItems" in schema and len(value) < schema["minItems"]:
        return run.invalid(path, f"must have at least {int(schema['minItems'])} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return run.invalid(path, f"must have at most {int(schema['maxItems'])} items")
    if schema.get("uniqueItems"):
        seen: set[Any] = set()
        for i, item in enumerate(value):
            run.spend(_UNIQUE_STEPS)
            key = _canonical(run, item)
            if key in seen:
                return run.invalid([*path, f"[{i}]"], "repeats an earlier item (uniqueItems)")
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
        least = schema.get("minContains", 1)
        most = schema.get("maxContains")
        matches = 0
        for item in value:
            if run.validate(schema["contains"], item, path) is None:
                matches += 1
                if most is None and matches >= least:
                    break
                if most is not None and matches > most:
                    return run.invalid(path, f"must contain at most {int(most)} matching item(s)")
        if matches < least:
            return run.invalid(path, f"must contain at least {int(least)} matching item(s) (contains)")
    return None


def _k_objects(run: _Run, schema: dict[str, Any], value: Any, path: list[str]) -> Invalid | None:
    if not isinstance(value, dict):
        return None
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        return run.invalid(path, f"must have at least {int(schema['minProperties'])} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        return run.invalid(path, f"must have at most {int(schema['maxProperties'])} properties")
    required = schema.get("required", ())
    run.spend(len(required))
    for name in required:
        if name not in value:
            return run.invalid([*path, name], "is required")
    dependent = schema.get("dependentRequired") or {}
    run.spend(len(dependent))
    for name, names in dependent.items():
        if name in value:
            run.spend(len(names))
            for other in names:
                if other not in value:
                    return run.invalid([*path, other], f"is required when {_clip(name)} is given")
    properties = schema.get("properties") or {}
    patterns = schema.get("patternProperties") or {}
    extra = schema.get("additionalProperties")
    names_schema = schema.get("propertyNames")
    for name, item in value.items():
        run.spend()
        if names_schema is not None:
            problem = run.validate(names_schema, name, path)
            if problem is not None:
                return run.invalid([*path, name], _clip(f"the name is refused: {problem.message}"))
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
                return run.invalid([*path, name], "is not a parameter this task takes")
            problem = run.validate(extra, item, [*path, name])
            if problem is not None:
                return problem
    dependent_schemas = schema.get("dependentSchemas") or {}
    run.spend(len(dependent_schemas))
    for name, sub in dependent_schemas.items():
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
        first: Invalid | None = None
        for sub in schema["anyOf"]:
            problem = run.validate(sub, value, path)
            if problem is None:
                break
            first = first or problem
        else:
            assert first is not None  # (anyOf is never empty)
            run.spend(_ERROR_STEPS)
            return Invalid(first.path, _clip(f"fits none of anyOf: {first.message}"))
    if "oneOf" in schema:
        fits = 0
        for sub in schema["oneOf"]:
            if run.validate(sub, value, path) is None:
                fits += 1
                if fits > 1:
                    break
        if fits != 1:
            return run.invalid(
                path, f"must fit exactly one of oneOf, fits {'more than one' if fits else 'none'}"
            )
    if "not" in schema and run.validate(schema["not"], value, path) is None:
        return run.invalid(path, "fits the schema under not")
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


# Each check once, with the keywords it reads (a check reads all of its own), in the order they run.
_GROUPS: dict[Check, tuple[str, ...]] = {}
for _keyword, _check in _KEYWORDS.items():
    _GROUPS[_check] = (*_GROUPS.get(_check, ()), _keyword)


def checks_for(schema: dict[str, Any]) -> tuple[Check, ...]:
    """The checks a subschema's keywords call for (worked out once, when the schema is compiled)."""
    present = {_KEYWORDS[keyword] for keyword in schema if keyword in _KEYWORDS}
    return tuple(check for check in _GROUPS if check in present)
