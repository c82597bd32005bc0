"""Applying a compiled schema to an instance: the run and the budget its keywords' checks share (keywords.py).

A check reads only its own keywords and returns the first misfit it finds, so the message names
one place the user can fix. All the work is paid for in steps against the budget
(VALIDATION_BUDGET by default), each step a bounded amount of work: a subschema applied, a value
node compared (`const`, `enum`, `uniqueItems`, long strings by the kilobyte), a required name
looked up, characters read and automaton instructions visited by a pattern. A schema and
parameters that would take longer end in an error, not a hang.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from punctual.jobs.paramschema.messages import BudgetExceeded, Invalid, SchemaError, _path
from punctual.jobs.paramschema.regex import _Regex

# Steps of one validation. The weights below make a step 60 to 130 ns of CPU time on the machine
# they were measured on (docs/tasks.md): the whole budget, spent on the costliest steps, takes
# about 10 to 20 ms, whatever the schema and the parameters.
VALIDATION_BUDGET = 80_000
# What a subschema applied costs, a misfit's message, and `multipleOf`'s exact division (in steps).
_APPLY_STEPS = 4
_ERROR_STEPS = 32
_MULTIPLE_STEPS = 8
# A value node compared (`const`, `enum`), or hashed to find a repeat (`uniqueItems`).
_COMPARE_STEPS = 4
_UNIQUE_STEPS = 6
# Characters of a string compared (or hashed) per step.
_CHARS_PER_STEP = 1024


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
    # Subschema (by id) -> the checks its keywords call for, in order.
    checks: dict[int, tuple[Check, ...]] = field(default_factory=dict)
    subschemas: int = 0
    # Instructions of all its patterns, and their characters.
    pattern_program: int = 0
    pattern_chars: int = 0
    # Why a stored schema no longer compiles (see `refused`): nothing fits it.
    refused: str | None = None

    def first_error(self, instance: Any, budget: int = VALIDATION_BUDGET) -> Invalid | None:
        """Why `instance` does not fit, or None when it does."""
        if self.refused is not None:
            return Invalid("", f"the params_schema is no longer accepted ({self.refused}): change the task")
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


def refused(error: SchemaError) -> CompiledSchema:
    """A schema accepted when its task was defined that a limit tightened since refuses: nothing
    fits it, and the misfit says why."""
    return CompiledSchema(False, refused=str(error))


class _Run:
    def __init__(self, compiled: CompiledSchema, budget: int) -> None:
        self._compiled = compiled
        self._checks = compiled.checks
        self._left = budget

    def spend(self, steps: int = 1) -> None:
        self._left -= steps
        if self._left < 0:
            raise BudgetExceeded

    def validate(self, schema: Any, value: Any, path: list[str]) -> Invalid | None:
        self.spend(_APPLY_STEPS)
        if schema is True:
            return None
        if schema is False:
            return self.invalid(path, "no value is allowed here")
        for check in self._checks[id(schema)]:
            problem = check(self, schema, value, path)
            if problem is not None:
                return problem
        return None

    def invalid(self, path: list[str], message: str) -> Invalid:
        """A misfit found (paid for: its message is built even where anyOf or not discards it)."""
        self.spend(_ERROR_STEPS)
        return Invalid(_path(path), message)

    def regex(self, pattern: str) -> _Regex:
        return self._compiled.patterns[pattern]

    def ref(self, reference: str) -> Any:
        return self._compiled.targets[reference]

    @property
    def draft_07(self) -> bool:
        return self._compiled.draft_07


Check = Callable[[_Run, dict[str, Any], Any, list[str]], Invalid | None]
