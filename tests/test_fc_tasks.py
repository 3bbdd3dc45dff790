"""The function-calling task set: its data, its call matcher and its answer checks (no model)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from benchmarks.fc_tasks import (
    CALL_TASKS,
    KINDS,
    OMIT,
    CallTask,
    Expected,
    any_answer,
    call_ok,
    canonical_args,
    first_call_ok,
    has_number,
    numbers_in,
    says_any,
    says_word,
    value_matches,
)
from hypothesis import given
from hypothesis import strategies as st

from shapeloop import Tool
from shapeloop.toolbox import Toolbox, ToolStatus
from shapeloop.tools import ToolCall

HERE = Path(".")
WITH_FIRST = [t for t in CALL_TASKS if t.first is not None]
SINGLE = [t for t in CALL_TASKS if t.kind in ("call", "choose", "nested")]
MULTI = [t for t in CALL_TASKS if t.kind == "multi"]
IRRELEVANT = [t for t in CALL_TASKS if t.first is None]


def _ids(tasks: list[CallTask]) -> list[str]:
    return [t.name for t in tasks]


def _tool(task: CallTask, name: str) -> Tool:
    return next(t for t in task.tools if t.name == name)


def _run(task: CallTask, expected: Expected, *, minimal: bool = False) -> str:
    result = Toolbox(task.tools).run(ToolCall(tool=expected.tool, args=canonical_args(expected.args, minimal=minimal)))
    assert result.status is ToolStatus.OK, result.text
    return result.text


# --- the set -----------------------------------------------------------------------------------


def test_the_set_has_unique_names_and_enough_tasks_of_every_kind() -> None:
    assert len({t.name for t in CALL_TASKS}) == len(CALL_TASKS)
    counts = Counter(t.kind for t in CALL_TASKS)
    assert set(counts) == set(KINDS)
    for kind, least in {"call": 22, "choose": 14, "nested": 12, "irrelevant": 20, "multi": 16}.items():
        assert counts[kind] >= least, kind
    assert all(t.name == t.name.lower() and " " not in t.name and "_" not in t.name for t in CALL_TASKS)


@pytest.mark.parametrize("task", CALL_TASKS, ids=_ids(list(CALL_TASKS)))
def test_every_task_offers_uniquely_named_tools_and_its_calls_name_one_of_them(task: CallTask) -> None:
    names = [t.name for t in task.tools]
    assert len(set(names)) == len(names)
    assert (task.first is None) == (task.kind == "irrelevant")
    assert bool(task.chain) == (task.kind == "multi")
    for expected in [task.first, *task.chain]:
        if expected is not None:
            assert expected.tool in names


def test_the_choose_tasks_offer_two_to_four_tools_and_the_multi_tasks_two_or_three_calls() -> None:
    assert all(2 <= len(t.tools) <= 4 for t in CALL_TASKS if t.kind == "choose")
    assert all(1 <= len(t.chain) <= 2 for t in MULTI)


@pytest.mark.parametrize("task", WITH_FIRST, ids=_ids(WITH_FIRST))
def test_allowed_values_agree_with_the_tool_schema(task: CallTask) -> None:
    for expected in [task.first, *task.chain]:
        assert expected is not None
        schema = _tool(task, expected.tool).parameters
        properties, required = schema["properties"], set(schema.get("required", []))
        assert set(expected.args) <= set(properties), "an argument the tool does not take"
        for name, allowed in expected.args.items():
            optional = any(one is OMIT for one in allowed)
            assert not (optional and name in required), f"{name} is required: OMIT may not be allowed"
            if optional and "default" in properties[name]:
                assert properties[name]["default"] in [a for a in allowed if a is not OMIT], (
                    f"{name}: a call that passes the default must match: list the default"
                )


# --- the first call ----------------------------------------------------------------------------


@pytest.mark.parametrize("task", WITH_FIRST, ids=_ids(WITH_FIRST))
def test_the_canonical_calls_validate_and_are_accepted(task: CallTask) -> None:
    assert task.first is not None
    chosen = _tool(task, task.first.tool)
    for minimal in (False, True):
        args = canonical_args(task.first.args, minimal=minimal)
        assert chosen.argument_errors(args) is None
        assert first_call_ok(task, chosen.name, args) == (True, "")


def _wrong(value: Any) -> Any:
    """A value that no allowed value of a task matches (a superstring, a longer list...)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1000.5
    if isinstance(value, str):
        return value + " extra"
    if isinstance(value, list):
        return [*value, value[0]] if value else [1]
    if isinstance(value, dict):
        key = next(iter(value))
        return {**value, key: _wrong(value[key])}
    return "x"


