"""Regular expressions from a schema, run without backtracking, within a time bound.

A JSON schema's ``pattern`` (and ``patternProperties``) comes from the caller, and the text it is
tried on comes from the model. The standard library's ``re`` backtracks: ``^(a+)+$`` on
``"a" * 30 + "!"`` takes minutes. Here the pattern is read by ``re``'s own parser (so it means what
``re`` would make of it), compiled to a small program, and run as a Pike VM: every position of the
text is visited once with the set of states alive there, so a search costs at most (text length) ×
(program size) steps, and it gives up at a deadline besides. What such a machine cannot run
(backreferences, lookarounds, conditionals) is refused when the schema is checked, with one line.

:func:`bounded_validator` is jsonschema's validator for a schema with ``pattern``,
``patternProperties`` and ``additionalProperties`` checked by this engine instead of ``re``.
"""

from __future__ import annotations

import functools
import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import jsonschema
import jsonschema.validators
from jsonschema.exceptions import ValidationError

# re's own parser, a private module of the standard library (re._parser since 3.11): a pattern is
# read exactly as jsonschema's re.search would read it; only the parser's output is walked here.
sre = re._constants  # type: ignore[attr-defined]
sre_parse = re._parser  # type: ignore[attr-defined]

MAX_PROGRAM = 20_000
"""The most instructions a compiled pattern may have (``x{1000}`` is a thousand copies of ``x``)."""
_CHECK_EVERY = 64  # characters between looks at the clock

Test = Callable[[str], bool]


class PatternRefused(ValueError):
    """A pattern this engine does not run, with the reason."""


@dataclass(frozen=True)
class _Char:
    test: Test


@dataclass(frozen=True)
class _Split:
    first: int
    second: int


@dataclass(frozen=True)
class _Jump:
    to: int


@dataclass(frozen=True)
class _At:
    where: Any
    multiline: bool


_Instruction = _Char | _Split | _Jump | _At | None  # None: a match


