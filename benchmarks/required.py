"""Required vs optional fields: how often a step names an action with no tool (the "action with no
verb" failure), with every field required vs ``tool`` and ``args`` optional, same model, same prompts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchmarks.tasks import WORKSPACE, Task
from shapeloop import Brain, Message, Request, flat_schema, workspace_tools
from shapeloop.prompts import system_prompt


def optional_schema() -> dict[str, Any]:
    """The flat step schema with ``tool`` and ``args`` left optional."""
    schema = flat_schema()
    schema["required"] = ["reason", "action", "answer"]
    return schema


def measure(brain: Brain, tasks: Sequence[Task]) -> dict[str, Any]:
    """Ask each task's first step under both schemas; count steps that act with no tool named."""
    tools = workspace_tools(WORKSPACE)
    rows: list[dict[str, Any]] = []
    for task in tasks:
        messages = [
            Message(role="system", content=system_prompt(tools, prose=True)),
            Message(role="user", content=task.prompt),
        ]
        for name, schema in (("required", flat_schema()), ("optional", optional_schema())):
            reply = brain.ask(Request(messages=messages, schema=schema))
            try:
                step = json.loads(reply.text)
            except ValueError:
                step = {}
            verbless = step.get("action") == "tool" and not step.get("tool")
            rows.append({"task": task.name, "schema": name, "verbless": verbless, "text": reply.text,
                         "action": step.get("action"), "fields": sorted(step)})  # fmt: skip
    summary = {}
    for name in ("required", "optional"):
        mine = [r for r in rows if r["schema"] == name]
        tool_steps = [r for r in mine if r["action"] == "tool"]
        summary[name] = {
            "steps": len(mine),
            "tool_steps": len(tool_steps),
            "verbless": sum(r["verbless"] for r in mine),
            "verbless_rate_of_tool_steps": round(sum(r["verbless"] for r in tool_steps) / (len(tool_steps) or 1), 3),
        }
    return {"summary": summary, "runs": rows}
