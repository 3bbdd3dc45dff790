"""TestBrain: a valid reply for any schema, with no model."""

import json

import jsonschema
import pytest
from pydantic import BaseModel

from shapeloop import Request, TestBrain, ToolStatus, flat_schema, run_agent, step, step_schema, tool
from shapeloop.doubles import write_value
from shapeloop.events import ToolReturned


class Point(BaseModel):
    x: int
    label: str


@tool
def move(to: Point, steps: int, mode: str = "walk") -> str:
    """Move somewhere."""
    return f"moved to {to.label} in {steps}"


@tool
def look() -> str:
    """Look around."""
    return "a room"


def test_a_run_calls_each_tool_once_with_valid_arguments_then_answers() -> None:
    brain = TestBrain(answer="all done")
    run = run_agent(brain, [move, look], "Go.")
    results = [e for e in run.events if isinstance(e, ToolReturned)]
    assert [r.call.tool for r in results] == ["move", "look"]
    assert all(r.status is ToolStatus.OK for r in results), [r.text for r in results]
    assert run.ok and run.answer == "all done" and run.steps == 3


def test_native_mode_calls_each_tool_then_answers_in_text() -> None:
    run = run_agent(TestBrain(), [move, look], "Go.", mode="native")
    assert [e.call.tool for e in run.events if isinstance(e, ToolReturned)] == ["move", "look"]
    assert run.ok and run.answer == "done" and run.mode.value == "native"


def test_flat_schema_and_prose_get_the_answer_at_once() -> None:
    # a flat schema under the default (batch) step opens the calls' names: the brain calls no tool "a"
    for options in ({"schema": "flat"}, {"mode": "prose"}, {"schema": "flat", "batch": False}):
        run = run_agent(TestBrain(answer="42"), [look], "t", **options)  # type: ignore[arg-type]
        assert run.ok and run.answer == "42" and run.steps == 1
        assert not [e for e in run.events if isinstance(e, ToolReturned)]


def test_in_either_step_shape_its_own_answer_comes_after_the_calls_or_at_once_without_tools() -> None:
    for batch in (True, False):
        run = run_agent(TestBrain(answer="all done"), [look], "Go.", batch=batch)
        assert [e.call.tool for e in run.events if isinstance(e, ToolReturned)] == ["look"]
        assert run.ok and run.answer == "all done" and run.steps == 2
        run = run_agent(TestBrain(answer="42"), [], "t", batch=batch)
        assert run.ok and run.answer == "42" and run.steps == 1
    step = json.loads(TestBrain().ask(Request(messages=[], schema=step_schema([look, move], batch=True))).text)
    assert step == {"calls": [{"name": "look", "arguments": {}}]}


def test_any_schema_gets_a_valid_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2},
            "score": {"type": "number", "exclusiveMinimum": 3},
            "name": {"type": "string", "minLength": 4},
            "maybe": {"type": ["null", "integer"], "minimum": 7},
            "point": {"$ref": "#/$defs/Point"},
        },
        "required": ["tags", "score", "name", "maybe", "point"],
        "$defs": {"Point": Point.model_json_schema()},
    }
    reply = TestBrain().ask(Request(messages=[], schema=schema))
    value = json.loads(reply.text)
    jsonschema.validate(value, schema)
    assert value["maybe"] == 7 and value["tags"] == ["x", "x"] and reply.applied == "schema"


def test_the_step_schema_variants_are_taken_in_turn() -> None:
    schema = step_schema([move, look])
    replies = [
        json.loads(TestBrain().ask(Request(messages=[{"role": "assistant", "content": "."}] * n, schema=schema)).text)
        for n in range(4)
    ]
    assert [r["tool"] for r in replies] == ["move", "look", "", "move"]
    assert json.loads(TestBrain().ask(Request(messages=[], schema=flat_schema())).text)["action"] == "answer"


def test_a_schema_it_cannot_satisfy_says_what() -> None:
    with pytest.raises(ValueError, match="cannot write a value of type 'blob'"):
        write_value({"type": "blob"})
    with pytest.raises(ValueError, match="cannot resolve"):
        write_value({"$ref": "#/$defs/Missing"})
    with pytest.raises(ValueError, match=r"cannot write a string that matches '\^\[0-9\]\+\$'"):
        write_value({"type": "string", "pattern": "^[0-9]+$"})


def test_a_pattern_with_a_literal_start_is_written_from_it() -> None:
    # the loop leads a forced answer's reason (step.led): the test brain writes the lead
    led = step.led(step_schema([move]), "The result says")
    reply = json.loads(TestBrain().ask(Request(messages=[{"role": "assistant", "content": "."}], schema=led)).text)
    assert reply["reason"] == "The result says"
    assert write_value({"type": "string", "pattern": "^a+$", "minLength": 3}) == "aaa"