class Pattern:
    """A compiled pattern: :meth:`search` says whether it matches anywhere in a text, as ``re.search``."""

    def __init__(self, source: str) -> None:
        self.source = source
        try:
            parsed = sre_parse.parse(source)
        except re.error as exc:
            raise PatternRefused(f"{source!r} is not a regular expression ({exc})") from None
        except RecursionError:
            raise PatternRefused(f"{source!r} nests its groups too deeply") from None
        self._program: list[_Instruction] = []
        self._compile(list(parsed), parsed.state.flags)
        self._program.append(None)

    def search(self, text: str, *, deadline: float | None = None) -> bool:
        """Whether the pattern matches somewhere in ``text``.

        Raises:
            TimeoutError: the deadline (a ``time.monotonic()`` value) passed first.
        """
        current, matched = self._closure([0], text, 0)
        for pos, char in enumerate(text):
            if matched:
                return True
            if deadline is not None and pos % _CHECK_EVERY == 0 and time.monotonic() > deadline:
                raise TimeoutError(f"no verdict on {self.source!r} in time")
            moved = [pc + 1 for pc, item in current if item.test(char)]
            moved.append(0)  # re.search: a match may begin at the next position too
            current, matched = self._closure(moved, text, pos + 1)
        return matched

    def _closure(self, pcs: list[int], text: str, pos: int) -> tuple[list[tuple[int, _Char]], bool]:
        """The states reachable from ``pcs`` at ``pos`` without reading a character, and whether a
        match is among them."""
        alive: list[tuple[int, _Char]] = []
        matched = False
        seen: set[int] = set()
        stack = list(reversed(pcs))
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            item = self._program[pc]
            if isinstance(item, _Split):
                stack += [item.second, item.first]
            elif isinstance(item, _Jump):
                stack.append(item.to)
            elif isinstance(item, _At):
                if _holds(item, text, pos):
                    stack.append(pc + 1)
            elif item is None:
                matched = True
            else:
                alive.append((pc, item))
        return alive, matched

    def _emit(self, item: _Instruction) -> int:
        if len(self._program) >= MAX_PROGRAM:
            raise PatternRefused(
                f"{self.source!r} is too large to check: over {MAX_PROGRAM} steps, its repeats spelled out"
            )
        self._program.append(item)
        return len(self._program) - 1

    def _compile(self, items: list[tuple[Any, Any]], flags: int) -> None:
        for op, arg in items:
            self._compile_one(op, arg, flags)

    def _compile_one(self, op: Any, arg: Any, flags: int) -> None:
        fold = bool(flags & re.IGNORECASE)
        if op is sre.LITERAL:
            self._emit(_Char(_literal(arg, fold)))
        elif op is sre.NOT_LITERAL:
            same = _literal(arg, fold)
            self._emit(_Char(lambda c: not same(c)))
        elif op is sre.ANY:
            self._emit(_Char((lambda c: True) if flags & re.DOTALL else (lambda c: c != "\n")))
        elif op is sre.IN:
            self._emit(_Char(_charset(arg, fold)))
        elif op is sre.AT:
            self._emit(_At(arg, bool(flags & re.MULTILINE)))
        elif op is sre.SUBPATTERN:
            _, add, remove, body = arg
            self._compile(list(body), (flags | add) & ~remove)
        elif op is sre.ATOMIC_GROUP:
            self._compile(list(arg), flags)  # same language: atomicity only prunes backtracking
        elif op is sre.BRANCH:
            self._branch([list(b) for b in arg[1]], flags)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, body = arg
            self._repeat(low, None if high is sre.MAXREPEAT else high, list(body), flags)
        else:
            what = _UNSUPPORTED.get(str(op), str(op).lower())
            raise PatternRefused(
                f"{self.source!r} uses {what}, which needs a backtracking engine: a pattern here may use no "
                "backreference, lookaround or conditional"
            )

    def _branch(self, branches: list[list[tuple[Any, Any]]], flags: int) -> None:
        jumps = []
        for branch in branches[:-1]:
            split = self._emit(_Split(0, 0))
            self._compile(branch, flags)
            jumps.append(self._emit(_Jump(0)))
            self._program[split] = _Split(split + 1, len(self._program))
        self._compile(branches[-1], flags)
        for jump in jumps:
            self._program[jump] = _Jump(len(self._program))

    def _repeat(self, low: int, high: int | None, body: list[tuple[Any, Any]], flags: int) -> None:
        for _ in range(low):
            self._compile(body, flags)
        if high is None:  # a loop: split into the body or past it; the body jumps back
            split = self._emit(_Split(0, 0))
            self._compile(body, flags)
            self._emit(_Jump(split))
            self._program[split] = _Split(split + 1, len(self._program))
            return
        splits = []
        for _ in range(high - low):  # each optional copy may be skipped, and ends the rest with it
            splits.append(self._emit(_Split(0, 0)))
            self._compile(body, flags)
        for split in splits:
            self._program[split] = _Split(split + 1, len(self._program))


_UNSUPPORTED = MappingProxyType(
    {
        "GROUPREF": "a backreference",
        "GROUPREF_EXISTS": "a conditional",
        "ASSERT": "a lookaround",
        "ASSERT_NOT": "a lookaround",
    }
)


def _holds(at: _At, text: str, pos: int) -> bool:
    where = at.where
    if where is sre.AT_BEGINNING:
        return pos == 0 or (at.multiline and text[pos - 1] == "\n")
    if where is sre.AT_BEGINNING_STRING:
        return pos == 0
    if where is sre.AT_END:
        if at.multiline:
            return pos == len(text) or text[pos] == "\n"
        return pos == len(text) or (pos == len(text) - 1 and text[pos] == "\n")
    if where is sre.AT_END_STRING:
        return pos == len(text)
    before = pos > 0 and _is_word(text[pos - 1])
    after = pos < len(text) and _is_word(text[pos])
    if where in (sre.AT_BOUNDARY, sre.AT_UNI_BOUNDARY):
        return before != after
    if where in (sre.AT_NON_BOUNDARY, sre.AT_UNI_NON_BOUNDARY):
        return before == after
    raise PatternRefused(f"an anchor this engine does not know ({where})")


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _literal(code: int, fold: bool) -> Test:
    char = chr(code)
    if not fold:
        return lambda c: c == char
    low = char.casefold()
    return lambda c: c.casefold() == low


