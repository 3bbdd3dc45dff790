"""Issue 48, items 1 to 3: schemas the up-front check did not see, time outside the bounds, and a
tool that raises ``SystemExit`` or another ``BaseException``. Each test fails on the code before
the fix and spells out what the user (or the model) reads.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest

from helpers import answer_step, tool_step
from shapeloop import Conversation, ScriptedBrain, StopReason, Tool, run_agent, tool
from shapeloop.limits import Limits, schema_problem
from shapeloop.output import typed_answer
from shapeloop.toolbox import Toolbox, ToolResult, ToolStatus
from shapeloop.tools import ToolCall


def _tool(parameters: dict[str, Any], fn: Any = None) -> Tool:
    return Tool(name="f", description="A tool.", parameters=parameters, fn=fn or (lambda **args: "ok"))


# Item 1: schemas the up-front check did not see

DANGLING = "$ref '#/$defs/missing' dangles (no such definition): a $ref names one of the schema's own $defs"
ENDLESS = "the schema applies itself to the same value forever"

REFUSED = [
    *[
        pytest.param(
            {"type": "object", "properties": {name: {"$ref": "#/$defs/missing"}}},
            f"properties/{name}: {DANGLING}",
            id=f"dangling-under-{name}",
        )
        for name in ("default", "enum", "const", "examples")
    ],
    pytest.param(
        {"$defs": {"a": {"type": "object", "dependentSchemas": {"x": {"$ref": "#/$defs/a"}}}}, "$ref": "#/$defs/a"},
        f"$ref recurses without end (#/$defs/a -> #/$defs/a) through the $ref at $defs/a/dependentSchemas/x: {ENDLESS}",
        id="cycle-through-dependentSchemas",
    ),
    pytest.param(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"a": {"type": "object", "dependencies": {"x": {"$ref": "#/definitions/a"}}}},
            "$ref": "#/definitions/a",
        },
        "$ref recurses without end (#/definitions/a -> #/definitions/a) through the $ref at "
        f"definitions/a/dependencies/x: {ENDLESS}",
        id="cycle-through-dependencies",
    ),
    pytest.param(
        {
            "type": "object",
            "$defs": {"word": {"type": "string"}},
            "properties": {"x": {"$id": "http://example.com/x", "$ref": "#/$defs/word"}},
        },
        "properties/x: $ref '#/$defs/word' dangles (no such definition) (under $id 'http://example.com/x', which it "
        "is resolved against)",
        id="ref-rebased-by-id",
    ),
    pytest.param(
        {"$defs": {"a": {"if": {"type": "string"}, "else": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"},
        f"$ref recurses without end (#/$defs/a -> #/$defs/a) through the $ref at $defs/a/else: {ENDLESS}",
        id="cycle-through-else",
    ),
    pytest.param(
        {"type": "object", "$defs": {"w": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/w/type"}}},
        "properties/x: $ref '#/$defs/w/type' resolves to a value that is not a schema, not to one of the schema's "
        "own $defs",
        id="ref-into-a-definition",
    ),
    pytest.param(
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": [{"$ref": "#/definitions/missing"}]},
        "draft 3 schemas are not supported: write it in draft 2020-12 (or 7, 6, 4)",
        id="draft-3",
    ),
    pytest.param(
        {"$id": "http://[::1", "type": "object"},
        "an $id or $ref is not a URI reference (Invalid IPv6 URL): write $ref as #/$defs/NAME",
        id="id-not-a-uri",
    ),
]


@pytest.mark.parametrize(("schema", "words"), REFUSED)
def test_a_schema_the_check_missed_is_refused_as_a_tools_parameters_before_the_model_is_asked(
    schema: dict[str, Any], words: str
) -> None:
    brain = ScriptedBrain([tool_step("f", x="y"), answer_step("done")])
    with pytest.raises(ValueError) as caught:
        run_agent(brain, [_tool(schema)], "t")
    message = str(caught.value)
    assert message.startswith("tool 'f': its parameters schema is refused: ") and words in message
    assert "\n" not in message and brain.asked == []


@pytest.mark.parametrize(("schema", "words"), REFUSED)
def test_a_schema_the_check_missed_is_refused_as_output_type_before_the_model_is_asked(
    schema: dict[str, Any], words: str
) -> None:
    brain = ScriptedBrain([answer_step(json.dumps({"x": 1}))])
    with pytest.raises(ValueError) as caught:
        run_agent(brain, [], "t", output_type=schema)
    message = str(caught.value)
    assert message.startswith("output_type's schema is refused: ") and words in message
    assert "\n" not in message and brain.asked == []


ACCEPTED = [
    pytest.param(
        {
            "$defs": {
                "node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
            },
            "$ref": "#/$defs/node",
        },
        {"kids": [{"kids": []}]},
        id="recursion-into-items",
    ),
    pytest.param(
        {"$defs": {"map": {"type": "object", "additionalProperties": {"$ref": "#/$defs/map"}}}, "$ref": "#/$defs/map"},
        {"a": {"b": {}}},
        id="recursion-into-additionalProperties",
    ),
    pytest.param(
        {
            "$defs": {"m": {"type": "object", "dependentSchemas": {"x": {"properties": {"x": {"$ref": "#/$defs/m"}}}}}},
            "$ref": "#/$defs/m",
        },
        {"x": {"x": {}}},
        id="dependentSchemas-that-goes-into-a-property",
    ),
    pytest.param(
        {"type": "object", "$defs": {"w": {"type": "string"}}, "properties": {"default": {"$ref": "#/$defs/w"}}},
        {"default": "yes"},
        id="a-property-named-default",
    ),
    pytest.param(
        {
            "$id": "http://example.com/root",
            "type": "object",
            "$defs": {"w": {"type": "string"}},
            "properties": {"x": {"$ref": "#/$defs/w"}},
        },
        {"x": "yes"},
        id="a-root-id",
    ),
]


@pytest.mark.parametrize(("schema", "value"), ACCEPTED)
def test_a_recursion_that_goes_into_a_value_is_accepted_and_checks_answers(schema: dict[str, Any], value: Any) -> None:
    assert schema_problem(schema, Limits()) is None
    run = run_agent(ScriptedBrain([answer_step(json.dumps(value))]), [], "t", output_type=schema)
    assert run.stop is StopReason.ANSWERED and run.output == value


def test_a_schema_that_is_not_valid_is_refused_with_its_path() -> None:
    with pytest.raises(
        ValueError, match="output_type's schema is refused: it is not a valid JSON schema: properties/a/type: 'objekt'"
    ):
        typed_answer({"type": "object", "properties": {"a": {"type": "objekt"}}})


# Item 2: time outside the bounds


def _slow_strings(count: int) -> Tool:
    """A tool of ``count`` string arguments whose pattern takes about 2 s on 1 000 characters."""
    slow = {"type": "string", "pattern": "^(?:[a-z]?){1500}[a-z]{1500}$"}
    props = {f"s{i}": slow for i in range(count)}
    return Tool(
        name="many", description="d", fn=lambda **args: "ran", parameters={"type": "object", "properties": props}
    )


class Ticks:
    """A clock that moves ``step`` seconds each time it is read, starting from the real one, put in
    place of ``time.monotonic``: what a check costs is counted in the looks it takes at the clock
    (one every 64 characters of a search), never measured, so a loaded machine changes nothing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, step: float) -> None:
        self.start, self.step, self.reads = time.monotonic(), step, 0
        monkeypatch.setattr(time, "monotonic", self.monotonic)

    def monotonic(self) -> float:
        self.reads += 1
        return self.start + (self.reads - 1) * self.step


