"""Issue 35, the rows on bounds: huge integers, NaN and Infinity, recursive or dangling ``$ref``,
patterns that backtrack, huge schemas and arguments. Each run-level test asserts the stop, the
reason the model was given, and that the transcript is JSON a strict reader takes.

The tests that set a :class:`~shapeloop.Limits` other than the default call the pieces that take
it (``Toolbox``, ``extract_step``, ``typed_answer``); ``run_agent`` passes its ``limits`` to them.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step
from shapeloop import Capabilities, Reply, ScriptedBrain, StopReason, Tool, run_agent, tool
from shapeloop.extract import extract_step
from shapeloop.limits import Limits, schema_problem, value_problem
from shapeloop.output import typed_answer
from shapeloop.pattern import Pattern, PatternRefused, bounded_validator
from shapeloop.text import to_json
from shapeloop.toolbox import Toolbox, ToolStatus
from shapeloop.tools import ToolCall

STEP = '{{"reason":"r","action":"{action}","tool":"{tool}","args":{args},"answer":{answer}}}'


def reply(*, action: str = "tool", tool: str = "", args: str = "{}", answer: str = '""') -> str:
    """A step written by hand, so it may hold what json.dumps would not write."""
    return STEP.format(action=action, tool=tool, args=args, answer=answer)


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """The transcript's entries, read as strict JSON: a bare NaN or Infinity fails the test."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"the transcript holds a bare {constant}")

    return [json.loads(line, parse_constant=refuse) for line in path.read_text(encoding="utf-8").splitlines()]


def events(path: Path, kind: str) -> list[dict[str, Any]]:
    return [entry for entry in strict_lines(path) if entry.get("kind") == kind]


@tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@tool
def echo(text: str) -> str:
    """Say a text back."""
    return text[:20]


# Row: an integer of more than 4 300 digits in a reply


def test_an_integer_of_5000_digits_in_a_reply_is_an_unreadable_step_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    big = reply(action="answer", answer="1" + "0" * 5000)
    run = run_agent(ScriptedBrain([big, answer_step("ok")]), [add], "t", transcript_path=path)
    assert run.stop is StopReason.ANSWERED and run.answer == "ok"
    (unreadable,) = events(path, "unreadable")
    assert "an integer longer than 1000 digits" in unreadable["error"]
    assert "integer longer than 1000 digits" in run.messages[-2]["content"]  # the model was told


def test_an_integer_of_5000_digits_as_a_native_argument_is_refused_by_the_call(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    call = ToolCall(tool="add", args={"a": 10**5000, "b": 1})
    brain = ScriptedBrain([Reply(text="", tool_calls=(call,)), "the sum is unknown"],
                          capabilities=Capabilities(native_tools=True))  # fmt: skip
    run = run_agent(brain, [add], "t", mode="native", transcript_path=path)
    assert run.stop is StopReason.ANSWERED
    (result,) = events(path, "tool_result")
    assert result["status"] == "error" and "an integer of 5001 digits; the most is 1000" in result["text"]
    (called,) = events(path, "tool_call")
    assert called["call"]["args"]["a"].startswith("<an integer of")  # written as text, never printed whole


# Row: a recursive or dangling $ref in output_type


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "#"}, "$ref '#' points at the schema itself"),
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing' dangles (no such definition)"),
        ({"type": "object", "properties": {"a": {"$ref": "http://example.com/x.json"}}}, "properties/a: $ref"),
        (
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}},
             "$ref": "#/$defs/a"},
            "recurses without end (#/$defs/a -> #/$defs/b -> #/$defs/a)",
        ),
    ],
)  # fmt: skip
def test_a_recursive_or_dangling_ref_in_output_type_is_refused_before_the_model_is_asked(
    schema: dict[str, Any], words: str
) -> None:
    brain = ScriptedBrain([answer_step("x")])
    with pytest.raises(ValueError, match="output_type's schema is refused") as caught:
        run_agent(brain, [add], "t", output_type=schema)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert brain.asked == []


def test_a_recursive_ref_that_goes_into_a_value_is_a_schema_like_any_other() -> None:
    kids = {"type": "array", "items": {"$ref": "#/$defs/node"}}
    tree = {
        "$defs": {"node": {"type": "object", "properties": {"kids": kids}, "required": ["kids"]}},
        "$ref": "#/$defs/node",
    }
    answer = {"kids": [{"kids": []}, {"kids": [{"kids": []}]}]}
    run = run_agent(ScriptedBrain([reply(action="answer", answer=json.dumps(answer))]), [add], "t", output_type=tree)
    assert run.stop is StopReason.ANSWERED and run.output == answer


