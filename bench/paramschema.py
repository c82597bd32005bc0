"""Parameter schemas: CPU time of Punctual's validator (`punctual.jobs.paramschema`) against the
`jsonschema` library (Draft 2020-12) on ordinary and hostile inputs. Prints JSON.

Run with `python -m bench.paramschema`. Each case runs in a process of its own, stopped after
`--limit` seconds (a hostile case can take hours in a validator without a budget). Times are CPU
time of the validating thread (the least of `--repeat` runs, each compiling the schema afresh, as
a job's creation does), so that other work on the machine does not inflate them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

_EXAMPLE = {
    "type": "object",
    "required": ["message"],
    "properties": {
        "message": {
            "type": "object",
            "required": ["to"],
            "properties": {"to": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"}},
        }
    },
    "additionalProperties": False,
}
_CLASS_900 = "".join(chr(0x100 + i) for i in range(900))


def _fan_out(depth: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}, {"type": "string"}]}
        for i in range(depth)
    }
    defs[f"a{depth}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


CASES: dict[str, Callable[[], tuple[Any, Any]]] = {
    "docs example, fits": lambda: (_EXAMPLE, {"message": {"to": "a@example.com"}}),
    "docs example, misfit": lambda: (_EXAMPLE, {"message": {"to": "nope"}}),
    "10,000 integers against items": lambda: (
        {"items": {"type": "integer", "minimum": 0}},
        list(range(10_000)),
    ),
    "100 const branches, 120,000 zeros": lambda: (
        {"type": "object", "anyOf": [{"const": i} for i in range(100)]},
        {"x": [0] * 120_000},
    ),
    "[^900 characters]{1000}, 1,200 characters": lambda: (
        {"pattern": "[^" + _CLASS_900 + "]{1000}"},
        "a" * 1200,
    ),
    "(a+)+$ against 28 a's and !": lambda: ({"pattern": "(a+)+$"}, "a" * 28 + "!"),
    "$ref applied 2**30 times": lambda: (_fan_out(30), 1.5),
}


def _punctual(schema: Any, value: Any) -> str:
    from punctual.jobs.paramschema.checking import compile_schema

    problem = compile_schema(schema).first_error(value)
    return "fits" if problem is None else "misfit"


def _jsonschema(schema: Any, value: Any) -> str:
    import jsonschema

    return (
        "fits" if next(jsonschema.Draft202012Validator(schema).iter_errors(value), None) is None else "misfit"
    )


VALIDATORS: dict[str, Callable[[Any, Any], str]] = {"paramschema": _punctual, "jsonschema": _jsonschema}


def _measure(queue: Any, validator: str, case: str, repeat: int) -> None:
    schema, value = CASES[case]()
    best = float("inf")
    outcome = ""
    for _ in range(repeat):
        started = time.thread_time()
        outcome = VALIDATORS[validator](schema, value)
        best = min(best, time.thread_time() - started)
    queue.put((round(best * 1000, 3), outcome))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=20.0, help="seconds a case may take in one validator")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for case in CASES:
        results[case] = {}
        for validator in VALIDATORS:
            queue: Any = multiprocessing.Queue()
            process = multiprocessing.Process(target=_measure, args=(queue, validator, case, args.repeat))
            process.start()
            process.join(args.limit)
            if process.is_alive():
                process.kill()
                process.join()
                results[case][validator] = {"cpu_ms": None, "stopped_after_s": args.limit}
            else:
                cpu_ms, outcome = queue.get()
                results[case][validator] = {"cpu_ms": cpu_ms, "outcome": outcome}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
