"""Named tasks' parameter schemas cost a bounded time whatever a user sends: the worst cases found
(a `const` per branch against a 240 KB value, a counted repeat of a 900-character class) and others
built to cost the most within the limits each end, 422 or success, within 50 ms of CPU time; and a
job's params are checked once per task version by the worker, not at each execution."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from punctual.domain.errors import InvalidRequest
from punctual.domain.models import Job, JobStatus, TaskRef, TaskSpec
from punctual.domain.named_tasks import NamedTask
from punctual.domain.policies import RetryPolicy
from punctual.domain.schedules import NowSchedule
from punctual.jobs import paramschema
from punctual.jobs.named_tasks import check_params
from punctual.jobs.paramschema.checking import compile_schema
from punctual.jobs.paramschema.messages import SchemaError
from punctual.jobs.task_resolver import TaskResolver
from punctual.platform.clock import ManualClock
from punctual.tasks import TaskPolicy

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
BOUND_SECONDS = 0.050

# The issue's inputs: 100 `const` branches against `{"x": [0, 0, ... 120,000 zeros]}`, and a
# negated class of 900 distinct characters repeated 1,000 times against 1,200 characters.
CONST_BRANCHES = {"type": "object", "anyOf": [{"const": i} for i in range(100)]}
ZEROS = {"x": [0] * 120_000}
CLASS_900 = "".join(chr(0x100 + i) for i in range(900))
PATTERN_900 = {"type": "object", "properties": {"s": {"pattern": "[^" + CLASS_900 + "]{1000}"}}}


def _chain_of_refs(depth: int) -> dict[str, Any]:
    """Each level applies the next one twice: 2**depth applications from a few subschemas."""
    defs: dict[str, Any] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}, {"type": "string"}]}
        for i in range(depth)
    }
    defs[f"a{depth}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


# (schema, params, whether they fit): the worst found, and others built to cost the most
WORST_CASES: dict[str, tuple[Any, Any, bool]] = {
    "100 const branches, 120,000 zeros": (CONST_BRANCHES, ZEROS, False),
    "[^900 characters]{1000}, 1,200 others": (PATTERN_900, {"s": "a" * 1200}, False),
    "[^900 characters]{1000}, 1,200 distinct": (
        PATTERN_900,
        {"s": "".join(chr(0x4E00 + i) for i in range(1200))},
        False,
    ),
    "[^900 characters]{1000}, 1,200 of the class": (PATTERN_900, {"s": (CLASS_900 * 2)[:1200]}, False),
    "const lists equal but their last item": (
        {"anyOf": [{"const": [0] * 6000 + [i]} for i in range(3)]},
        [0] * 6000 + [9],
        False,
    ),
    "a 64 KiB schema: an enum of 21,000 options": ({"enum": [0] * 21_000}, -1, False),
    "a 64 KiB schema: 1,999 subschemas": (
        {"properties": {str(i): {"minimum": i} for i in range(1999)}},
        {},
        True,
    ),
    "enum of long strings": ({"enum": ["x" * 20_000 + str(i) for i in range(3)]}, "x" * 20_000 + "2", True),
    "uniqueItems over 120,000 items": ({"uniqueItems": True}, [[i] for i in range(120_000)], False),
    "anyOf under items, 120,000 items": (
        {"items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        list(range(120_000)),
        False,
    ),
    "$ref applied 2**30 times": (_chain_of_refs(30), 1.5, False),
    "pattern over 200,000 characters": (
        {"pattern": "^[^@ ]+@[^@ ]+$"},
        "x" * 100_000 + "@" + "y" * 100_000,
        False,
    ),
    "a new transition at each of 60,000 characters": (
        {"pattern": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"},
        "".join(chr(0x4E00 + i) for i in range(60_000)),
        False,
    ),
    "20,000 names against patternProperties": (
        {"patternProperties": {"^a.*b$": {}, "c{1,50}d": {}}},
        {"a" * 50 + str(i): 1 for i in range(20_000)},
        False,
    ),
    "a long name in const objects": (
        {"anyOf": [{"const": {"k" * 30_000: i}} for i in range(2)]},
        {"k" * 30_000: 5},
        False,
    ),
    "multipleOf on 4,000-digit integers": (
        {"items": {"multipleOf": 1e-300}},
        [10**3999 + i for i in range(1000)],
        True,  # (every integer is a multiple of 10**-300: all of them are checked)
    ),
}


def _cpu_seconds(work: Callable[[], object]) -> float:
    """The least CPU time of three runs (the machine is shared: CPU time, not wall time)."""
    spent = []
    for _ in range(3):
        started = time.thread_time()
        work()
        spent.append(time.thread_time() - started)
    return min(spent)


@pytest.mark.parametrize("case", list(WORST_CASES))
def test_any_schema_and_params_within_the_limits_validate_within_50_ms(case: str) -> None:
    schema, params, fits = WORST_CASES[case]
    outcome: list[paramschema.Invalid | None] = []

    # When the schema is compiled (as at each job creation) and the params checked against it
    def compile_and_validate() -> None:
        outcome.append(compile_schema(schema).first_error(params))

    spent = _cpu_seconds(compile_and_validate)
    # Then it ends, fitting or with a misfit, within the bound
    assert spent <= BOUND_SECONDS, f"{case}: {spent * 1000:.1f} ms"
    assert (outcome[-1] is None) == fits, outcome[-1]


def _named_task(schema: Any, version: int = 1) -> NamedTask:
    return NamedTask(
        owner="alice",
        name="dos",
        type="noop",
        params={},
        params_schema=schema,
        retry=None,
        timeout_seconds=None,
        created_at=NOW,
        updated_at=NOW,
        version=version,
    )


@pytest.mark.parametrize(("schema", "params"), [(CONST_BRANCHES, ZEROS), (PATTERN_900, {"s": "a" * 1200})])
def test_the_issues_inputs_are_refused_with_422_naming_the_task(schema: Any, params: Any) -> None:
    # Given a task defined with the schema, as POST /tasks accepts it
    task = _named_task(schema)
    # When a job gives the params (as POST /jobs checks them; the time is bounded above)
    with pytest.raises(InvalidRequest) as refused:
        check_params(task, compile_schema(schema), params, TaskPolicy())
    # Then it is refused (422), naming the task's schema and its version
    assert refused.value.field == "params"
    assert "task dos's params_schema, version 1" in str(refused.value)


def test_a_const_compares_only_as_far_as_the_first_difference() -> None:
    # Given 100 const branches against a 120,000-item value, none of which can be equal to it
    schema = compile_schema(CONST_BRANCHES)
    # When it is validated with a budget that a whole-value comparison per branch would exceed
    problem = schema.first_error(ZEROS, budget=5_000)
    # Then each branch is refused on the value's kind: no budget error, and a misfit named
    assert problem is not None and "anyOf" in problem.message and "steps" not in problem.message


def test_comparing_equal_values_is_paid_for_by_their_size() -> None:
    # Given a const of 5,000 items and a value equal to it
    schema = compile_schema({"const": list(range(5_000))})
    # Then comparing them costs a step per item: within a budget of that size it fits, beyond not
    assert schema.first_error(list(range(5_000)), budget=50_000) is None
    problem = schema.first_error(list(range(5_000)), budget=5_000)
    assert problem is not None and "steps" in problem.message


def test_a_pattern_pays_for_each_instruction_it_visits() -> None:
    # Given a pattern of 1,000 instructions alive at once
    schema = compile_schema(PATTERN_900)
    # When a string needs them all at each of 1,200 characters
    problem = schema.first_error({"s": "a" * 1200})
    # Then the budget ends it, saying so
    assert problem is not None and "steps" in problem.message


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {f"p{i}": {"pattern": f"^p{i}$"} for i in range(201)}}, "distinct patterns"),
        ({"properties": {f"p{i}": {"pattern": "a" * 999 + str(i)} for i in range(5)}}, "characters in all"),
        (
            {"properties": {f"p{i}": {"pattern": f"[a-z]{{1990}}{i}"} for i in range(5)}},
            "instructions in all",
        ),
        ({"pattern": "(a{1000}){1000}"}, "too complex"),
        ({"pattern": "a{1,100000}"}, "too complex"),
        # (counts past what Python's parser holds at all)
        ({"pattern": "a{4294967295}"}, "too complex"),
        ({"patternProperties": {"[a-z]{1,99999999999999}": {}}}, "too complex"),
        ({"propertyNames": {"pattern": "(?:a){99999999999999,}"}}, "too complex"),
    ],
)
def test_the_patterns_of_a_schema_are_bounded_together(schema: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        compile_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"body": {"$ref": "#/properties"}}},
        {"properties": {"a": {"const": {"type": "string"}}, "b": {"$ref": "#/properties/a/const"}}},
        {"properties": {"a": {"enum": [{}]}, "b": {"$ref": "#/properties/a/enum/0"}}},
        {"required": ["a"], "properties": {"b": {"$ref": "#/required"}}},
    ],
)
def test_a_ref_to_a_place_that_holds_no_schema_is_refused(schema: Any) -> None:
    with pytest.raises(SchemaError, match="is not a schema") as refused:
        compile_schema(schema)
    assert refused.value.where.endswith("$ref")


def test_a_ref_to_a_subschema_anywhere_is_accepted() -> None:
    compiled = compile_schema(
        {
            "properties": {
                "to": {"type": "string"},
                "cc": {"$ref": "#/properties/to"},
                "n": {"$ref": "#/items/anyOf/0"},
            },
            "items": {"anyOf": [{"minimum": 1}]},
        }
    )
    assert compiled.first_error({"to": "a", "cc": 1}) is not None
    assert compiled.first_error({"to": "a", "n": 0}) is not None
    assert compiled.first_error({"to": "a", "cc": "b", "n": 2}) is None


# ------------------------------------------------------------------------------------- the worker
class OneTask:
    def __init__(self, task: NamedTask) -> None:
        self.task = task

    def get(self, owner: str, name: str, *, consistent: bool = True) -> NamedTask | None:
        return self.task if (owner, name) == (self.task.owner, self.task.name) else None


def _job(params: dict[str, Any], updated_at: datetime = NOW) -> Job:
    return Job(
        id="job_1",
        owner="alice",
        name="j",
        status=JobStatus.ACTIVE,
        task=TaskRef(name="dos", params=params),
        schedule=NowSchedule(type="now"),
        retry=RetryPolicy(),
        timeout_seconds=60,
        created_at=NOW,
        updated_at=updated_at,
        inherits=frozenset({"retry", "timeout_seconds"}),
    )


def test_the_worker_checks_a_jobs_params_once_per_task_version_not_at_each_execution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[Any] = []
    original = paramschema.CompiledSchema.first_error

    def counting(self: paramschema.CompiledSchema, instance: Any, budget: int = 80_000) -> Any:
        checked.append(instance)
        return original(self, instance, budget)

    monkeypatch.setattr(paramschema.CompiledSchema, "first_error", counting)
    # Given a task PATCHed to the costly schema, and a job whose params do not fit it
    store = OneTask(_named_task(CONST_BRANCHES, version=2))
    clock = ManualClock(NOW)
    resolver = TaskResolver(store, clock, ttl_seconds=10)  # type: ignore[arg-type]
    job = _job({"x": [0] * 1000})
    # When three executions of the job run, the task's copy read again in between
    runs = []
    for _ in range(3):
        runs.append(resolver.effective(job))
        clock.advance(11)
    # Then each fails saying why, and the params were checked once
    for resolved in runs:
        assert resolved is not None and isinstance(resolved.task, TaskSpec)
        assert "version 2" in resolved.task.params["error"]
    assert len(checked) == 1
    # and again once the task changes, or the job's params do
    store.task = _named_task(CONST_BRANCHES, version=3)
    resolver.effective(job)
    resolver.effective(job)
    assert len(checked) == 2
    changed = _job({"x": 7}, updated_at=NOW + timedelta(seconds=1))
    resolved = resolver.effective(changed)
    resolver.effective(changed)
    assert len(checked) == 3
    assert checked[-1] == {"x": 7}
    assert resolved is not None and isinstance(resolved.task, TaskSpec) and "error" in resolved.task.params


def test_a_stored_schema_a_tightened_limit_refuses_fails_its_jobs_saying_why() -> None:
    # Given a task stored with a schema accepted before the $ref check (its $ref names no schema)
    task = _named_task({"properties": {"body": {"$ref": "#/properties"}}}, version=4)
    resolver = TaskResolver(OneTask(task), ManualClock(NOW))  # type: ignore[arg-type]
    # When one of its jobs runs
    resolved = resolver.effective(_job({"body": 1}))
    # Then it fails at once, saying the schema is no longer accepted, rather than run unchecked
    assert resolved is not None and isinstance(resolved.task, TaskSpec)
    assert "no longer accepted" in resolved.task.params["error"]
    assert "is not a schema" in resolved.task.params["error"]
