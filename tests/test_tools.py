import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel

from helpers import answer_step, call_step, lean_answer, tool_step
from shapeloop import ScriptedBrain, StopReason, Tool, ToolCall, ToolStatus, run_agent, tool
from shapeloop.events import ToolReturned
from shapeloop.toolbox import Toolbox, truncate


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number, which defaults to two
            and is optional.
    """
    return a + b


def results(run: object) -> list[ToolReturned]:
    return [e for e in run.events if isinstance(e, ToolReturned)]  # type: ignore[attr-defined]


def test_tool_from_a_typed_function() -> None:
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.parameters["required"] == ["a"]
    assert add.parameters["properties"]["a"] == {"type": "integer", "description": "the first number."}
    assert (
        add.parameters["properties"]["b"]["description"] == "the second number, which defaults to two and is optional."
    )
    assert add.parameters["additionalProperties"] is False
    assert add.needs_approval is False
    assert add(a=1) == 3
    assert add.signature() == "add(a: integer, b?: integer)"


def test_tool_with_options_and_model_arguments() -> None:
    class Box(BaseModel):
        w: int
        h: int

    @tool(needs_approval=True, name="box.area")
    def area(box: Box) -> str:
        """Area of a box."""
        return str(box.w * box.h)

    assert area.needs_approval and area.name == "box.area"
    assert area(box={"w": 2, "h": 3}) == "6"  # converted to the model before the call


def test_tool_rejects_star_arguments() -> None:
    with pytest.raises(TypeError, match="plain or keyword"):
        tool(lambda *xs: "x")


def test_given_schema_tool_with_a_dotted_name_runs_in_the_loop() -> None:
    factorial = Tool(
        name="math.factorial",
        description="n factorial",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 0}},
            "required": ["n"],
        },
        fn=lambda n: str(__import__("math").factorial(n)),
    )
    run = run_agent(ScriptedBrain([tool_step("math.factorial", n=5), answer_step("120")]), [factorial], "5!")
    assert run.ok and results(run)[0].text == "120"


def test_invalid_schema_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        Tool(name="x", description="", parameters={"type": "nonsense"}, fn=lambda: "")


def test_arguments_are_validated_before_the_call() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record."""
        calls.append(n)
        return "ok"

    run = run_agent(ScriptedBrain([tool_step("record", n="five"), answer_step("done")]), [record], "t")
    result = results(run)[0]
    assert result.status is ToolStatus.ERROR
    assert result.text.startswith("ERROR: invalid arguments for record(n: integer): n: 'five' is not of type 'integer'")
    assert calls == []


def test_unknown_tool_names_the_real_ones() -> None:
    run = run_agent(ScriptedBrain([tool_step("readFile", path="x"), answer_step("d")]), [add], "t")
    assert results(run)[0].text == "ERROR: there is no tool named 'readFile'. Available tools: add."


def test_a_raising_tool_becomes_an_error_and_the_loop_goes_on() -> None:
    @tool
    def boom() -> str:
        """Boom."""
        raise OSError("disk on fire")

    run = run_agent(ScriptedBrain([tool_step("boom"), answer_step("d")]), [boom], "t")
    assert results(run)[0].text == "ERROR: OSError: disk on fire"
    assert run.ok


def test_approval_gate() -> None:
    done: list[str] = []

    @tool(needs_approval=True)
    def act(what: str) -> str:
        """Act."""
        done.append(what)
        return "acted"

    seen: list[ToolCall] = []

    def approve(call: ToolCall) -> bool:
        seen.append(call)
        return call.args["what"] == "safe"

    script = [tool_step("act", what="safe"), tool_step("act", what="rm -rf"), answer_step("d")]
    run = run_agent(ScriptedBrain(script), [act], "t", approve=approve)
    statuses = [r.status for r in results(run)]
    assert statuses == [ToolStatus.OK, ToolStatus.DENIED]
    assert results(run)[1].text.startswith("DENIED: act was not approved")
    assert done == ["safe"] and [c.args["what"] for c in seen] == ["safe", "rm -rf"]

    run = run_agent(ScriptedBrain([tool_step("act", what="x"), answer_step("d")]), [act], "t")
    assert results(run)[0].status is ToolStatus.DENIED and "no approver" in results(run)[0].text
    run = run_agent(
        ScriptedBrain([tool_step("act", what="x"), answer_step("d")]),
        [act],
        "t",
        approve=lambda c: "not on Sundays",
    )
    assert "not on Sundays" in results(run)[0].text
    assert done == ["safe"]