@pytest.mark.parametrize("task", WITH_FIRST, ids=_ids(WITH_FIRST))
def test_a_wrong_name_a_missing_or_extra_argument_and_every_wrong_value_are_rejected(task: CallTask) -> None:
    assert task.first is not None
    name, args = task.first.tool, canonical_args(task.first.args)
    assert not first_call_ok(task, name + "_v2", args)[0]
    assert first_call_ok(task, None, None) == (False, f"answered, but {name!r} fits the question")
    assert not first_call_ok(task, name, {**args, "verbose": True})[0]
    required = [key for key, allowed in task.first.args.items() if not any(one is OMIT for one in allowed)]
    assert required, "every task asks for at least one argument"
    for key in required:
        ok, why = first_call_ok(task, name, {k: v for k, v in args.items() if k != key})
        assert not ok and key in why
    for key, value in args.items():
        ok, why = first_call_ok(task, name, {**args, key: _wrong(value)})
        assert not ok and key in why, key


@pytest.mark.parametrize("task", IRRELEVANT, ids=_ids(IRRELEVANT))
def test_irrelevance_tasks_want_an_answer_not_a_call(task: CallTask) -> None:
    assert first_call_ok(task, None, None) == (True, "")
    for offered in task.tools:
        assert not first_call_ok(task, offered.name, {})[0]
    assert task.check("I can't do that with the tools I have.", HERE) and not task.check("  ", HERE)


# --- end to end --------------------------------------------------------------------------------


def _variants(spec: Any) -> list[Any]:
    """Every value an allowed spec accepts with one choice changed from the canonical one at a time."""
    if isinstance(spec, tuple):
        return [v for one in spec if one is not OMIT for v in _variants(one)]
    if isinstance(spec, dict):
        alternatives = {k: v if isinstance(v, tuple) else (v,) for k, v in spec.items()}
        fields = canonical_args(alternatives)
        out: list[Any] = [fields]
        for key, allowed in alternatives.items():
            if any(one is OMIT for one in allowed):
                out.append({k: v for k, v in fields.items() if k != key})
            out += [{**fields, key: v} for v in _variants(allowed)]
        return out
    if isinstance(spec, list):
        items = [canonical_args({"v": (one,)})["v"] for one in spec]
        return [items] + [[*items[:i], v, *items[i + 1 :]] for i, one in enumerate(spec) for v in _variants(one)]
    return [spec]


def _allowed_calls(expected: Expected) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = _variants(dict(expected.args))
    assert all(call_ok(expected, expected.tool, call)[0] for call in calls)
    return calls


@pytest.mark.parametrize("task", WITH_FIRST, ids=_ids(WITH_FIRST))
def test_every_allowed_first_call_validates_runs_and_is_accepted(task: CallTask) -> None:
    assert task.first is not None
    for args in _allowed_calls(task.first):
        assert first_call_ok(task, task.first.tool, args) == (True, ""), args
        result = Toolbox(task.tools).run(ToolCall(tool=task.first.tool, args=args))
        assert result.status is ToolStatus.OK, (args, result.text)
        if task.kind != "multi":
            assert task.check(result.text, HERE), (args, result.text)


@pytest.mark.parametrize("task", SINGLE, ids=_ids(SINGLE))
def test_the_right_call_gives_a_result_that_passes_the_check_and_the_question_does_not(task: CallTask) -> None:
    assert task.first is not None
    for minimal in (False, True):
        assert task.check(f"Here it is: {_run(task, task.first, minimal=minimal)}", HERE)
    assert not task.check(task.prompt, HERE), "the check passes on the question itself"


@pytest.mark.parametrize("task", MULTI, ids=_ids(MULTI))
def test_the_chain_needs_every_result_and_only_its_last_passes_the_check(task: CallTask) -> None:
    assert task.first is not None
    results = [_run(task, expected) for expected in (task.first, *task.chain)]
    *earlier, last = results
    assert task.check(f"The answer: {last}", HERE)
    for text in [task.prompt, *earlier]:
        assert not task.check(text, HERE), f"passes before the chain is done: {text}"
    carried = [
        value
        for expected in task.chain
        for value in canonical_args(expected.args).values()
        if str(value) not in task.prompt and any(str(value) in text for text in earlier)
    ]
    assert carried, "no later call takes a value that only an earlier result gives"
    for expected in task.chain:
        for args in _allowed_calls(expected):
            result = Toolbox(task.tools).run(ToolCall(tool=expected.tool, args=args))
            assert result.status is ToolStatus.OK, (args, result.text)
    for args in _allowed_calls(task.chain[-1]):
        assert task.check(Toolbox(task.tools).run(ToolCall(tool=task.chain[-1].tool, args=args)).text, HERE), args


