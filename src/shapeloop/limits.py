"""The bounds of a run on what comes from outside, and the checks that hold schemas and values to them.

A reply, a schema and a call's arguments are read before anything is done with them, and each is
bounded first: integers of any length (Python refuses to print one of more than 4 300 digits),
NaN and Infinity (not JSON: a strict reader refuses a transcript that holds them), nesting, sizes;
a schema is then walked the way jsonschema applies it (:mod:`shapeloop.schemawalk`). The bounds are a run's arguments
(:class:`Limits`), never module constants, so two runs in one process may differ.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shapeloop.schemawalk import applied_problem

_LOG2_10 = math.log2(10)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What a run accepts from the model and from the caller.

    Attributes:
        max_schema_chars: the longest schema (``output_type``'s, a tool's parameters) as JSON text.
        max_schema_depth: the deepest nesting of a schema's objects and lists.
        max_argument_chars: the most characters of text and numbers in one call's arguments (and in
            a typed answer); a longer call is refused before its tool runs.
        max_integer_digits: the longest integer a reply may hold.
        max_depth: the deepest nesting of a call's arguments or an answer.
        pattern_seconds: the time one ``pattern`` check may take (the engine never backtracks,
            so only a huge text against a large pattern comes near it).
    """

    max_schema_chars: int = 200_000
    max_schema_depth: int = 64
    max_argument_chars: int = 100_000
    max_integer_digits: int = 1_000
    max_depth: int = 64
    pattern_seconds: float = 0.5

    def __post_init__(self) -> None:
        for name in ("max_schema_chars", "max_schema_depth", "max_argument_chars", "max_integer_digits", "max_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1, not {getattr(self, name)!r}")
        if not self.pattern_seconds > 0:
            raise ValueError(f"Limits.pattern_seconds must be more than 0, not {self.pattern_seconds!r}")


class NotJson(ValueError):
    """A number the JSON text holds that a strict reader refuses (NaN, Infinity, 1e999) or that is too long."""


@functools.lru_cache(maxsize=16)
def json_decoder(limits: Limits) -> json.JSONDecoder:
    """A JSON reader that refuses NaN, Infinity, numbers that overflow to them, and integers longer
    than ``limits.max_integer_digits`` (raising :class:`NotJson`, a ``ValueError``); control
    characters inside strings are let through, as small models write them."""
    most = limits.max_integer_digits

    def integer(text: str) -> int:
        digits = len(text) - text.startswith("-")
        if digits > most:
            raise NotJson(f"an integer longer than {most} digits: write it as a string, or a shorter number")
        return int(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise NotJson(f"{text[:40]} is too large for a number")
        return value

    def constant(text: str) -> Any:
        raise NotJson(f"{text} is not JSON: write a number, or null")

    return json.JSONDecoder(strict=False, parse_int=integer, parse_float=number, parse_constant=constant)


def value_problem(value: Any, limits: Limits, *, what: str = "the arguments") -> str | None:
    """Why ``value`` (arguments or an answer, as plain data) is out of bounds, or None.

    Walks the value without recursion: a NaN or Infinity, an integer longer than
    ``max_integer_digits``, nesting deeper than ``max_depth``, more than ``max_argument_chars`` in all.
    """
    total = 0
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        where = f"{path}: " if path else ""
        if depth > limits.max_depth:
            return f"{where}{what} nest deeper than {limits.max_depth} levels"
        if isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
            return f"{where}{shown} is not a JSON number: write a finite number"
        if isinstance(item, int) and not isinstance(item, bool):
            digits = _digits(item)
            if digits > limits.max_integer_digits:
                return f"{where}an integer of {digits} digits; the most is {limits.max_integer_digits}"
            total += digits
        elif isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            total += sum(len(str(key)) for key in item)
            stack += [(sub, depth + 1, _join(path, key)) for key, sub in item.items()]
        elif isinstance(item, list | tuple):
            stack += [(sub, depth + 1, _join(path, index)) for index, sub in enumerate(item)]
        if total > limits.max_argument_chars:
            return f"{what} are over {limits.max_argument_chars} characters long: pass less (a path, a part of a text)"
    return None


def _digits(number: int) -> int:
    """How many decimal digits ``number`` has, without printing it (which fails past 4 300 digits)."""
    bits = abs(number).bit_length()
    if bits < 10_000:
        return len(str(abs(number)))
    return int(bits / _LOG2_10) + 1  # within one digit: enough to refuse it by


def _join(path: str, key: object) -> str:
    return f"{path}/{key}" if path else str(key)


def schema_problem(schema: Mapping[str, Any], limits: Limits) -> str | None:
    """Why a schema cannot be used, in one line (the path first), or None.

    Refused: a schema longer than ``max_schema_chars`` or nested deeper than ``max_schema_depth``;
    one that is not a valid JSON schema of its draft; then, walked the way jsonschema applies it
    (every subschema that ``referencing`` finds, every ``$ref`` resolved by ``referencing``, ``$id``
    rebasing included): a ``$ref`` that does not resolve, or that names anything but one of the
    schema's own definitions as ``#/$defs/NAME`` (or ``#/definitions/NAME``), since a schema is
    embedded in the step's schema, where no other reference survives; ``$dynamicRef`` and
    ``$recursiveRef``; a ``$ref`` cycle that applies a schema to the very value it is applied to
    (validating it never ends); a ``pattern`` or ``patternProperties`` key that
    :mod:`shapeloop.pattern` cannot run.
    """
    too_long = f"it is over {limits.max_schema_chars} characters as JSON (Limits.max_schema_chars)"
    # each node takes 2 characters or more, so a walk past half the limit need not go on
    problem = _nesting_problem(schema, limits.max_schema_depth, limits.max_schema_chars // 2, too_long=too_long)
    if problem is not None:
        return problem
    try:
        text = json.dumps(schema, default=_plain)
    except (ValueError, TypeError, RecursionError) as exc:
        return f"it is not plain JSON ({exc})"
    if len(text) > limits.max_schema_chars:
        return too_long
    return applied_problem(text)


def _plain(value: Any) -> Any:
    """A mapping that is not a dict (a ``MappingProxyType``) as a dict; anything else as its text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


def _nesting_problem(schema: Mapping[str, Any], most: int, nodes: int, *, too_long: str) -> str | None:
    """Why the schema nests too deep, ``too_long`` past ``nodes`` nodes, or None; without recursion."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        nodes -= 1
        if nodes < 0:
            return too_long
        item, depth = stack.pop()
        if depth > most:
            return f"it nests deeper than {most} levels (Limits.max_schema_depth)"
        if isinstance(item, Mapping):
            stack += [(sub, depth + 1) for sub in item.values()]
        elif isinstance(item, list):
            stack += [(sub, depth + 1) for sub in item]
    return None