_CATEGORIES: Mapping[Any, Test] = MappingProxyType(
    {
        sre.CATEGORY_DIGIT: lambda c: unicodedata.decimal(c, None) is not None,
        sre.CATEGORY_NOT_DIGIT: lambda c: unicodedata.decimal(c, None) is None,
        sre.CATEGORY_SPACE: str.isspace,
        sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
        sre.CATEGORY_WORD: _is_word,
        sre.CATEGORY_NOT_WORD: lambda c: not _is_word(c),
    }
)


def _charset(items: list[tuple[Any, Any]], fold: bool) -> Test:
    negate = False
    tests: list[Test] = []
    for op, arg in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            tests.append(_literal(arg, fold))
        elif op is sre.RANGE:
            tests.append(_range(arg[0], arg[1], fold))
        elif op is sre.CATEGORY and arg in _CATEGORIES:
            tests.append(_CATEGORIES[arg])
        else:
            raise PatternRefused(f"a character class this engine does not know ({op} {arg})")
    if negate:
        return lambda c: not any(test(c) for test in tests)
    return lambda c: any(test(c) for test in tests)


def _range(low: int, high: int, fold: bool) -> Test:
    if not fold:
        return lambda c: low <= ord(c) <= high
    return lambda c: any(low <= ord(v) <= high for v in (c, c.lower(), c.upper()))


@functools.lru_cache(maxsize=512)
def compiled(source: str) -> Pattern:
    """The pattern ``source``, compiled once (a schema's patterns are tried on every call).

    Raises:
        PatternRefused: it is not a regular expression, or one this engine cannot run.
    """
    return Pattern(source)


def bounded_validator(schema: Mapping[str, Any], seconds: float) -> jsonschema.protocols.Validator:
    """jsonschema's validator for ``schema`` (its draft), its patterns run by :class:`Pattern`,
    each search given ``seconds``: a search that runs out of time is a validation error."""
    base = jsonschema.validators.validator_for(schema)
    validator: jsonschema.protocols.Validator = _bounded_class(base, seconds)(schema)
    return validator


@functools.lru_cache(maxsize=32)
def _bounded_class(base: type[Any], seconds: float) -> type[Any]:
    def found(pattern: str, text: str) -> bool:
        """Whether ``pattern`` matches; TimeoutError past the bound, or for a pattern this engine
        refuses (a schema that was not checked up front): a verdict it cannot give."""
        try:
            program = compiled(pattern)
        except PatternRefused as exc:
            raise TimeoutError(str(exc)) from None
        return program.search(text, deadline=time.monotonic() + seconds)

    def pattern(validator: Any, source: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "string"):
            return
        try:
            if not found(source, instance):
                yield ValidationError(f"{_shown(instance)} does not match {source!r}")
        except TimeoutError:
            yield ValidationError(
                f"a text of {len(instance)} characters could not be checked against {source!r} in {seconds:g} s"
            )

    def pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for source, subschema in patterns.items():
            for key, value in instance.items():
                try:
                    hit = found(source, key)
                except TimeoutError:
                    yield ValidationError(f"the key {_shown(key)} could not be checked against {source!r} in time")
                    continue
                if hit:
                    yield from validator.descend(value, subschema, path=key, schema_path=source)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        known = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = []
        for key in instance:
            if key in known:
                continue
            try:
                if any(found(source, key) for source in patterns):
                    continue
            except TimeoutError:
                pass  # an unchecked key counts as an extra one
            extras.append(key)
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            listed = ", ".join(_shown(key) for key in sorted(extras))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")

    keywords = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
    extended: type[Any] = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    return extended


def _shown(text: str, most: int = 80) -> str:
    """``text`` quoted, cut to ``most`` characters (an error message never repeats a huge value)."""
    return repr(text) if len(text) <= most else repr(text[:most]) + f"... ({len(text)} characters)"
