"""The raw baseline: the same model asked once, with no loop.

One constrained call: every tool's JSON (name, description, parameters as given) in the system
prompt, the reply constrained to one call object per tool (its name fixed, its own argument schema)
or a direct answer. It never sees a tool's result, so it can only finish tasks that need no tool; on
the others it is scored on its first call. The loop's gain over this is what shapeloop is for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.suite import AnyTask, Progress, describe, fresh_workspace, judge_first, succeeded, tools_for
from shapeloop import Brain, Message, Request, Tool
from shapeloop.tooldoc import render_tools

PROMPT = """You can call these functions:
{functions}

Reply with one JSON object: {{"name": "<function name>", "arguments": {{...}}}} to call a function, or \
{{"answer": "..."}} to answer directly when the question needs no function or none of them fits."""


def raw_schema(tools: Sequence[Tool]) -> dict[str, Any]:
    """One variant per function (name fixed, its own arguments), and a direct answer."""
    variants: list[dict[str, Any]] = [
        {"type": "object", "properties": {"name": {"const": t.name}, "arguments": _closed(t.parameters)},
         "required": ["name", "arguments"], "additionalProperties": False}
        for t in tools
    ]  # fmt: skip
    variants.append({"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}},
                     "required": ["answer"], "additionalProperties": False})  # fmt: skip
    return {"anyOf": variants}


def _closed(parameters: Any) -> dict[str, Any]:
    args = dict(parameters)
    args.setdefault("type", "object")
    args.setdefault("additionalProperties", False)
    return args


def messages(tools: Sequence[Tool], prompt: str) -> list[Message]:
    system = PROMPT.format(functions=render_tools(tools, "json"))  # the library's own rendering, as the loop's
    return [Message(role="system", content=system), Message(role="user", content=prompt)]


def run_raw(brain: Brain, task: AnyTask) -> dict[str, Any]:
    """Ask once; score the call (or the answer) it makes."""
    with fresh_workspace() as root:
        tools = tools_for(task, root)
        started = time.perf_counter()
        reply = brain.ask(Request(messages=messages(tools, task.prompt), schema=raw_schema(tools)))
        seconds = time.perf_counter() - started
        try:
            data = json.loads(reply.text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            data = {}
        answer = data.get("answer") if isinstance(data.get("answer"), str) else None
        name = data.get("name") if isinstance(data.get("name"), str) else None
        args = data.get("arguments") if isinstance(data.get("arguments"), dict) else {}
        checked = answer is not None and task.check(answer, root)
    first_ok, first_why = judge_first(task, name, args if name else None, answer is not None)
    if name is None and answer is None:
        first_ok, first_why = (False, "the reply was no call and no answer") if first_ok is not None else (None, "")
    return {
        **describe(task), "mode": "raw", "schema": "raw",
        "success": succeeded(task.kind, answered=answer is not None, checked=checked, calls=0, raw=True),
        "first_ok": first_ok, "first_why": first_why,
        "first_step": "tool" if name else "answer" if answer is not None else "none",
        "stop": "answered" if answer is not None else "called" if name else "unreadable",
        "answer": answer or "", "tool_calls": int(name is not None), "steps": 1, "replies": 1,
        "unreadable": int(name is None and answer is None),
        "tokens": reply.usage.total_tokens if reply.usage else None,
        "prompt_tokens": reply.usage.prompt_tokens if reply.usage else None,
        "call": {"name": name, "arguments": args} if name else None,
        "seconds": round(seconds, 3),
    }  # fmt: skip


def run_raw_suite(brain: Brain, tasks: Sequence[AnyTask], *, progress: Progress | None = None) -> list[dict[str, Any]]:
    records = []
    for task in tasks:
        records.append(run_raw(brain, task))
        if progress:
            progress.step(f"raw {task.name}")
    return records
