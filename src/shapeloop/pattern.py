"""Regular expressions from a schema, run without backtracking, within a time bound.

A JSON schema's ``pattern`` (and ``patternProperties``) comes from the caller, and the text it is
tried on comes from the model. The standard library's ``re`` backtracks: ``^(a+)+$`` on
``"a" * 30 + "!"`` takes minutes. Here the pattern is read by ``re``'s own parser (so it means what
``re`` would make of it), compiled to a small program, and run as a Pike VM: every position of the
text is visited once with the set of states alive there, so a search costs at most (text length) ×
(program size) steps, and it gives up at a deadline besides.

The engine agrees with ``re.search`` on every pattern it accepts. What one character matches (a
literal, a class, ``.``, ``\\d`` and ``\\w`` under ``(?a)`` or not, case folding) and whether an anchor
holds (``^``, ``$``, ``\\b``, ``\\B``) is asked of ``re`` itself, compiled for that one item with the
flags in force there; only the structure (sequence, alternation, repetition) is the engine's. What
such a machine cannot run the way ``re`` does (backreferences, lookarounds, conditionals, atomic
groups and possessive repeats, whose matches depend on backtracking) is refused when the schema is
checked, with one line.

:func:`bounded_validator` is jsonschema's validator for a schema with ``pattern``,
``patternProperties`` and ``additionalProperties`` checked by this engine instead of ``re``;
:func:`pattern_budget` gives every check of one validation one shared time budget.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import jsonschema
import jsonschema.validators
from jsonschema.exceptions import ValidationError

# re's own parser and compiler, private modules of the standard library (re._parser and
# re._compiler since 3.11): a pattern is read exactly as jsonschema's re.search would read it, and
# each character test is compiled by re itself, so the two cannot disagree on what a character is.
sre = re._constants  # type: ignore[attr-defined]
sre_parse = re._parser  # type: ignore[attr-defined]
sre_compile = re._compiler  # type: ignore[attr-defined]

MAX_PROGRAM = 20_000
"""The most instructions a compiled pattern may have (``x{1000}`` is a thousand copies of ``x``)."""
_CHECK_EVERY = 64  # characters between looks at the clock


class PatternRefused(ValueError):
    """A pattern this engine does not run, with the reason."""


@dataclass(frozen=True)
class _Char:
    test: Callable[[str], object]  # re's verdict on one character: a match or None


@dataclass(frozen=True)
class _Split:
    first: int
    second: int


@dataclass(frozen=True)
class _Jump:
    to: int


@dataclass(frozen=True)
class _At:
    holds: Callable[[str, int], object]  # re's verdict on the anchor at a position: a match or None


_Instruction = _Char | _Split | _Jump | _At | None  # None: a match


class Pattern:
    """A compiled pattern: :meth:`search` says whether it matches anywhere in a text, as ``re.search``."""

    def __init__(self, source: str) -> None:
        self.source = source
        try:
            re.compile(source)  # what re refuses (some errors come only from its compiler) is refused here too
            parsed = sre_parse.parse(source)
        except (re.error, OverflowError) as exc:
            raise PatternRefused(f"{source!r} is not a regular expression ({exc})") from None
        except RecursionError:
            raise PatternRefused(f"{source!r} nests its groups too deeply") from None
        self._program: list[_Instruction] = []
        self._items: dict[tuple[Any, str, int], re.Pattern[str]] = {}
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
            moved = [pc + 1 for pc, item in current if item.test(char) is not None]
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
                if item.holds(text, pos) is not None:
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

    def _one(self, op: Any, arg: Any, flags: int) -> re.Pattern[str]:
        """``re``'s own program for the single item ``(op, arg)`` under ``flags`` (compiled once)."""
        key = (op, repr(arg), flags)
        program = self._items.get(key)
        if program is None:
            state = sre_parse.State()
            state.flags = flags
            program = sre_compile.compile(sre_parse.SubPattern(state, [(op, arg)]), 0)
            self._items[key] = program
        return program

    def _compile(self, items: list[tuple[Any, Any]], flags: int) -> None:
        for op, arg in items:
            self._compile_one(op, arg, flags)

    def _compile_one(self, op: Any, arg: Any, flags: int) -> None:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            self._emit(_Char(self._one(op, arg, flags).fullmatch))
        elif op is sre.AT:
            self._emit(_At(self._one(op, arg, flags).match))
        elif op is sre.SUBPATTERN:
            _, add, remove, body = arg
            if (add | remove) & _CHARSET_MODES:
                # re itself does not hold to a scoped (?a:...) everywhere: it tells "É" from (?a:\W)
                # by the whole pattern's mode in one place and by the group's in another
                raise PatternRefused(
                    f"{self.source!r} switches between ASCII and Unicode matching inside a group ((?a:...), "
                    "(?u:...)), which re applies unevenly: set the mode for the whole pattern with (?a) at its start"
                )
            self._compile(list(body), sre_compile._combine_flags(flags, add, remove))
        elif op is sre.BRANCH:
            self._branch([list(b) for b in arg[1]], flags)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):  # lazy or greedy: the same texts have a match
            low, high, body = arg
            self._repeat(low, None if high is sre.MAXREPEAT else high, list(body), flags)
        else:
            what = _UNSUPPORTED.get(str(op), str(op).lower())
            raise PatternRefused(
                f"{self.source!r} uses {what}, which needs a backtracking engine: a pattern here may use no "
                "backreference, lookaround, conditional, atomic group or possessive repeat"
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


_CHARSET_MODES = re.ASCII | re.UNICODE | re.LOCALE

_UNSUPPORTED = MappingProxyType(
    {
        "GROUPREF": "a backreference",
        "GROUPREF_EXISTS": "a conditional",
        "ASSERT": "a lookaround",
        "ASSERT_NOT": "a lookaround",
        # (?>a*)a and a*+a never match "aaa" in re: which texts match depends on backtracking
        "ATOMIC_GROUP": "an atomic group",
        "POSSESSIVE_REPEAT": "a possessive repeat",
    }
)


@functools.lru_cache(maxsize=512)
def compiled(source: str) -> Pattern:
    """The pattern ``source``, compiled once (a schema's patterns are tried on every call).

    Raises:
        PatternRefused: it is not a regular expression, or one this engine cannot run.
    """
    return Pattern(source)


# The deadline that every pattern check of one validation shares. jsonschema hands a keyword
# function nothing of the caller's but the validator, so the validation in progress (in this thread
# or task) carries it; it is set only inside pattern_budget, never as a setting.
_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "shapeloop_pattern_deadline", default=None
)


