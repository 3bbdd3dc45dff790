"""Issue 35's property tests: the extractor, the argument checks and the transcript's JSON on big
integers, NaN and Infinity, deep nesting and huge strings. Nothing raises; what comes out is JSON a
strict reader takes; a value out of bounds is refused, one within them is not."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shapeloop.extract import extract_step
from shapeloop.limits import Limits, value_problem
from shapeloop.pattern import Pattern
from shapeloop.text import to_json
from shapeloop.tools import ToolCall, tool

LIMITS = Limits()

big_ints = st.integers(min_value=1, max_value=30).map(lambda n: 10 ** (n * 200) - 1) | st.integers()
specials = st.sampled_from([math.nan, math.inf, -math.inf])
scalars = st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20) | big_ints
values = st.recursive(
    scalars | specials,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"bare {constant}")

    return json.loads(text, parse_constant=refuse)


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def bad(value: Any) -> bool:
    """Whether ``value`` holds a number the limits refuse (checked the slow, plain way)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value).bit_length() > 14_000 or len(str(abs(value))) > LIMITS.max_integer_digits
    if isinstance(value, list):
        return any(bad(v) for v in value)
    if isinstance(value, dict):
        return any(bad(v) for v in value.values())
    return False


@given(values)
def test_any_value_is_written_as_strict_json(value: Any) -> None:
    strict(to_json({"args": value}))


@given(values)
def test_a_value_with_nan_infinity_or_a_huge_integer_is_refused_as_arguments(value: Any) -> None:
    problem = value_problem({"a": value}, LIMITS)
    if bad(value):
        assert problem is not None
    fine = {"a": value} if problem is None else None
    if fine is not None:
        strict(json.dumps(fine))


@given(st.integers(min_value=0, max_value=200))
def test_nesting_is_refused_past_the_limit(depth: int) -> None:
    problem = value_problem(nested(depth, 1), LIMITS)
    assert (problem is not None) == (depth > LIMITS.max_depth)


@given(st.integers(min_value=0, max_value=300_000))
def test_a_huge_string_is_refused_past_the_limit_and_the_check_is_cheap(size: int) -> None:
    problem = value_problem({"text": "x" * size}, LIMITS)
    assert (problem is not None) == (size + 4 > LIMITS.max_argument_chars)


@given(st.integers(min_value=1, max_value=6000), st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", ""]))
def test_the_extractor_never_raises_on_big_integers_and_non_numbers(digits: int, constant: str) -> None:
    number = constant or "1" + "0" * (digits - 1)
    reply = f'x {{"reason":"r","action":"tool","tool":"f","args":{{"a":{number}}},"answer":""}} y'
    found = extract_step(reply)
    if constant or digits > LIMITS.max_integer_digits:
        assert found.step is None and found.error is not None and "invalid JSON" in found.error
    else:
        assert found.step is not None and found.step.args == {"a": int(number)}


@given(st.integers(min_value=1, max_value=100_000), st.sampled_from(["[", "{", '{"a":']))
def test_the_extractor_never_raises_on_deep_nesting(depth: int, opener: str) -> None:
    extract_step('{"reason":"r","action":"answer","tool":"","args":{},"answer":' + opener * depth)


@given(st.text(alphabet="ab!", max_size=40))
def test_the_pattern_engine_agrees_with_re_on_a_pattern_that_backtracks(text: str) -> None:
    assert Pattern("^(a+)+$").search(text) == bool(re.fullmatch("a+", text))


@given(values)
def test_a_call_with_any_arguments_has_a_key_and_a_problem_or_none(value: Any) -> None:
    @tool
    def f(a: float) -> str:
        """F."""
        return str(a)

    call = ToolCall(tool="f", args={"a": value})
    assert isinstance(call.key, str) and isinstance(str(call), str)
    problem = f.argument_errors(call.args)
    if bad(value):
        assert problem is not None