# Row: a catastrophic-backtracking pattern


def test_a_backtracking_pattern_in_output_type_is_checked_in_linear_time() -> None:
    schema = {"type": "string", "pattern": "^(a+)+$"}
    brain = ScriptedBrain([reply(action="answer", answer=json.dumps("a" * 30 + "!")), answer_step("aaaa")])
    begun = time.monotonic()
    run = run_agent(brain, [add], "t", output_type=schema, max_seconds=10)
    assert time.monotonic() - begun < 5
    assert run.stop is StopReason.ANSWERED and run.output == "aaaa"
    assert "does not match '^(a+)+$'" in run.messages[-2]["content"]


def test_a_backtracking_pattern_in_a_tools_parameters_is_checked_in_linear_time() -> None:
    shout = Tool(
        name="shout", description="Shout a word.", fn=lambda word: word.upper(),
        parameters={"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
                    "required": ["word"]},
    )  # fmt: skip
    box = Toolbox([shout])
    begun = time.monotonic()
    refused = box.run(ToolCall(tool="shout", args={"word": "a" * 30 + "!"}))
    assert time.monotonic() - begun < 2
    assert refused.status is ToolStatus.ERROR and "does not match '^(a+)+$'" in refused.text
    assert box.run(ToolCall(tool="shout", args={"word": "aaa"})).text == "AAA"


def test_a_pattern_check_that_outlasts_its_time_bound_is_an_error_not_a_wait() -> None:
    validator = bounded_validator({"type": "string", "pattern": "^(a|b|ab|ba)*c$"}, 0.01)
    begun = time.monotonic()
    errors = list(validator.iter_errors("ab" * 200_000))
    assert time.monotonic() - begun < 2
    assert len(errors) == 1 and "could not be checked" in errors[0].message


@pytest.mark.parametrize("source", [r"(a)\1", r"(?=a)a", r"(?<!b)a", r"(a)?(?(1)a|b)"])
def test_a_pattern_that_needs_backtracking_is_refused_up_front_with_one_line(source: str) -> None:
    with pytest.raises(ValueError, match="needs a backtracking engine") as caught:
        typed_answer({"type": "string", "pattern": source})
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="tool 'w': its parameters schema is refused"):
        Toolbox(
            [Tool(name="w", description="d", fn=str, parameters={"type": "object", "patternProperties": {source: {}}})]
        )


# Row: a 5.8 MB schema


def test_a_schema_of_several_megabytes_is_refused_at_once() -> None:
    huge = {"type": "string", "enum": [f"value number {i}" for i in range(400_000)]}
    brain = ScriptedBrain([answer_step("x")])
    begun = time.monotonic()
    with pytest.raises(ValueError, match=r"over 200000 characters as JSON \(Limits.max_schema_chars\)"):
        run_agent(brain, [add], "t", output_type=huge, max_seconds=1)
    assert time.monotonic() - begun < 1 and brain.asked == []
    tool_with_it = Tool(name="pick", description="d", fn=str, parameters={"type": "object", "properties": {"v": huge}})
    with pytest.raises(ValueError, match="tool 'pick': its parameters schema is refused"):
        run_agent(brain, [tool_with_it], "t")
    assert schema_problem(huge, Limits(max_schema_chars=10_000_000)) is None  # a run may allow more


def test_a_schema_nested_past_the_limit_is_refused() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "array", "items": deep}
    with pytest.raises(ValueError, match="nests deeper than 64 levels"):
        typed_answer(deep)


# Row: a 50 MB argument