# --- the matching rules ------------------------------------------------------------------------

_SPEC = Expected(
    tool="book",
    args={
        "count": (5,),
        "city": ("Lisbon", "Lisbon, Portugal"),
        "flag": (True,),
        "unit": (OMIT, "celsius"),
        "stops": (["Lyon", "Geneva"],),
        "where": ({"street": "Main St 1", "zip": ("0150", "150"), "floor": (OMIT, 2)},),
        "items": ([{"name": "egg", "qty": (2, 3)}],),
    },
)
_GOOD: dict[str, Any] = {
    "count": 5,
    "city": "Lisbon",
    "flag": True,
    "stops": ["Lyon", "Geneva"],
    "where": {"street": "Main St 1", "zip": "0150"},
    "items": [{"name": "egg", "qty": 2}],
}


def test_numbers_compare_numerically_but_strings_and_bools_are_not_numbers() -> None:
    assert value_matches(5.0, 5) and value_matches(5, 5.0) and value_matches(-0.5, -0.5)
    assert not value_matches("5", 5) and not value_matches(5, "5")
    assert not value_matches(True, 1) and not value_matches(1, True) and not value_matches(0, False)
    assert value_matches(False, False) and not value_matches(None, 0)


def test_strings_compare_after_strip_and_casefold_and_never_as_substrings() -> None:
    assert value_matches("  LISBON ", "Lisbon") and value_matches("straße", "STRASSE")
    assert not value_matches("Lisbon, Portugal", "Lisbon") and not value_matches("Lis", "Lisbon")
    assert not value_matches("Lis bon", "Lisbon")


def test_lists_match_in_order_and_dicts_by_key() -> None:
    assert value_matches([1, 2], [1, 2]) and not value_matches([2, 1], [1, 2]) and not value_matches([1], [1, 2])
    assert value_matches({"a": 1, "b": "X"}, {"a": 1, "b": ("x", "y")})
    assert not value_matches({"a": 1}, {"a": 1, "b": "x"}) and not value_matches({"a": 1, "c": 2}, {"a": 1})
    assert value_matches({"a": 1}, {"a": 1, "b": (OMIT, "x")})
    assert value_matches([{"q": 2.0}], [{"q": (2, 3)}]) and not value_matches([{"q": 4}], [{"q": (2, 3)}])


def test_a_call_matches_with_optional_arguments_left_out_or_set_to_an_allowed_value() -> None:
    assert call_ok(_SPEC, "book", _GOOD) == (True, "")
    assert call_ok(_SPEC, "book", {**_GOOD, "unit": "Celsius", "where": {**_GOOD["where"], "floor": 2}})[0]
    for bad, word in [
        ({**_GOOD, "unit": "kelvin"}, "unit"),
        ({**_GOOD, "count": "5"}, "count"),
        ({**_GOOD, "flag": 1}, "flag"),
        ({**_GOOD, "stops": ["Geneva", "Lyon"]}, "stops"),
        ({**_GOOD, "where": {"street": "Main St 1"}}, "where"),
        ({**_GOOD, "items": [{"name": "egg", "qty": 4}]}, "items"),
        ({k: v for k, v in _GOOD.items() if k != "city"}, "city"),
        ({**_GOOD, "colour": "red"}, "colour"),
    ]:
        ok, why = call_ok(_SPEC, "book", bad)
        assert not ok and word in why, (bad, why)
    assert call_ok(_SPEC, "Book", _GOOD) == (False, "called 'Book', expected 'book'")


def test_canonical_args_take_the_first_allowed_value_and_minimal_ones_leave_out_the_optional() -> None:
    full = canonical_args(_SPEC.args)
    assert full["unit"] == "celsius" and full["where"] == {"street": "Main St 1", "zip": "0150", "floor": 2}
    minimal = canonical_args(_SPEC.args, minimal=True)
    assert "unit" not in minimal and minimal["where"] == {"street": "Main St 1", "zip": "0150"}
    assert call_ok(_SPEC, "book", full)[0] and call_ok(_SPEC, "book", minimal)[0]


# --- the answer checks -------------------------------------------------------------------------


def test_words_match_whole_words_only() -> None:
    assert not says_word("no")("It is snowing in Oslo.", HERE)
    assert says_word("no")("No, they are different cities.", HERE)
    assert says_word("data engineer", "c14")("Gate C14; a Data  Engineer post.", HERE)
    assert not says_word("c14")("gate C145", HERE) and not says_word("tuesday")("tuesdays", HERE)
    assert says_any("2nd", "second")("They are second.", HERE) and not says_any("2nd")("22nd", HERE)
    assert says_word("t.ortega@corp.example")("Mail t.ortega@corp.example.", HERE)


