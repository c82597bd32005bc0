"""DynamoDB condition, key-condition and update expressions, evaluated on wire-format items.

Only what Punctual writes is supported: top-level attributes (and map members in conditions:
`#a.#b`), comparisons, IN, BETWEEN, AND/OR/NOT, attribute_exists/attribute_not_exists/begins_with,
and SET (with + and if_not_exists) and REMOVE updates. Redundant parentheses are refused, as
DynamoDB refuses them. Anything else raises `Unsupported`, so a new expression in the
store fails the benchmark loudly instead of being evaluated wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Item = dict[str, dict[str, Any]]  # attribute name -> wire value, e.g. {"S": "abc"}

_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),+\-]|#\w+|:\w+|[A-Za-z_]\w*|\S)")
_KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "SET", "REMOVE", "ADD", "DELETE"}
_COMPARATORS = {"=", "<>", "<", "<=", ">", ">="}


class Unsupported(NotImplementedError):
    """An expression (or operation) the fake does not implement: fail loudly, never guess."""


class ValidationError(Exception):
    """What DynamoDB answers with a ValidationException."""


@dataclass(frozen=True)
class Names:
    names: dict[str, str]
    values: dict[str, dict[str, Any]]

    def name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                raise ValidationError(f"undefined attribute name {token}")
            return self.names[token]
        if token.upper() in _KEYWORDS:
            raise ValidationError(f"reserved word {token}")
        return token

    def value(self, token: str) -> dict[str, Any]:
        if token not in self.values:
            raise ValidationError(f"undefined attribute value {token}")
        return self.values[token]


def tokens(expression: str, *, members: bool = False) -> list[str]:
    """The expression's tokens; with `members`, a map member's dot is one."""
    found = _TOKEN.findall(expression)
    for token in found:
        if token in {"[", "]"} or (token == "." and not members):
            raise Unsupported(f"document paths are not supported: {expression!r}")
    return found


def _scalar(value: dict[str, Any]) -> Any:
    (kind, raw), *rest = value.items()
    if rest:
        raise ValidationError(f"malformed attribute value {value!r}")
    if kind == "N":
        return ("N", Decimal(raw))
    if kind in {"S", "B", "BOOL", "NULL"}:
        return (kind, raw)
    raise Unsupported(f"comparison of {kind} values")


def compare(left: dict[str, Any] | None, op: str, right: dict[str, Any] | None) -> bool:
    """DynamoDB comparison: false (not an error) when either side is missing or types differ."""
    if left is None or right is None:
        return op == "<>" and not (left is None and right is None)
    (lk, lv), (rk, rv) = _scalar(left), _scalar(right)
    if lk != rk:
        return op == "<>"
    if op == "=":
        return bool(lv == rv)
    if op == "<>":
        return bool(lv != rv)
    if lk in {"BOOL", "NULL"}:
        raise ValidationError(f"{op} does not apply to {lk}")
    return {
        "<": lv < rv,
        "<=": lv <= rv,
        ">": lv > rv,
        ">=": lv >= rv,
    }[op]


class _Parser:
    members = False

    def __init__(self, expression: str, names: Names) -> None:
        self.tokens = tokens(expression, members=self.members)
        self.position = 0
        self.names = names
        self.expression = expression

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise ValidationError(f"expected {expected or 'a token'} in {self.expression!r}, got {token!r}")
        self.position += 1
        return token

    def done(self) -> None:
        if self.peek() is not None:
            raise ValidationError(f"unexpected {self.peek()!r} in {self.expression!r}")


Condition = Callable[[Item], bool]
Operand = Callable[[Item], dict[str, Any] | None]


class _ConditionParser(_Parser):
    members = True

    def parse(self) -> Condition:
        condition = self.disjunction()
        self.done()
        return condition

    def disjunction(self) -> Condition:
        parts = [self.conjunction()]
        while (self.peek() or "").upper() == "OR":
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else lambda item: any(p(item) for p in parts)

    def conjunction(self) -> Condition:
        parts = [self.negation()]
        while (self.peek() or "").upper() == "AND":
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else lambda item: all(p(item) for p in parts)

    def negation(self) -> Condition:
        if (self.peek() or "").upper() == "NOT":
            self.take()
            inner = self.negation()
            return lambda item: not inner(item)
        return self.primary()

    def primary(self) -> Condition:
        token = self.peek()
        if token == "(":
            self.take()
            if self.peek() == "(" and self._closes_together():
                raise ValidationError(
                    "Invalid ConditionExpression: The expression has redundant parentheses;"
                )
            inner = self.disjunction()
            self.take(")")
            return inner
        if token in {"attribute_exists", "attribute_not_exists", "begins_with"}:
            return self.function(self.take())
        if token is not None and token in {"size", "attribute_type", "contains"}:
            raise Unsupported(f"{token}() in {self.expression!r}")
        left = self.operand()
        op = self.take()
        if op in _COMPARATORS:
            right = self.operand()
            return lambda item: compare(left(item), op, right(item))
        if op.upper() == "IN":
            self.take("(")
            options = [self.operand()]
            while self.peek() == ",":
                self.take()
                options.append(self.operand())
            self.take(")")
            return lambda item: any(compare(left(item), "=", o(item)) for o in options)
        if op.upper() == "BETWEEN":
            low = self.operand()
            self.take("AND")
            high = self.operand()
            return lambda item: compare(left(item), ">=", low(item)) and compare(left(item), "<=", high(item))
        raise ValidationError(f"unexpected {op!r} in {self.expression!r}")

    def _closes_together(self) -> bool:
        """Whether the parenthesis at the current token closes right before its enclosing one does."""
        depth = 0
        for index in range(self.position, len(self.tokens)):
            token = self.tokens[index]
            depth += {"(": 1, ")": -1}.get(token, 0)
            if depth == 0:
                return index + 1 < len(self.tokens) and self.tokens[index + 1] == ")"
        return False

    def function(self, name: str) -> Condition:
        self.take("(")
        path = self.names.name(self.take())
        if name == "begins_with":
            self.take(",")
            prefix = self.operand()
            self.take(")")

            def begins(item: Item) -> bool:
                value, start = item.get(path), prefix(item)
                if value is None or start is None or "S" not in value or "S" not in start:
                    return False
                return str(value["S"]).startswith(str(start["S"]))

            return begins
        self.take(")")
        if name == "attribute_exists":
            return lambda item: path in item
        return lambda item: path not in item

    def operand(self) -> Operand:
        token = self.take()
        if token.startswith(":"):
            value = self.names.value(token)
            return lambda item: value
        if token == "(" or token in _COMPARATORS or token == ",":
            raise ValidationError(f"unexpected {token!r} in {self.expression!r}")
        path = [self.names.name(token)]
        while self.peek() == ".":
            self.take()
            path.append(self.names.name(self.take()))

        def member(item: Item) -> dict[str, Any] | None:
            value: dict[str, Any] | None = item.get(path[0])
            for name in path[1:]:
                if value is None or "M" not in value:
                    return None
                value = value["M"].get(name)
            return value

        return member


def condition(expression: str, names: Names) -> Condition:
    return _ConditionParser(expression, names).parse()


@dataclass(frozen=True)
class KeyCondition:
    """`pk = :v [AND <sort key condition>]`, as Query takes it."""

    partition_value: str
    sort_op: str | None = None  # =, <, <=, >, >=, begins_with, between
    sort_values: tuple[str, ...] = ()


def key_condition(expression: str, names: Names, partition_key: str, sort_key: str) -> KeyCondition:
    parser = _Parser(expression, names)

    def string_value(token: str) -> str:
        value = names.value(token)
        if set(value) != {"S"}:
            raise Unsupported("only string keys are supported")
        return str(value["S"])

    if parser.peek() == "(":
        raise Unsupported(f"parenthesised key condition {expression!r}")
    if names.name(parser.take()) != partition_key:
        raise ValidationError(f"the key condition must name {partition_key} first: {expression!r}")
    parser.take("=")
    partition = string_value(parser.take())
    if parser.peek() is None:
        return KeyCondition(partition)
    parser.take("AND")
    if parser.peek() == "begins_with":
        parser.take()
        parser.take("(")
        if names.name(parser.take()) != sort_key:
            raise ValidationError(f"begins_with must name {sort_key}")
        parser.take(",")
        prefix = string_value(parser.take())
        parser.take(")")
        parser.done()
        return KeyCondition(partition, "begins_with", (prefix,))
    if names.name(parser.take()) != sort_key:
        raise ValidationError(f"the second key condition must name {sort_key}: {expression!r}")
    op = parser.take()
    if op.upper() == "BETWEEN":
        low = string_value(parser.take())
        parser.take("AND")
        high = string_value(parser.take())
        parser.done()
        return KeyCondition(partition, "between", (low, high))
    if op not in _COMPARATORS - {"<>"}:
        raise ValidationError(f"unsupported key comparison {op!r}")
    value = string_value(parser.take())
    parser.done()
    return KeyCondition(partition, op, (value,))


@dataclass(frozen=True)
class IndexKeyCondition:
    """A Query's key condition on a global secondary index whose keys may span attributes: every
    partition attribute `=` a value, then sort attributes from the first, `=` on all but the last
    named, which takes any sort-key condition."""

    partition_values: tuple[str, ...]
    sort_conditions: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (op, values) per sort attribute

    def matches(self, sort_values: tuple[str, ...]) -> bool:
        for (op, values), value in zip(self.sort_conditions, sort_values, strict=False):
            if not _string_matches(op, value, values):
                return False
        return True


def _string_matches(op: str, value: str, operands: tuple[str, ...]) -> bool:
    if op == "begins_with":
        return value.startswith(operands[0])
    if op == "between":
        return operands[0] <= value <= operands[1]
    return {
        "=": value == operands[0],
        "<": value < operands[0],
        "<=": value <= operands[0],
        ">": value > operands[0],
        ">=": value >= operands[0],
    }[op]


def index_key_condition(
    expression: str, names: Names, partition_keys: tuple[str, ...], sort_keys: tuple[str, ...]
) -> IndexKeyCondition:
    parser = _Parser(expression, names)

    def string_value(token: str) -> str:
        value = names.value(token)
        if set(value) != {"S"}:
            raise Unsupported("only string keys are supported")
        return str(value["S"])

    clauses: dict[str, tuple[str, tuple[str, ...]]] = {}
    order: list[str] = []
    while True:
        if parser.peek() == "(":
            raise Unsupported(f"parenthesised key condition {expression!r}")
        if parser.peek() == "begins_with":
            parser.take()
            parser.take("(")
            name = names.name(parser.take())
            parser.take(",")
            clause: tuple[str, tuple[str, ...]] = ("begins_with", (string_value(parser.take()),))
            parser.take(")")
        else:
            name = names.name(parser.take())
            op = parser.take()
            if op.upper() == "BETWEEN":
                low = string_value(parser.take())
                parser.take("AND")
                clause = ("between", (low, string_value(parser.take())))
            elif op in _COMPARATORS - {"<>"}:
                clause = (op, (string_value(parser.take()),))
            else:
                raise ValidationError(f"unsupported key comparison {op!r}")
        if name in clauses:
            raise ValidationError(f"{name} is named twice in {expression!r}")
        clauses[name] = clause
        order.append(name)
        if parser.peek() is None:
            break
        parser.take("AND")
    missing = [name for name in partition_keys if clauses.get(name, ("",))[0] != "="]
    if missing:
        raise ValidationError(f"the key condition must give every partition attribute with =: {missing}")
    named = [name for name in order if name not in partition_keys]
    if named != list(sort_keys[: len(named)]):
        raise ValidationError(f"sort attributes must be named from the first, in order: {expression!r}")
    if any(clauses[name][0] != "=" for name in named[:-1]):
        raise ValidationError(f"only the last sort attribute named may take a range: {expression!r}")
    return IndexKeyCondition(
        tuple(clauses[name][1][0] for name in partition_keys), tuple(clauses[name] for name in named)
    )


Update = Callable[[Item], Item]


class _UpdateParser(_Parser):
    def parse(self) -> Update:
        sets: list[tuple[str, Operand]] = []
        removes: list[str] = []
        while self.peek() is not None:
            clause = self.take().upper()
            if clause == "SET":
                while True:
                    name = self.names.name(self.take())
                    self.take("=")
                    sets.append((name, self.value()))
                    if self.peek() != ",":
                        break
                    self.take()
            elif clause == "REMOVE":
                while True:
                    removes.append(self.names.name(self.take()))
                    if self.peek() != ",":
                        break
                    self.take()
            elif clause in {"ADD", "DELETE"}:
                raise Unsupported(f"{clause} updates in {self.expression!r}")
            else:
                raise ValidationError(f"unexpected {clause!r} in {self.expression!r}")

        def apply(item: Item) -> Item:
            # Every right-hand side reads the item as it was before the update, as in DynamoDB.
            computed = [(name, operand(item)) for name, operand in sets]
            updated = dict(item)
            for name, value in computed:
                if value is None:
                    raise ValidationError(f"SET {name} refers to an attribute that does not exist")
                updated[name] = value
            for name in removes:
                updated.pop(name, None)
            return updated

        self.targets = [name for name, _ in sets]
        return apply

    def value(self) -> Operand:
        left = self.term()
        if self.peek() in {"+", "-"}:
            sign = self.take()
            right = self.term()

            def arithmetic(item: Item) -> dict[str, Any] | None:
                a, b = left(item), right(item)
                if a is None or b is None or "N" not in a or "N" not in b:
                    raise ValidationError("arithmetic needs two numbers")
                total = Decimal(a["N"]) + (Decimal(b["N"]) if sign == "+" else -Decimal(b["N"]))
                return {"N": str(total)}

            return arithmetic
        return left

    def term(self) -> Operand:
        token = self.take()
        if token == "if_not_exists":
            self.take("(")
            name = self.names.name(self.take())
            self.take(",")
            fallback = self.term()
            self.take(")")
            return lambda item: item.get(name) or fallback(item)
        if token.startswith(":"):
            value = self.names.value(token)
            return lambda item: value
        if token in {"list_append"}:
            raise Unsupported(f"{token}() in {self.expression!r}")
        name = self.names.name(token)
        return lambda item: item.get(name)


def update(expression: str, names: Names) -> Update:
    return _UpdateParser(expression, names).parse()


def update_targets(expression: str, names: Names) -> list[str]:
    """The attributes an update expression SETs (what ReturnValues=UPDATED_NEW returns)."""
    parser = _UpdateParser(expression, names)
    parser.parse()
    return parser.targets


def projection(expression: str | None, names: Names) -> Callable[[Item], Item]:
    if not expression:
        return lambda item: item
    wanted = [names.name(part.strip()) for part in expression.split(",")]
    for name in wanted:
        if not name or any(c in name for c in ".[]"):
            raise Unsupported(f"projection {expression!r}")
    return lambda item: {k: item[k] for k in wanted if k in item}