@contextlib.contextmanager
def pattern_budget(seconds: float, *, until: float | None = None) -> Iterator[None]:
    """Inside, every pattern check shares one budget: ``seconds`` from now, or up to ``until`` (a
    ``time.monotonic()`` value) where that comes first. Outside, each check has its own ``seconds``."""
    now = time.monotonic()
    deadline = now + seconds if until is None else min(now + seconds, until)
    token = _DEADLINE.set((deadline, max(0.0, deadline - now)))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def bounded_validator(schema: Mapping[str, Any], seconds: float) -> jsonschema.protocols.Validator:
    """jsonschema's validator for ``schema`` (its draft), its patterns run by :class:`Pattern`,
    each search given ``seconds`` (or, inside :func:`pattern_budget`, what is left of that budget):
    a search that runs out of time is a validation error."""
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
        shared = _DEADLINE.get()
        return program.search(text, deadline=time.monotonic() + seconds if shared is None else shared[0])

    def allowed() -> str:
        shared = _DEADLINE.get()
        if shared is None:
            return f"{seconds:g} s"
        return f"the {shared[1]:.2g} s that all of its patterns share (Limits.pattern_seconds, or the time left)"

    def pattern(validator: Any, source: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "string"):
            return
        try:
            if not found(source, instance):
                yield ValidationError(f"{_shown(instance)} does not match {source!r}")
        except TimeoutError:
            yield ValidationError(
                f"a text of {len(instance)} characters could not be checked against {source!r} in {allowed()}: "
                "pass a shorter text"
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
