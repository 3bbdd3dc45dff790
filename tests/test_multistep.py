"""Issue 46's policies for multi-step work: a model's own preset, a state line read from the
tools that read, and values held to what the results gave."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from helpers import call_step, lean_answer
from shapeloop import Capabilities, ScriptedBrain, run_agent, tool
from shapeloop.events import PolicyIntervened
from shapeloop.models import CATALOGUE
from shapeloop.policies import (
    DEFAULT,
    AnswerAfterRepeat,
    LookupHint,
    ModelPreset,
    StateLine,
    resolve,
)

FOLDERS = {"/": ["docs", "notes.txt"], "/docs": ["plan.md"]}
PRICES = {"ZETA": "150.75", "MSFT": "410.10"}


def _desk() -> list[Any]:
    where = ["/"]

    @tool(read_only=True)
    def pwd() -> str:
        """The current folder."""
        return where[0]

    @tool(read_only=True)
    def ls() -> str:
        """What the current folder holds."""
        return "\n".join(FOLDERS[where[0]])

    @tool
    def cd(folder: str) -> str:
        """Go into a folder."""
        target = "/" + folder.strip("/")
        if target not in FOLDERS:
            raise ValueError(f"no folder {folder!r} here")
        where[0] = target
        return f"now in {target}"

    @tool
    def mkdir(name: str) -> str:
        """Make a folder here."""
        return f"made {name}"

    return [pwd, ls, cd, mkdir]


@tool(read_only=True)
def symbol_of(company: str) -> str:
    """The stock symbol of a company, from its name."""
    return '{"symbol": "ZETA", "exchange": "NYSE"}' if "zeta" in company.casefold() else '{"error": "not found"}'


@tool
def buy(symbol: str, amount: int) -> str:
    """Buy a stock by its symbol."""
    if symbol not in PRICES:
        raise ValueError(f"no stock with symbol {symbol!r}")
    return f"bought {amount} {symbol}"


def _events(run: Any) -> list[PolicyIntervened]:
    return [e for e in run.events if isinstance(e, PolicyIntervened)]


def _calls(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The call variants of a calls step (one a tool), whether or not it may answer."""
    step = next(v for v in schema.get("anyOf", [schema]) if "calls" in v["properties"])
    items = step["properties"]["calls"]["items"]
    return items.get("anyOf", [items])


def _can_answer(schema: dict[str, Any]) -> bool:
    return any("answer" in v.get("properties", {}) for v in schema.get("anyOf", [schema]))


# --- the model's own preset (item 4)


def test_the_default_adds_the_policies_the_brain_declares_for_its_model_and_says_so() -> None:
    brain = ScriptedBrain([lean_answer("hi")], capabilities=Capabilities(preset=("lookup-hint",)))
    run = run_agent(brain, _desk(), "Hello")
    assert run.policies == ("lookup-hint",)
    added = [e for e in _events(run) if e.hook == "for_run"]
    assert [(e.policy, e.change) for e in added] == [("lookup-hint", "on for this model")]
    assert "catalogue" in added[0].reason


def test_the_plain_loop_and_a_list_of_ones_own_take_no_preset() -> None:
    declares = Capabilities(preset=("lookup-hint",))
    plain = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello", policies=())
    assert plain.policies == () and _events(plain) == []
    mine = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                     policies=[AnswerAfterRepeat()])  # fmt: skip
    assert mine.policies == ("answer-after-repeat",)
    both = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                     policies=[LookupHint(), ModelPreset()])  # fmt: skip
    assert both.policies == ("lookup-hint",), "a policy the run names already is not added twice"


def test_a_policy_taken_out_by_name_stays_out_of_the_model_s_preset_and_the_preset_can_go() -> None:
    declares = Capabilities(preset=("lookup-hint", "answer-after-repeat"))
    run = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                    policies=resolve("default,-lookup-hint"))  # fmt: skip
    assert run.policies == ("answer-after-repeat",)
    run = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                    policies=resolve("default,-model-preset"))  # fmt: skip
    assert run.policies == ()


def test_a_brain_that_declares_no_preset_runs_the_default_unchanged() -> None:
    run = run_agent(ScriptedBrain([lean_answer("hi")]), _desk(), "Hello")
    assert run.policies == () and _events(run) == []
    assert resolve("default") == DEFAULT and ModelPreset() in DEFAULT


def test_every_catalogue_preset_names_policies_that_exist() -> None:
    for entry in CATALOGUE.values():
        assert len(resolve(",".join(entry.preset))) == len(entry.preset) if entry.preset else True, entry.name


# --- a state line read from the tools that read


def test_state_line_reads_the_named_tools_before_every_step() -> None:
    brain = ScriptedBrain([call_step("cd", folder="docs"), lean_answer("done")])
    run = run_agent(brain, _desk(), "Go into docs", policies=[StateLine(reads=["pwd", "ls"])])
    assert run.answer == "done"
    assert brain.asked[0].messages[-1]["content"] == "pwd() -> /; ls() -> docs notes.txt"
    assert brain.asked[1].messages[-1]["content"] == "pwd() -> /docs; ls() -> plan.md", "read afresh at each step"
    assert run.interventions == {"state-line": 2}


def test_state_line_refuses_a_tool_that_acts_or_is_not_there_before_the_run_starts() -> None:
    brain = ScriptedBrain([lean_answer("x")])
    with pytest.raises(ValueError, match="read_only=True; 'mkdir' does not"):
        run_agent(brain, _desk(), "Go", policies=[StateLine(reads=["pwd", "mkdir"])])
    with pytest.raises(ValueError, match="'whoami', which is not one of the run's tools"):
        run_agent(brain, _desk(), "Go", policies=[StateLine(reads=["whoami"])])
    assert brain.asked == []
    with pytest.raises(ValueError, match="exactly one of"):
        StateLine(lambda: "x", reads=["pwd"])