def test_deny_wins_over_allow_and_a_denied_tool_is_neither_advertised_nor_run() -> None:
    ran: list[str] = []

    @tool
    def secret() -> str:
        """Secret."""
        ran.append("secret")
        return "s"

    brain = ScriptedBrain([tool_step("secret"), answer_step("d")])
    run = run_agent(brain, [add, secret], "t", allow_tools=["add", "secret"], deny_tools=["secret"], batch=False)
    assert ran == []
    assert results(run)[0].status is ToolStatus.DENIED and "not permitted" in results(run)[0].text
    system = brain.asked[0].messages[0]["content"]
    assert "secret" not in system and "add(" in system
    assert "secret" not in str(brain.asked[0].schema)
    # the default step: the functions as JSON
    brain = ScriptedBrain([call_step("secret"), lean_answer("d")])
    run = run_agent(brain, [add, secret], "t", allow_tools=["add", "secret"], deny_tools=["secret"])
    assert ran == []
    assert results(run)[0].status is ToolStatus.DENIED and "not permitted" in results(run)[0].text
    system = brain.asked[0].messages[0]["content"]
    assert "secret" not in system and '"name": "add"' in system
    assert "secret" not in str(brain.asked[0].schema)


def test_allow_list_limits_what_is_offered_and_rejects_unknown_names() -> None:
    box = Toolbox([add], allow=[])
    assert box.tools == {}
    with pytest.raises(ValueError, match="unknown tools"):
        Toolbox([add], allow=["ad"])
    with pytest.raises(ValueError, match="unique"):
        Toolbox([add, add])


def test_long_results_are_cut_with_a_marker() -> None:
    @tool
    def big() -> str:
        """Big."""
        return "x" * 10_000

    run = run_agent(ScriptedBrain([tool_step("big"), answer_step("d")]), [big], "t", max_result_chars=4000)
    result = results(run)[0]
    assert result.truncated and result.chars == 10_000
    assert result.text.startswith("x" * 4000 + "\n[truncated: 6000 of 10000 characters cut]")
    assert truncate("short", 10) == "short"


def test_non_string_results_are_rendered() -> None:
    @tool
    def data() -> dict[str, int]:
        """Data."""
        return {"a": 1}

    run = run_agent(ScriptedBrain([tool_step("data"), answer_step("d")]), [data], "t")
    assert results(run)[0].text == '{"a": 1}'


def test_loop_survives_a_tool_writing_outside_nothing(tmp_path: Path) -> None:
    # the model's unknown tool, bad args and a throw in one run: the run still answers
    script = [tool_step("nope"), tool_step("add", a="x"), tool_step("add", a=1), answer_step("3")]
    run = run_agent(ScriptedBrain(script), [add], "t")
    assert run.stop is StopReason.ANSWERED
    assert [r.status for r in results(run)] == [ToolStatus.ERROR, ToolStatus.ERROR, ToolStatus.OK]
    assert results(run)[2].text == "3"


def test_a_tool_that_raises_a_refusal_is_denied_not_an_error() -> None:
    from shapeloop import ToolRefusal

    @tool
    def launch(target: str) -> str:
        """Launch at a target."""
        raise ToolRefusal(f"{target} is not a permitted target")

    result = Toolbox([launch]).run(ToolCall(tool="launch", args={"target": "moon"}))
    assert result.status is ToolStatus.DENIED and result.text == "DENIED: moon is not a permitted target"


def test_the_old_step_shaping_options_of_a_tool_warn_at_the_callers_line_and_leave_nothing_behind() -> None:
    with pytest.warns(DeprecationWarning, match=r"optional_when_named=\.\.\. has no effect") as caught:

        @tool(optional_when_named=True)
        def read(path: str, length: int = 10) -> str:
            """Read."""
            return path

    with pytest.warns(DeprecationWarning, match=r"choices=\.\.\. has no effect") as too:
        made = Tool(name="t", description="d", parameters={"type": "object"}, fn=lambda: "x", choices=lambda _: {})
    # attributed to this file, so Python's default filters show it to the user's own code
    assert [w.filename for w in [*caught, *too]] == [__file__, __file__]
    assert {f.name for f in dataclasses.fields(Tool)}.isdisjoint({"optional_when_named", "choices"})
    assert read.optional_when_named is None and made.choices is None  # InitVar's class default, nothing kept
    # the step still offers every argument: nothing was held back
    run = run_agent(ScriptedBrain([tool_step("read", path="a", length=3), answer_step("ok")]), [read], "t")
    assert run.ok and "length" in str(run.messages)