def _budget(text: str) -> float:
    """The shared budget a refusal names (``in the 0.2 s that all of its patterns share``)."""
    found = re.search(r"in the ([\d.]+) s that all of its patterns share", text)
    assert found, text
    return float(found.group(1))


def _check_by_looks(
    monkeypatch: pytest.MonkeyPatch, step: float, timeout: float | None, seconds_left: float | None = None
) -> tuple[ToolResult, int]:
    """The call of 12 slow strings run by a toolbox (``timeout``, ``seconds_left``) while a
    :class:`Ticks` clock of ``step`` stands in for ``time.monotonic``: its result, and the looks it took."""
    box = Toolbox([_slow_strings(12)], timeout=timeout)
    ticks = Ticks(monkeypatch, step=step)
    result = box.run(ToolCall(tool="many", args={f"s{i}": "a" * 1000 for i in range(12)}), seconds_left=seconds_left)
    looks = ticks.reads
    monkeypatch.undo()
    return result, looks


def test_all_string_arguments_of_a_call_share_one_pattern_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    result, looks = _check_by_looks(monkeypatch, step=0.25, timeout=None)
    # the toolbox's look and the budget's, the first check's looks until 0.5 s have passed (3), then
    # one each for the other 11, which find it spent; 0.5 s a check would take 4 looks a check
    assert looks <= 2 + 3 + 11, f"{looks} looks at the clock: the checks did not share one budget"
    assert result.status is ToolStatus.ERROR and "ERROR: invalid arguments for many(" in result.text
    assert "could not be checked against '^(?:[a-z]?){1500}[a-z]{1500}$' in the 0.5 s that all" in result.text


