"""JSON Schema (2020-12) for a named task's parameters: checked when a task is defined, applied to
every job that uses it, with every computation bounded.

Punctual validates schemas itself rather than through a JSON Schema library because a schema comes
from a user and runs in the API and the worker, and the libraries bound neither its time nor what
they reach: `jsonschema` hands `pattern` to Python's backtracking `re` (`(a+)+$` takes exponential
time), has no budget (31 subschemas, each applying the next twice, make 2**30 applications), and
needs `rpds-py`, a native wheel the Lambda bundle cannot carry (docs/tasks.md has the measurement).
Here:

- a schema is refused (SchemaError, naming where) unless it is 2020-12 (or draft-07) made of the
  keywords below, within MAX_SCHEMA_BYTES, MAX_SUBSCHEMAS, the parameters' nesting depth, and the
  pattern limits (MAX_PATTERN_CHARS and MAX_PATTERN_PROGRAM each; MAX_SCHEMA_PATTERNS,
  MAX_SCHEMA_PATTERN_CHARS and MAX_SCHEMA_PATTERN_PROGRAM together);
- `$ref` is local only (`#`, `#/$defs/...`) and names a subschema: resolved when the schema is
  compiled, never fetched; a loop of `$ref`s and in-place applicators (`allOf`, `not`, `if`, ...)
  that never descends into the instance is refused, so validation always moves on;
- `pattern` and `patternProperties` run on an automaton (`_Regex`): time linear in the text,
  ECMA-262 syntax without backreferences or lookaround;
- validation pays for all its work in steps of bounded cost (a subschema applied, a value node
  compared, characters read, automaton instructions visited) and stops at VALIDATION_BUDGET (an
  error, not a hang): whatever the schema and the parameters, it takes milliseconds.

Supported: type, enum, const, multipleOf, maximum, exclusiveMaximum, minimum, exclusiveMinimum,
maxLength, minLength, pattern, items, prefixItems, maxItems, minItems, uniqueItems, contains,
minContains, maxContains, maxProperties, minProperties, required, properties, patternProperties,
additionalProperties, propertyNames, dependentRequired, dependentSchemas, allOf, anyOf, oneOf, not,
if, then, else, $ref, $defs (and draft-07's definitions, additionalItems and array form of items);
annotations (title, description, default, examples, deprecated, readOnly, writeOnly, $comment,
format, content*, and `x-` extensions) are accepted and not asserted. `format` is an annotation, as
2020-12 specifies by default.

The package: `checking` refuses what is outside that subset and compiles the rest; `validation`
applies a compiled schema to an instance, keyword by keyword, within the budget; `regex` is the
linear-time pattern engine both use; `messages` holds the errors and how they name a place.
"""

from punctual.jobs.paramschema.checking import (
    DRAFT_07,
    DRAFT_2020_12,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_PATTERN_CHARS,
    MAX_SCHEMA_PATTERN_PROGRAM,
    MAX_SCHEMA_PATTERNS,
    MAX_SUBSCHEMAS,
    TYPES,
    compile_schema,
)
from punctual.jobs.paramschema.messages import BudgetExceeded, Invalid, SchemaError
from punctual.jobs.paramschema.regex import MAX_PATTERN_CHARS, MAX_PATTERN_PROGRAM, _Regex
from punctual.jobs.paramschema.validation import VALIDATION_BUDGET, Check, CompiledSchema, refused

__all__ = [
    "DRAFT_07",
    "DRAFT_2020_12",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_PROGRAM",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_PATTERNS",
    "MAX_SCHEMA_PATTERN_CHARS",
    "MAX_SCHEMA_PATTERN_PROGRAM",
    "MAX_SUBSCHEMAS",
    "TYPES",
    "VALIDATION_BUDGET",
    "BudgetExceeded",
    "Check",
    "CompiledSchema",
    "Invalid",
    "SchemaError",
    "_Regex",  # the pattern engine alone, which the tests drive directly
    "compile_schema",
    "refused",
]