def test_state_line_shows_a_failed_read_as_an_error_and_goes_on() -> None:
    @tool(read_only=True)
    def status() -> str:
        """The car's status."""
        raise RuntimeError("sensor offline")

    brain = ScriptedBrain([lean_answer("unknown")])
    run = run_agent(brain, [status, *_desk()], "Status?", policies=[StateLine(reads=["status"])])
    assert run.answer == "unknown"
    assert brain.asked[0].messages[-1]["content"] == "status() -> ERROR: RuntimeError: sensor offline"


# --- an argument held to values (StepShape.hold)


def test_a_hold_keeps_the_tool_s_own_schema_and_offers_only_what_it_admits() -> None:
    from shapeloop.offer import held

    code = tool(lambda code: code, name="code", description="A code.")
    bounded = dataclasses.replace(code, parameters={"type": "object", "properties": {
        "code": {"type": "string", "maxLength": 4, "description": "four letters"}}, "required": ["code"]})  # fmt: skip
    spec = held(bounded, (("code", "code", ("ZETA", "Zeta Corp")),)).parameters["properties"]["code"]
    assert spec == {"type": "string", "maxLength": 4, "description": "four letters", "enum": ["ZETA"]}
    assert held(bounded, (("code", "code", ("Zeta Corp",)),)) is bounded, "nothing admitted: nothing held"
    assert held(bounded, (("code", "other", ("x",)),)) is bounded


def _held(schema: dict[str, Any], name: str, argument: str) -> list[str] | None:
    for variant in _calls(schema):
        if variant["properties"]["name"]["const"] == name:
            spec = variant["properties"]["arguments"]["properties"][argument]
            return spec.get("enum")
    return None


# --- the step after a repeat


def _recipes() -> list[Any]:
    @tool
    def get_recipe(recipe_id: str) -> str:
        """A recipe by its id."""
        if recipe_id != "R-7":
            raise LookupError(f"no recipe {recipe_id}; find the id with find_recipe")
        return "butter 200 g"

    @tool(read_only=True)
    def find_recipe(name: str) -> str:
        """A recipe's id, by its name."""
        return "R-7"

    return [get_recipe, find_recipe]


def test_answer_after_repeat_makes_the_step_after_a_repeat_answer_only() -> None:
    brain = ScriptedBrain([
        call_step("find_recipe", name="shortbread"), call_step("find_recipe", name="shortbread"), lean_answer("R-7"),
    ])  # fmt: skip
    run = run_agent(brain, _recipes(), "The id of shortbread?", policies=[AnswerAfterRepeat()])
    assert run.answer == "R-7"
    assert _can_answer(brain.asked[1].schema) and "calls" in json.dumps(brain.asked[1].schema)
    assert "calls" not in json.dumps(brain.asked[2].schema), "the step after the repeat may only answer"
    assert [(e.step, e.hook) for e in _events(run)] == [(3, "shape_step")]
    assert 'find_recipe({"name": "shortbread"}) returned the same result 2 times' in _events(run)[0].reason


def test_answer_after_repeat_leaves_the_run_open_after_an_objection_and_a_different_call_alone() -> None:
    brain = ScriptedBrain([
        call_step("find_recipe", name="shortbread"), call_step("find_recipe", name="tart"),
        call_step("find_recipe", name="shortbread"), lean_answer("R-7?"), call_step("get_recipe", recipe_id="R-7"),
        lean_answer("200 g"),
    ])  # fmt: skip
    verdicts = iter(["say how much butter", True])
    run = run_agent(brain, _recipes(), "Butter in shortbread?", policies=[AnswerAfterRepeat()],
                    accept_answer=lambda text: next(verdicts))  # fmt: skip
    assert run.answer == "200 g"
    assert "calls" in json.dumps(brain.asked[2].schema), "after a different call: no repeat"
    assert "calls" not in json.dumps(brain.asked[3].schema)
    assert "calls" in json.dumps(brain.asked[4].schema), "once a repeat: the step after the objection may call"
    assert run.interventions == {"answer-after-repeat": 1}


def _trading() -> list[Any]:
    @tool(read_only=True)
    def list_stocks() -> str:
        """The stocks one can trade."""
        return '{"stock_list": ["AAPL", "NVDA"], "orders": [12446]}'

    @tool
    def place_order(symbol: str, order_type: str, amount: int) -> str:
        """Place an order."""
        if symbol not in ("AAPL", "NVDA"):
            raise ValueError(f"Invalid stock symbol: {symbol}")
        return '{"order_id": 12446}'

    @tool
    def cancel_order(order_id: int) -> str:
        """Cancel an order by its id."""
        if order_id != 12446:
            raise ValueError(f"Order with ID {order_id} not found.")
        return "cancelled"

    return [list_stocks, place_order, cancel_order]


def test_a_policy_holds_an_argument_to_values_in_the_step_s_schema_a_number_as_a_number() -> None:
    from shapeloop.policies import Policy, RunView, StepShape

    class Hold(Policy):
        def shape_step(self, view: RunView) -> StepShape | None:
            return StepShape(reason="ids seen", hold={"cancel_order": {"order_id": ("12446", "x", "7")}})

    brain = ScriptedBrain([call_step("cancel_order", order_id=12446), lean_answer("done")])
    run = run_agent(brain, _trading(), "Cancel my order", policies=[Hold()])
    assert run.answer == "done"
    assert _held(brain.asked[0].schema, "cancel_order", "order_id") == [12446, 7], "what the integer admits"
    assert _held(brain.asked[0].schema, "place_order", "symbol") is None, "another tool is unchanged"
