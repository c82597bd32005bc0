"""`pattern` and `patternProperties` on a Thompson automaton: time linear in the text.

A schema's patterns come from users and run in the API and the worker, and Python's `re`
backtracks (`(a+)+$` takes exponential time), so `re`'s parser only reads the pattern and this
module compiles it to states it visits at most once per character. ECMA-262 syntax, without
backreferences or lookaround, which cannot be matched in linear time.
"""

from __future__ import annotations

import re
import re._constants as sre  # the standard library's regex parser, used only to read a pattern
import re._parser as sre_parse
from collections.abc import Callable
from typing import Any, Protocol

MAX_PATTERN_CHARS = 1000
# Instructions of one compiled pattern (a counted repeat is expanded): its cost per character.
MAX_PATTERN_PROGRAM = 2000


class Steps(Protocol):
    """What a search spends its steps against (a validation's budget)."""

    def spend(self, steps: int = 1) -> None: ...


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
    def search(self, text: str, run: Steps | None = None) -> bool:
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
