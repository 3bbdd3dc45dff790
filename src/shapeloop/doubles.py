"""A brain that needs no model, for users who test their tools and acceptors: :class:`TestBrain`.

It writes a reply valid for whatever schema it is asked for, as pydantic-ai's ``TestModel`` does;
for a run's step schema that means calling each offered tool once, in order, and then answering.
(:class:`~shapeloop.ScriptedBrain` is the other double: it replays replies you write.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from shapeloop.brain import BaseBrain, Capabilities, Constraint, Reply, Request
from shapeloop.tools import ToolCall


class TestBrain(BaseBrain):
    """A brain that writes a valid reply for any schema it is given.

    The n-th reply of a conversation (n counts the assistant turns already in it) takes the n-th
    variant of a top-level ``anyOf`` (cycling), so a run's per-tool step schema gets each tool
    called once, then the answer; a batch step (``{"calls": [...]}``, the default) calls the n-th
    tool alone, one a step, then answers (a typed answer as its schema asks). Strings are ``"a"``
    (as long as ``minLength`` asks), numbers their minimum or 0, and arrays and objects as small as
    the schema allows. A flat step schema, or a request with no schema, gets the answer at once;
    native tools are called one per reply, then the answer comes as text.

    Args:
        answer: the text of the final answer.

    Attributes:
        asked: every request so far.
    """

    __test__ = False  # not a pytest test class, whatever its name
    capabilities = Capabilities(native_tools=True)

    def __init__(self, *, answer: str = "done") -> None:
        self.answer = answer
        self.asked: list[Request] = []

    def ask(self, request: Request) -> Reply:
        """Write the reply for the request's turn in its conversation."""
        self.asked.append(request)
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        if request.tools is not None:
            return self._native(request.tools, turn)
        if request.schema is None:
            step = {"reason": "done", "action": "answer", "tool": "", "args": {}, "answer": self.answer}
            return Reply(text=json.dumps(step), applied=Constraint.NONE, engine="test")
        value = self._value(request.schema, turn)
        return Reply(text=json.dumps(value), applied=Constraint.SCHEMA, engine="test")

    def _native(self, tools: Sequence[Mapping[str, Any]], turn: int) -> Reply:
        if turn >= len(tools):
            return Reply(text=self.answer, applied=Constraint.TOOLS, engine="test")
        function = tools[turn]["function"]
        args = write_value(function.get("parameters") or {"type": "object"})
        call = ToolCall(tool=function["name"], args=args)
        return Reply(text="", applied=Constraint.TOOLS, engine="test", tool_calls=(call,))

    def _batch_step(
        self, schema: Mapping[str, Any], calls: list[Mapping[str, Any]], answer: Mapping[str, Any] | None, turn: int
    ) -> dict[str, Any]:
        """The n-th tool called alone, then the answer: this brain's text, or a typed answer as its
        schema asks. Calls that name no tool (a flat schema's) are not made: it answers at once."""
        defs = schema.get("$defs", {})
        named = any("const" in ((c.get("properties") or {}).get("name") or {}) for c in calls)
        if named and (turn < len(calls) or answer is None):
            return {"calls": [write_value({**calls[turn % len(calls)], "$defs": defs})]}
        if answer is None:
            return {"calls": [write_value({**calls[0], "$defs": defs})]}
        step = write_value({**answer, "$defs": defs})
        if isinstance(step.get("answer"), str):
            mine = {**step, "answer": self.answer}
            step = mine if jsonschema.Draft202012Validator({**answer, "$defs": defs}).is_valid(mine) else step
        return dict(step)

    def _value(self, schema: Mapping[str, Any], turn: int) -> Any:
        batch = _batch_parts(schema)
        if batch is not None:
            step = self._batch_step(schema, *batch, turn)
            jsonschema.validate(step, schema)
            return step
        variants = schema.get("anyOf") or schema.get("oneOf")
        chosen: Mapping[str, Any] = schema
        if isinstance(variants, list) and variants:
            chosen = {**variants[turn % len(variants)], "$defs": schema.get("$defs", {})}
        value = write_value(chosen)
        if isinstance(value, dict) and value.get("action") == "answer" and isinstance(value.get("answer"), str):
            value["answer"] = self.answer  # a typed answer (an object) stays as written
        elif isinstance(value, dict) and _answers(chosen):
            value.update(action="answer", tool="", args={}, answer=self.answer)
        jsonschema.validate(value, schema)
        return value


def _batch_parts(schema: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], Mapping[str, Any] | None] | None:
    """A batch step schema's call variants that name a tool (one per tool; the open calls of a flat
    schema name none) and its answer variant (None where the step may not answer), or None for any
    other schema."""
    variants = schema.get("anyOf")
    steps = [v for v in variants if isinstance(v, Mapping)] if isinstance(variants, list) else [schema]
    lean = [v for v in steps if list(v.get("properties") or {}) in (["calls"], ["answer"])]
    if not lean or len(lean) != len(steps):
        return None
    items = [v["properties"]["calls"].get("items") for v in lean if "calls" in v["properties"]]
    if len(items) > 1 or not all(isinstance(i, Mapping) for i in items):
        return None
    calls = [c for i in items for c in (i.get("anyOf") or [i])]
    named = [c for c in calls if "const" in ((c.get("properties") or {}).get("name") or {})]
    answers = [v for v in lean if "answer" in v["properties"]]
    return named or calls, answers[0] if answers else None


def _answers(schema: Mapping[str, Any]) -> bool:
    """A flat step schema, whose ``action`` may be ``answer``: the test brain answers at once."""
    action = schema.get("properties", {}).get("action", {})
    return isinstance(action, Mapping) and "answer" in action.get("enum", ())


# Strings in the formats a typed answer's fields use (pydantic writes ``format`` for dates and times).
_FORMATS = {
    "date": "2000-01-01", "date-time": "2000-01-01T00:00:00Z", "time": "00:00:00", "email": "a@example.org",
    "uri": "https://example.org/", "uuid": "00000000-0000-0000-0000-000000000000",
}  # fmt: skip


def write_value(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """A small value valid for ``schema`` (the first option wherever there is a choice).

    Raises:
        ValueError: the schema uses something this writer cannot satisfy (the message names it).
    """
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        if name not in defs:
            raise ValueError(f"TestBrain cannot resolve {schema['$ref']!r}")
        return write_value(defs[name], defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return write_value(schema[key][0], defs)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _write_typed(str(kind), schema, defs)


def _matching(pattern: str, written: str) -> str:
    """``written`` where it matches ``pattern``, else the pattern's literal start, alone or followed
    by ``written`` (a led reason: ``^The result says[^"]*$``).

    Raises:
        ValueError: neither matches.
    """
    lead = re.match(r"\^?([^\\.\[\](){}*+?|$^]*)", pattern)
    start = lead.group(1) if lead else ""
    for text in (written, start, start + written):
        if re.search(pattern, text):
            return text
    raise ValueError(f"TestBrain cannot write a string that matches {pattern!r}")


def _write_typed(kind: str, schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        return {name: write_value(sub, defs) for name, sub in props.items()}
    if kind == "array":
        items = schema.get("items") or {}
        return [write_value(items, defs) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        text = _FORMATS.get(str(schema.get("format")), "a" * max(1, int(schema.get("minLength", 1))))
        return text if "pattern" not in schema else _matching(str(schema["pattern"]), text)
    if kind in ("integer", "number"):
        low = schema["minimum"] if "minimum" in schema else schema.get("exclusiveMinimum", -1) + 1
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    raise ValueError(f"TestBrain cannot write a value of type {kind!r}")