def test_checking_the_arguments_counts_inside_the_tool_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    result, looks = _check_by_looks(monkeypatch, step=0.05, timeout=0.2)
    # within 0.2 s the first check looks 4 times, the others once; the pattern's own 0.5 s would be 11
    assert looks <= 2 + 4 + 11, f"{looks} looks: the checks ran past the 0.2 s of tool_timeout"
    assert result.status is ToolStatus.ERROR and "could not be checked" in result.text
    assert _budget(result.text) <= 0.2


def test_checking_the_arguments_counts_inside_the_runs_max_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    result, looks = _check_by_looks(monkeypatch, step=0.05, timeout=None, seconds_left=0.2)
    assert looks <= 3 + 4 + 11, f"{looks} looks: the checks ran past the 0.2 s the run had left"
    assert result.status is ToolStatus.ERROR and "could not be checked" in result.text
    assert _budget(result.text) <= 0.2


def test_the_time_a_check_took_is_taken_from_the_tools_time() -> None:
    """The tool alone fits in ``tool_timeout``, the check alone too, the two together do not: sized
    from this machine's own speed at the check (measured first), so no wall-clock figure is assumed."""
    passes = {"type": "string", "pattern": "^(?:[a-z]?){1500}$"}
    parameters = {"type": "object", "properties": {"word": passes}, "required": ["word"]}
    word = "a" * 200
    probe = Tool(name="probe", description="d", fn=lambda word: "", parameters=parameters)
    assert probe.argument_errors({"word": word}, limits=Limits(pattern_seconds=30)) is None  # compiles the pattern
    started = time.monotonic()  # the check timed as the toolbox will run it: with the compiled pattern cached
    assert probe.argument_errors({"word": word}, limits=Limits(pattern_seconds=30)) is None
    took = max(time.monotonic() - started, 0.05)
    timeout, sleep = took + 0.3, 0.3 + took / 2  # sleep < timeout < took + sleep, half the check's time either way
    ran: list[str] = []

    def slow(word: str) -> str:
        time.sleep(sleep)
        ran.append(word)
        return "done"

    checked = Tool(name="checked", description="d", fn=slow, parameters=parameters)
    box = Toolbox([checked], timeout=timeout, limits=Limits(pattern_seconds=30))
    result = box.run(ToolCall(tool="checked", args={"word": word}))
    assert result.status is ToolStatus.ERROR and ran == [], result.text  # the sleep did not fit in what was left
    said = (f"ERROR: checked timed out after {timeout:.3g} s (tool_timeout)", "did not run",
            "that all of its patterns share")  # fmt: skip
    assert any(words in result.text for words in said), result.text


