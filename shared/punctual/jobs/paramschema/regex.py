"""`pattern` and `patternProperties` on an automaton: time linear in the text, and every step paid for.

A schema's patterns come from users and run in the API and the worker, and Python's `re`
backtracks (`(a+)+$` takes exponential time), so `re`'s parser only reads the pattern and this
module compiles it to a program of at most MAX_PATTERN_PROGRAM instructions. ECMA-262 syntax,
without backreferences or lookaround, which cannot be matched in linear time.

A search runs the program as a lazily built DFA: a DFA state is the set of program positions alive
before a character (and whether the previous character was a word character, for `\\b`). Reading a
character the automaton has read before in that state costs one dictionary look-up; building a new
transition visits each instruction at most once and is charged to the validation's budget per
instruction visited. The DFA states kept are bounded (MAX_CACHED_POSITIONS in all): past that, new
transitions are built and charged each time but not kept.
"""

from __future__ import annotations

import bisect
import re
import re._constants as sre  # the standard library's regex parser, used only to read a pattern
import re._parser as sre_parse
from collections.abc import Callable
from typing import Any, Protocol

MAX_PATTERN_CHARS = 1000
# Instructions of one compiled pattern (a counted repeat is expanded): what a new transition costs
# at most.
MAX_PATTERN_PROGRAM = 2000
# Program positions and transitions the DFA states of one pattern keep (a bound on its memory).
MAX_CACHED_POSITIONS = 50_000
# A budget step pays for this many characters read on transitions already built, and a new
# transition costs MOVE_STEPS besides one step per instruction it visits (what they take, measured).
CHARS_PER_STEP = 2
MOVE_STEPS = 24
VISIT_STEPS = 2
# What a search costs besides its characters (its start, and the end of the text).
SEARCH_STEPS = 4


class Steps(Protocol):
    """What a search spends its steps against (a validation's budget)."""

    def spend(self, steps: int = 1) -> None: ...


_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(" \t\n\r\f\v\u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_LINE_ENDS = frozenset("\n\r\u2028\u2029")
_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    sre.CATEGORY_DIGIT: lambda c: "0" <= c <= "9",
    sre.CATEGORY_NOT_DIGIT: lambda c: not "0" <= c <= "9",
    sre.CATEGORY_WORD: lambda c: c in _WORD,
    sre.CATEGORY_NOT_WORD: lambda c: c not in _WORD,
    sre.CATEGORY_SPACE: lambda c: c in _SPACE,
    sre.CATEGORY_NOT_SPACE: lambda c: c not in _SPACE,
}
# Instructions: ("char", test index) | ("split", a, b) | ("jmp", a) | ("assert", kind) | ("match",)

# What came before a position: the start of the text, a word character, or another character.
_AT_START, _AFTER_WORD, _AFTER_OTHER = 0, 1, 2
_END = ""  # the transition key for the end of the text (a character is never empty)
# Characters read between two payments to the budget.
_CHUNK = 64


class _State:
    """A DFA state: the program positions alive before the next character, and what came before."""

    __slots__ = ("after", "kernel", "moves")

    def __init__(self, kernel: frozenset[int], after: int) -> None:
        self.kernel = kernel
        self.after = after
        # character (or _END) -> the next state, or True (a match) or False (none, at the end)
        self.moves: dict[str, _State | bool] = {}