def test_a_yes_no_question_is_judged_by_what_the_answer_says_not_by_one_word() -> None:
    """The task "is flight LH 454 on time today??": "delayed" was the one word taken, and "The flight LH 454 is
    not on time today." was scored a failure while "LH 454 is not delayed." passed."""
    check = next(t for t in CALL_TASKS if t.name == "flight-status").check
    for right in (
        "LH454: delayed 35 minutes, new departure 14:05, gate B22",
        "The flight LH 454 is not on time today.",
        "No, it leaves 35 minutes late.",
        "It isn't on time: it is delayed by 35 minutes.",
    ):
        assert check(right, HERE), right
    for wrong in (
        "LH 454 is not delayed.",
        "Yes, LH 454 is on time.",
        "The flight is on time, with no delay.",
        "LH 454 departs at 14:05 from gate B22.",
        "I have no information about flight LH 454.",
        "No flight LH 454 was found today.",
        "LH 454 is scheduled on time, no changes.",
        "LH 454 isn\u2019t delayed.",
        "",
    ):
        assert not check(wrong, HERE), wrong


def test_numbers_match_whole_numbers_only() -> None:
    assert not has_number(23)("The code is 1234.", HERE) and not has_number(23)("23.5 degrees", HERE)
    assert has_number(709000)("About 709,000 people.", HERE) and has_number(-7)("It is -7 °C.", HERE)
    assert has_number(317.45)("Total: 317.45 EUR.", HERE) and has_number(35)("The mean is 35.0.", HERE)
    assert has_number(3.107, tolerance=0.01)("about 3.11 miles", HERE)
    assert not has_number(3.107, tolerance=0.01)("about 3.09 miles", HERE)
    assert numbers_in("on 2024-03-05, v3.2.1, 1,2,3") == [2024, 3, 5, 1, 2, 3]
    assert not any_answer("", HERE) and any_answer("ok", HERE)


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=9))
def test_a_number_is_found_with_separators_and_not_inside_a_longer_one(n: int, digit: int) -> None:
    assert has_number(n)(f"about {n:,} of them.", HERE) and has_number(n)(f"(id{n})", HERE)
    assert not has_number(n)(f"about {n}{digit} of them", HERE) and not has_number(n)(f"id {digit}{n}", HERE)


# --- the tools -------------------------------------------------------------------------------


def test_tools_say_what_went_wrong_with_unknown_inputs() -> None:
    task = next(t for t in CALL_TASKS if t.name == "weather-default-unit")
    result = Toolbox(task.tools).run(ToolCall(tool="get_weather", args={"city": "Atlantis"}))
    assert result.status is ToolStatus.ERROR and "known" in result.text and "oslo" in result.text
    task = next(t for t in CALL_TASKS if t.name == "integral-python")
    args = {"python_expression": "x^2", "lower": 0, "upper": 1}
    result = Toolbox(task.tools).run(ToolCall(tool="integrate", args=args))
    assert result.status is ToolStatus.ERROR and "x**2" in result.text
    args = {"python_expression": "1/x", "lower": 0, "upper": 1}
    result = Toolbox(task.tools).run(ToolCall(tool="integrate", args=args))
    assert result.status is ToolStatus.ERROR and "cannot be evaluated" in result.text
    task = next(t for t in CALL_TASKS if t.name == "sql-count")
    result = Toolbox(task.tools).run(ToolCall(tool="run_sql", args={"query": "DROP TABLE customers"}))
    assert result.status is ToolStatus.ERROR and "SELECT" in result.text


def test_about_half_of_the_tools_come_from_typed_functions() -> None:
    tools = {t.name: t for task in CALL_TASKS for t in task.tools}
    typed = [t for t in tools.values() if hasattr(t.fn, "__wrapped__")]
    assert 0.35 <= len(typed) / len(tools) <= 0.65, (len(typed), len(tools))
    names = list(tools)
    assert any("." in n for n in names) and any(n != n.lower() for n in names) and any("_" in n for n in names)


def _undocumented(schema: Any, path: str) -> list[str]:
    missing = []
    for name, spec in schema.get("properties", {}).items():
        if "description" not in spec:
            missing.append(path + name)
        missing += _undocumented(spec, f"{path}{name}.")
        if isinstance(spec.get("items"), dict):
            missing += _undocumented(spec["items"], f"{path}{name}[].")
    return missing


def test_every_parameter_of_every_tool_is_documented() -> None:
    tools = {t.name: t for task in CALL_TASKS for t in task.tools}
    assert all(t.description for t in tools.values())
    assert [(n, _undocumented(t.parameters, "")) for n, t in tools.items() if _undocumented(t.parameters, "")] == []
