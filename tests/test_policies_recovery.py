"""Recovery (issue 33): after a failed call, a note naming what to change, in the tool's own words and
from the tool's schema, with the caller's state line; an answer that only repeats the error is put
back once. On hand-built views, in English, German and Chinese, and through run_agent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from helpers import answer_step, tool_step
from shapeloop import Message, Request, ScriptedBrain, Tool, ToolCall, ToolStatus, run_agent, tool
from shapeloop.errors import ToolFailure
from shapeloop.policies import CallOutcome, RunView
from shapeloop.policies.recovery import Recovery

MV = Tool(
    name="mv",
    description="Move a file.",
    parameters={
        "type": "object",
        "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
        "required": ["source", "destination"],
    },
    fn=lambda **args: "moved",
)
WEATHER = Tool(
    name="weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
    fn=lambda **args: "sunny",
)


def view(calls: Sequence[CallOutcome], task: str = "Move log.txt to archive.") -> RunView:
    messages = (Message(role="system", content="prompt"), Message(role="user", content=task))
    return RunView(task=task, tools=(MV, WEATHER), messages=messages, calls=tuple(calls), step=2, max_steps=12)


def failed(tool: str, text: str, **args: Any) -> CallOutcome:
    return CallOutcome(call=ToolCall(tool=tool, args=args), status=ToolStatus.ERROR, text=text)


@pytest.mark.parametrize(
    ("text", "args", "named"),
    [
        ("ERROR: mv: cannot move 'log.txt': No such file or directory", {"source": "log.txt"}, "source='log.txt'"),
        ("ERROR: Datei „bericht.txt“ nicht gefunden", {"source": "bericht.txt"}, "source='bericht.txt'"),
        ("ERROR: 找不到文件 报告.txt", {"source": "报告.txt"}, "source='报告.txt'"),
    ],
)
def test_after_a_failure_the_note_names_the_value_the_tools_message_names(
    text: str, args: dict[str, str], named: str
) -> None:
    outcome = failed("mv", text, **args, destination="archive")
    shape = Recovery().for_run("t", [MV]).shape_step(view([outcome]))
    assert shape is not None and shape.tools is None and shape.answer == "may"
    lines = shape.note.splitlines()
    assert lines[0] == f"{outcome.call} failed; the tool said: {text.removeprefix('ERROR: ')}"
    assert named in lines[1] and "destination=" not in lines[1]  # the value the message does not name is left
    assert lines[-1] == "Do not make the same call again."


def test_a_value_outside_the_schemas_choices_is_shown_with_them() -> None:
    outcome = failed("weather", "ERROR: invalid arguments", city="Wien", unit="kelvin")
    shape = Recovery().shape_step(view([outcome]))
    assert shape is not None and "unit takes one of: celsius, fahrenheit." in shape.note
    assert "Its message names" not in shape.note  # the message names neither value


def test_the_callers_state_line_is_shown_after_a_failure_only() -> None:
    policy = Recovery(state=lambda: "current folder: /workspace")
    shape = policy.shape_step(view([failed("mv", "ERROR: no such file", source="a", destination="b")]))
    assert shape is not None and "Now: current folder: /workspace" in shape.note
    ok = CallOutcome(call=ToolCall(tool="mv", args={}), status=ToolStatus.OK, text="moved")
    assert policy.shape_step(view([ok])) is None and policy.shape_step(view([])) is None


@pytest.mark.parametrize(
    ("error", "answer"),
    [
        (
            "ERROR: mv: cannot move 'log.txt': No such file or directory",
            "mv: cannot move 'log.txt': No such file or directory.",
        ),
        ("ERROR: 找不到文件 报告.txt，请检查路径", "找不到文件 报告.txt，请检查路径"),
    ],
)
def test_an_answer_that_repeats_the_error_is_put_back_once(error: str, answer: str) -> None:
    policy = Recovery().for_run("t", [MV])
    at = view([failed("mv", error, source="x")])
    objection = policy.check_answer(at, answer)
    assert objection is not None and "not the task done" in objection.feedback
    assert policy.check_answer(at, answer) is None  # given again, it stands
    assert Recovery(object_to_echo=False).check_answer(at, answer) is None


def test_an_answer_after_a_failure_that_says_something_else_stands() -> None:
    at = view([failed("mv", "ERROR: mv: cannot move 'log.txt': No such file or directory", source="log.txt")])
    assert Recovery().check_answer(at, "log.txt is not here; it may have been moved already.") is None
    short = view([failed("mv", "ERROR: no", source="log.txt")])
    assert Recovery().check_answer(short, "no") is None  # too short to tell an echo


def test_through_run_agent_the_note_follows_a_failure_and_nothing_is_refused() -> None:
    seen: list[Request] = []
    replies = [
        tool_step("fetch", key="colour "),
        tool_step("fetch", key="colour"),
        answer_step("red"),
    ]

    @tool
    def fetch(key: str) -> str:
        """Fetch a key."""
        if key != "colour":
            raise ToolFailure(f"Schlüssel {key!r} unbekannt")
        return "red"

    def brain(request: Request) -> str:
        seen.append(request)
        return replies.pop(0)

    run = run_agent(ScriptedBrain(brain), [fetch], "Welche Farbe?", policies=[Recovery()])
    assert run.ok and run.answer == "red"
    notes = [r.messages[-1]["content"] for r in seen]
    assert notes[1].startswith('fetch({"key": "colour "}) failed') and "key='colour '" in notes[1]
    assert not notes[2].startswith("fetch(")  # after the call that worked, no note
    assert run.interventions == {"recovery": 1}
    assert not [e for e in run.events if e.kind == "call_refused"]
