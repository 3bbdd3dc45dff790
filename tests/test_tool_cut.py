"""ToolCut (issue 47, item 5): over a share of the window, a step offers the tools closest to the request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step
from shapeloop import ScriptedBrain, Tool, run_agent
from shapeloop.cli import main
from shapeloop.events import PolicyIntervened
from shapeloop.policies import DEFAULT, available, resolve
from shapeloop.policies.tool_cut import ToolCut, documentation_tokens


def _tools(count: int) -> list[Tool]:
    made = [
        Tool(name=f"widget_{i}", description=f"Polish widget number {i} until it shines, with gadgets and cloths.",
             parameters={"type": "object", "properties": {"x": {"type": "string", "description": "which widget"}}},
             fn=lambda **args: "ok")
        for i in range(count)
    ]  # fmt: skip
    made.append(Tool(name="get_current_time", description="Get the current time in a timezone.",
                     parameters={"type": "object", "properties": {"timezone": {"type": "string"}}},
                     fn=lambda **args: "12:00"))  # fmt: skip
    return made


def _brain(seen: list[str]) -> ScriptedBrain:
    def reply(messages: Any, schema: Any) -> str:
        seen.append(messages[0]["content"])
        if len(seen) == 1:
            return json.dumps({"reason": "r", "action": "tool", "tool": "get_current_time",
                               "args": {"timezone": "Asia/Tokyo"}, "answer": ""})  # fmt: skip
        return json.dumps({"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "12:00"})

    return ScriptedBrain(reply)


def test_over_the_share_a_step_offers_and_documents_only_the_closest_tools() -> None:
    seen: list[str] = []
    run = run_agent(_brain(seen), _tools(30), "What time is it in Tokyo?", policies=(ToolCut(window=2048, keep=3),))
    assert run.ok
    assert all(prompt.count("widget_") == 2 and "get_current_time" in prompt for prompt in seen)
    shaped = [e for e in run.events if isinstance(e, PolicyIntervened)]
    assert [e.change for e in shaped] == ["offered 3 of 31 tools"] * 2
    assert shaped[0].reason.startswith("the 31 tools' documentation takes about ")
    said = "over 40% of the 2048-token window: offered the 3 closest to the request (get_current_time, "
    assert said in shaped[0].reason


def test_under_the_share_nothing_changes() -> None:
    seen: list[str] = []
    run = run_agent(_brain(seen), _tools(30), "What time is it in Tokyo?", policies=(ToolCut(window=100_000),))
    assert run.ok and not [e for e in run.events if isinstance(e, PolicyIntervened)]
    assert seen[0].count("widget_") == 30


def test_a_tool_called_already_stays_offered() -> None:
    cut = ToolCut(window=1024, keep=1).for_run("Polish widget 7", _tools(20))
    from shapeloop.policies.base import CallOutcome, RunView
    from shapeloop.toolbox import ToolStatus
    from shapeloop.tools import ToolCall

    tools = tuple(_tools(20))
    done = CallOutcome(call=ToolCall(tool="get_current_time", args={}), status=ToolStatus.OK, text="12:00")
    view = RunView(task="Polish widget 7", tools=tools, messages=(), calls=(done,), step=2, max_steps=5)
    shape = cut.shape_step(view)
    assert shape is not None and shape.tools is not None and "get_current_time" in shape.tools and len(shape.tools) == 2


def test_the_estimate_and_the_settings() -> None:
    assert documentation_tokens([]) == 0 and documentation_tokens(_tools(10)) > documentation_tokens(_tools(1))
    for bad in ({"window": 10}, {"share": 0}, {"share": 1.5}, {"keep": 0}, {"keep": True}):
        with pytest.raises(ValueError):
            ToolCut(**bad)  # type: ignore[arg-type]


def test_tool_cut_is_a_named_policy_for_resolve_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "tool-cut" in available()
    [cut] = resolve("tool-cut")
    assert isinstance(cut, ToolCut) and cut.name == "tool-cut"
    assert [p.name for p in resolve("default,tool-cut,-tool-cut")] == [p.name for p in DEFAULT]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([answer_step("teal")]))
    args = ["run", "t", "--root", str(tmp_path), "--script", str(script), "--json", "--policies", "tool-cut"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["policies"] == ["tool-cut"]
