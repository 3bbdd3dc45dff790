import dataclasses
import io
import json
from pathlib import Path

import pytest

from helpers import answer_step, tool_step
from shapeloop import ConsoleSink, JsonlSink, ScriptedBrain, StopReason, run_agent, tool
from shapeloop.events import RunStopped, ThoughtGiven


@tool
def lookup(key: str) -> str:
    """Look up."""
    return "red"


def test_events_are_frozen() -> None:
    event = ThoughtGiven(step=1, text="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.text = "y"  # type: ignore[misc]


def test_transcript_holds_every_message_and_event_in_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    run = run_agent(
        ScriptedBrain([tool_step("lookup", key="c"), answer_step("red")]),
        [lookup],
        "Colour?",
        transcript_path=path,
    )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == run.transcript.entries
    assert [line.get("role") or line["kind"] for line in lines] == [
        "system", "user", "step", "reply", "assistant", "thought", "tool_call", "tool_result", "user",
        "step", "reply", "assistant", "thought", "answer", "stop",
    ]  # fmt: skip
    assert lines[7]["call"] == {"tool": "lookup", "args": {"key": "c"}} and lines[7]["status"] == "ok"
    assert len(run.messages) == 5


def test_jsonl_sink_streams_events_as_they_happen(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    brain = ScriptedBrain([tool_step("lookup", key="c"), KeyboardInterrupt()])
    run_agent(brain, [lookup], "t", on_event=JsonlSink(path))
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["step", "reply", "thought", "tool_call", "tool_result", "step", "stop"]


def test_console_sink_layout() -> None:
    out = io.StringIO()
    run_agent(
        ScriptedBrain([tool_step("lookup", reason="look it up", key="c"), answer_step("red")]),
        [lookup],
        "t",
        on_event=ConsoleSink(out, color=False),
    )
    assert out.getvalue().splitlines() == [
        "── step 1 (constrained)",
        "  thought  look it up",
        '  call     lookup({"key": "c"})',
        "  ok       [3 chars] red",
        "── step 2 (constrained)",
        "  thought  done",
        "  answer   red",
        "■ answered: answered after 2 steps",
    ]


def test_console_sink_colours_only_when_asked() -> None:
    out = io.StringIO()
    ConsoleSink(out, color=True)(RunStopped(step=1, stop=StopReason.STUCK, reason="stuck: x"))
    assert out.getvalue().startswith("\x1b[1;31m■ stuck")
    assert ConsoleSink(io.StringIO()).color is False  # not a terminal