def test_a_50_mb_argument_is_refused_before_its_tool_runs(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    calls: list[str] = []

    @tool
    def keep(text: str) -> str:
        """Keep a text."""
        calls.append(text)
        return "kept"

    huge = json.dumps(
        {"reason": "r", "action": "tool", "tool": "keep", "args": {"text": "x" * 50_000_000}, "answer": ""}
    )
    begun = time.monotonic()
    run = run_agent(ScriptedBrain([huge, answer_step("could not keep it")]), [keep], "t", transcript_path=path)
    assert time.monotonic() - begun < 30
    assert run.stop is StopReason.ANSWERED and calls == []
    (result,) = events(path, "tool_result")
    assert result["status"] == "error" and "over 100000 characters long" in result["text"]


# Row: NaN and Infinity as arguments


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_in_a_reply_are_refused_and_never_written_bare(tmp_path: Path, constant: str) -> None:
    path = tmp_path / "run.jsonl"
    brain = ScriptedBrain([reply(tool="add", args=f'{{"a":{constant},"b":1}}'), answer_step("no sum")])
    run = run_agent(brain, [add], "t", transcript_path=path)
    assert run.stop is StopReason.ANSWERED and run.answer == "no sum"
    assert events(path, "tool_call") == []
    (unreadable,) = events(path, "unreadable")
    assert "invalid JSON" in unreadable["error"] and (
        "not JSON" in unreadable["error"] or "too large" in unreadable["error"]
    )


def test_nan_as_a_native_argument_is_refused_and_written_as_text(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    call = ToolCall(tool="add", args={"a": math.nan, "b": math.inf})
    brain = ScriptedBrain([Reply(text="", tool_calls=(call,)), "no sum"], capabilities=Capabilities(native_tools=True))
    run = run_agent(brain, [add], "t", mode="native", transcript_path=path)
    assert run.stop is StopReason.ANSWERED
    (result,) = events(path, "tool_result")
    assert result["status"] == "error" and "is not a JSON number: write a finite number" in result["text"]
    assert events(path, "tool_call")[0]["call"]["args"] == {"a": "NaN", "b": "Infinity"}
    assert json.loads(to_json(run.to_dict()), parse_constant=lambda c: pytest.fail(c))


def test_a_typed_answer_of_nan_is_refused() -> None:
    typed = typed_answer({"type": "number"})
    assert typed.check(math.nan).errors == ("NaN is not a JSON number: write a finite number",)
    assert typed.check("NaN").errors  # a string holding it is read strictly too
    assert typed.check(2.5).value == 2.5


# Limits are the run's, never the module's


def test_limits_are_arguments_with_defaults_and_are_checked() -> None:
    small = Limits(max_integer_digits=3, max_argument_chars=10, max_depth=2)
    assert extract_step(reply(action="answer", answer="12345"), limits=small).step is None
    assert extract_step(reply(action="answer", answer="12345")).step is not None
    assert value_problem({"t": "x" * 11}, small) is not None and value_problem({"t": "x" * 11}, Limits()) is None
    assert value_problem({"a": [[1]]}, small) == "a/0/0: the arguments nest deeper than 2 levels"
    box = Toolbox([echo], limits=small)
    assert "over 10 characters" in box.run(ToolCall(tool="echo", args={"text": "x" * 11})).text
    with pytest.raises(ValueError, match="max_depth must be at least 1"):
        Limits(max_depth=0)


def test_the_pattern_engine_agrees_with_re_on_what_it_runs() -> None:
    import re

    cases = [(r"^\d{3}-\d{4}$", "555-1234"), (r"(?i)^abc", "ABCd"), (r"\bcat\b", "concat"), (r"a$", "a\n"),
             (r"^(x|y){2,3}$", "xyxy"), (r"^[^a-c]+$", "xyz"), (r"colou?r", "the color"), (r"^$", "")]  # fmt: skip
    for source, text in cases:
        assert Pattern(source).search(text) == bool(re.search(source, text)), source
    with pytest.raises(PatternRefused):
        Pattern("(")


def test_run_agent_takes_its_limits_per_run() -> None:
    kept: list[str] = []

    @tool
    def keep(text: str) -> str:
        """Keep a text."""
        kept.append(text)
        return "kept"

    step = json.dumps({"reason": "r", "action": "tool", "tool": "keep", "args": {"text": "x" * 50}, "answer": ""})
    tight = Limits(max_argument_chars=20)
    run = run_agent(ScriptedBrain([step, answer_step("no")]), [keep], "t", limits=tight, policies=())
    assert kept == [] and run.ok
    run = run_agent(ScriptedBrain([step, answer_step("yes")]), [keep], "t", policies=())
    assert kept == ["x" * 50] and run.ok
    digits = '{"reason":"r","action":"answer","tool":"","args":{},"answer":' + "1" * 30 + "}"
    unread = [e.kind for e in run_agent(ScriptedBrain([digits, answer_step("ok")]), [], "t").events]
    assert "unreadable" not in unread, "30 digits are within the default limit"
    run = run_agent(ScriptedBrain([digits, answer_step("ok")]), [], "t", limits=Limits(max_integer_digits=10))
    assert "unreadable" in [e.kind for e in run.events], "past a 10-digit limit the reply is unreadable"
