"""Lambda's event filtering, as far as the stack's patterns use it: a record reaches a function only if
it matches one of its mapping's patterns. moto's streams have no mappings, so the tests apply the
deployed patterns themselves (and see what AWS would drop)."""

from __future__ import annotations

from typing import Any


def passes(record: dict[str, Any], patterns: list[dict[str, Any]]) -> bool:
    return any(_matches(pattern, record) for pattern in patterns)


def _matches(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            _rule_holds(rules, value.get(name))
            if isinstance(rules, list)
            else _matches(rules, value.get(name))
            for name, rules in pattern.items()
        )
    raise AssertionError(f"not a pattern: {pattern!r}")


def _rule_holds(rules: list[Any], value: Any) -> bool:
    """A leaf: any of its rules holds (an equal value, a prefix, existence)."""
    for rule in rules:
        if isinstance(rule, dict):
            (kind, operand), *more = rule.items()
            assert not more, rule
            if kind == "prefix" and isinstance(value, str) and value.startswith(operand):
                return True
            if kind == "exists" and (value is not None) is operand:
                return True
            if kind not in ("prefix", "exists"):
                raise AssertionError(f"a rule these tests do not read: {rule!r}")
        elif value == rule:
            return True
    return False