class Lazy:
    """A return value whose text never comes until it is let go (a lazy object's ``__str__``)."""

    def __init__(self) -> None:
        self.let_go = threading.Event()
        self.rendered = False

    def __str__(self) -> str:
        self.let_go.wait(30)
        self.rendered = True
        return "finally"


def test_turning_a_result_into_text_counts_inside_the_tool_timeout() -> None:
    slow = Lazy()

    @tool
    def lazy() -> Any:
        """Return something lazy."""
        return {"value": slow}

    brain = ScriptedBrain([tool_step("lazy"), answer_step("done")])
    try:
        run = run_agent(brain, [lazy], "t", mode="prose", tool_timeout=0.5, max_seconds=60)
        assert not slow.rendered, "the run waited for the text, outside tool_timeout=0.5"
    finally:
        slow.let_go.set()
    assert "ERROR: lazy timed out after 0.5 s (tool_timeout); it was abandoned" in run.messages[-2]["content"]


# Item 3: a tool that raises SystemExit or another BaseException


class Halt(BaseException):
    """Neither an Exception nor Ctrl-C."""


def _exits(code: Any) -> Any:
    def run(**args: Any) -> str:
        raise SystemExit(code)

    return run


@pytest.mark.parametrize("tool_timeout", [None, 5.0], ids=["in-this-thread", "in-a-worker-thread"])
@pytest.mark.parametrize(
    ("raised", "text"),
    [
        (SystemExit(2), "ERROR: f tried to exit the program (SystemExit: 2)"),
        (SystemExit("usage: f [-h]"), "ERROR: f tried to exit the program (SystemExit: 'usage: f [-h]')"),
        (Halt("stop"), "ERROR: Halt: stop"),
        (GeneratorExit(), "ERROR: GeneratorExit: "),
    ],
)
def test_a_tool_that_raises_a_base_exception_is_that_calls_error(
    raised: BaseException, text: str, tool_timeout: float | None
) -> None:
    def fails(**args: Any) -> str:
        raise raised

    brain = ScriptedBrain([tool_step("f"), answer_step("done")])
    run = run_agent(brain, [_tool({"type": "object"}, fails)], "t", mode="prose", tool_timeout=tool_timeout)
    assert run.stop is StopReason.ANSWERED and run.answer == "done"
    assert text in run.messages[-2]["content"]


def test_a_batch_in_which_one_tool_exits_runs_the_others() -> None:
    ok = Tool(name="ok", description="d", parameters={"type": "object"}, fn=lambda: "fine")
    calls = json.dumps({"calls": [{"name": "f", "arguments": {}}, {"name": "ok", "arguments": {}}]})
    brain = ScriptedBrain([calls, answer_step("done")])
    run = run_agent(brain, [_tool({"type": "object"}, _exits(3)), ok], "t", mode="prose", batch=True)
    assert run.stop is StopReason.ANSWERED
    fed_back = run.messages[-2]["content"]
    assert "ERROR: f tried to exit the program (SystemExit: 3)" in fed_back and "fine" in fed_back


def test_a_conversation_whose_tool_exits_goes_on() -> None:
    brain = ScriptedBrain([tool_step("f"), answer_step("first"), answer_step("second")])
    chat = Conversation(brain, [_tool({"type": "object"}, _exits(1))], mode="prose")
    turn = chat.ask("one")
    assert turn.run.stop is StopReason.ANSWERED and turn.run.answer == "first"
    assert "ERROR: f tried to exit the program (SystemExit: 1)" in turn.run.messages[-2]["content"]
    assert chat.ask("two").run.answer == "second"


def test_ctrl_c_in_a_tool_still_stops_the_run() -> None:
    def interrupted(**args: Any) -> str:
        raise KeyboardInterrupt

    brain = ScriptedBrain([tool_step("f"), answer_step("done")])
    run = run_agent(brain, [_tool({"type": "object"}, interrupted)], "t", mode="prose")
    assert run.stop is StopReason.INTERRUPTED