class _Regex:
    """A pattern compiled to a program that `search` runs as a lazily built DFA: its time is linear
    in the text whatever the pattern (which backtracking engines, Python's `re` among them, do not
    promise), and each new transition costs at most the program's size."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"a pattern of at most {MAX_PATTERN_CHARS} characters")
        try:
            parsed = sre_parse.parse(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        except RecursionError:
            raise ValueError("the pattern nests too deeply") from None
        except OverflowError:  # (a counted repeat past what the parser holds: a{4294967295})
            raise ValueError(
                f"the pattern is too complex: more than {MAX_PATTERN_PROGRAM} instructions "
                "(its counted repeats expand too far)"
            ) from None
        if parsed.state.flags & ~(re.UNICODE | re.ASCII):
            raise ValueError("inline flags such as (?i) are not ECMA-262 (JSON Schema) regular expressions")
        self.program: list[tuple[Any, ...]] = []
        # Character tests, one per distinct construct (a repeat reuses its test), and each
        # instruction's test (-1 for those that read no character).
        self._tests: list[Callable[[str], bool]] = []
        self._test_ids: dict[Any, int] = {}
        try:
            self._emit_sequence(list(parsed))
        except RecursionError:
            raise ValueError("the pattern nests too deeply") from None
        self.program.append(("match",))
        self._anchored = any(instruction[0] == "assert" for instruction in self.program)
        self._test_of = [instruction[1] if instruction[0] == "char" else -1 for instruction in self.program]
        self._states: dict[tuple[frozenset[int], int], _State] = {}
        self._cached_positions = 0
        self._start = self._state(frozenset(), _AT_START)

    # -- compiling
    def _add(self, instruction: tuple[Any, ...]) -> int:
        if len(self.program) >= MAX_PATTERN_PROGRAM:
            raise ValueError(
                f"the pattern is too complex: more than {MAX_PATTERN_PROGRAM} instructions "
                "(its counted repeats expand too far)"
            )
        self.program.append(instruction)
        return len(self.program) - 1

    def _test(self, key: Any, make: Callable[[], Callable[[str], bool]]) -> int:
        if key not in self._test_ids:
            self._test_ids[key] = len(self._tests)
            self._tests.append(make())
        return self._test_ids[key]

    def _emit_sequence(self, items: list[tuple[Any, Any]]) -> None:
        for op, av in items:
            self._emit(op, av)

    def _emit(self, op: Any, av: Any) -> None:
        if op is sre.LITERAL:
            self._add(("char", self._test(("=", av), lambda: _equals(chr(av)))))
        elif op is sre.NOT_LITERAL:
            self._add(("char", self._test(("!", av), lambda: _differs(chr(av)))))
        elif op is sre.ANY:
            self._add(("char", self._test(".", lambda: _not_line_end)))
        elif op is sre.IN:
            self._add(("char", self._test(("[", id(av)), lambda: _class(av))))
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
        if low > MAX_PATTERN_PROGRAM or (high is not None and high > MAX_PATTERN_PROGRAM):
            raise ValueError(f"the pattern is too complex: a counted repeat over {MAX_PATTERN_PROGRAM}")
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
        state = self._start
        if run is not None:
            run.spend(SEARCH_STEPS)
        for start in range(0, len(text), _CHUNK):
            chunk = text[start : start + _CHUNK]
            if run is not None:
                run.spend(1 + len(chunk) // CHARS_PER_STEP)
            for char in chunk:
                following = state.moves.get(char)
                if following is None:
                    following = self._move(state, char, run)
                if following.__class__ is bool:
                    return True  # (False only ends the text)
                state = following  # type: ignore[assignment]
        ending = state.moves.get(_END)
        if ending is None:
            ending = self._move(state, _END, run)
        return ending is True

    def _move(self, state: _State, char: str, run: Steps | None) -> _State | bool:
        """The transition from `state` on `char` (or the end of the text), built and paid for."""
        alive, matched, visited = self._closure(state.kernel, state.after, char)
        if run is not None:
            run.spend(VISIT_STEPS * visited + MOVE_STEPS)
        following: _State | bool
        if matched:
            following = True
        elif char == _END:
            following = False
        else:
            # each distinct test once: a counted repeat of a class is many instructions, one test
            tests = self._tests
            verdicts: dict[int, bool] = {}
            kernel: set[int] = set()
            for pc in alive:
                test = self._test_of[pc]
                verdict = verdicts.get(test)
                if verdict is None:
                    verdict = verdicts[test] = tests[test](char)
                if verdict:
                    kernel.add(pc + 1)
            following = self._state(frozenset(kernel), _AFTER_WORD if char in _WORD else _AFTER_OTHER)
        # (kept only on a state that is kept, and while the cache has room)
        if (
            self._cached_positions < MAX_CACHED_POSITIONS
            and self._states.get((state.kernel, state.after)) is state
        ):
            self._cached_positions += 1
            state.moves[char] = following
        return following

    def _state(self, kernel: frozenset[int], after: int) -> _State:
        key = (kernel, after)
        found = self._states.get(key)
        if found is not None:
            return found
        state = _State(kernel, after)
        if self._cached_positions + len(kernel) + 1 <= MAX_CACHED_POSITIONS:
            self._cached_positions += len(kernel) + 1
            self._states[key] = state
        return state

    def _closure(self, kernel: frozenset[int], after: int, char: str) -> tuple[list[int], bool, int]:
        """The instructions alive at a position (those that read a character), reached from
        `kernel` and from the start (a match may start anywhere) through splits, jumps and anchors
        that hold there; whether "match" is among them; and how many instructions were visited."""
        program = self.program
        holds: dict[str, bool] = {}
        if self._anchored:
            word_after = bool(char) and char in _WORD
            holds = {
                "begin": after == _AT_START,
                "end": char == _END,
                "boundary": (after == _AFTER_WORD) != word_after,
                "not_boundary": (after == _AFTER_WORD) == word_after,
            }
        seen: set[int] = set()
        alive: list[int] = []
        matched = False
        stack = [0, *kernel]
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            instruction = program[pc]
            kind = instruction[0]
            if kind == "char":
                alive.append(pc)
            elif kind == "split":
                stack.append(instruction[2])
                stack.append(instruction[1])
            elif kind == "jmp":
                stack.append(instruction[1])
            elif kind == "assert":
                if holds[instruction[1]]:
                    stack.append(pc + 1)
            else:
                matched = True
        return alive, matched, len(seen) + 1


def _not_line_end(c: str) -> bool:
    return c not in _LINE_ENDS


def _equals(wanted: str) -> Callable[[str], bool]:
    return lambda c: c == wanted


def _differs(unwanted: str) -> Callable[[str], bool]:
    return lambda c: c != unwanted


def _class(items: list[tuple[Any, Any]]) -> Callable[[str], bool]:
    """A character class as one test whose cost does not grow with the class: its characters in a
    set, its ranges merged and searched by bisection, its categories (at most six) each once."""
    negate = False
    chars: set[str] = set()
    excluded: set[str] = set()
    ranges: list[tuple[int, int]] = []
    categories: list[Callable[[str], bool]] = []
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.NOT_LITERAL:
            excluded.add(chr(av))
        elif op is sre.RANGE:
            ranges.append((av[0], av[1]))
        elif op is sre.CATEGORY:
            if av not in _CATEGORIES:
                raise ValueError(f"unsupported character class {av}")
            if _CATEGORIES[av] not in categories:
                categories.append(_CATEGORIES[av])
        else:
            raise ValueError(f"unsupported character class item ({str(op).lower()})")
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    lows = [low for low, _ in merged]
    highs = [high for _, high in merged]
    members = frozenset(chars)
    others = frozenset(excluded)

    def holds(c: str) -> bool:
        if c in members:
            return True
        if lows:
            i = bisect.bisect_right(lows, ord(c)) - 1
            if i >= 0 and ord(c) <= highs[i]:
                return True
        if any(test(c) for test in categories):
            return True
        return bool(others) and any(c != other for other in others)

    if negate:
        return lambda c: not holds(c)
    return holds
