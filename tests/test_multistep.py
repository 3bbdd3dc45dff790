"""Issue 46's policies for multi-step work: a model's own preset, looking before acting, a state
line read from the tools that read, and values held to what the results gave."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from helpers import call_step, calls_step, lean_answer
from shapeloop import Capabilities, SchemaSupport, ScriptedBrain, run_agent, tool
from shapeloop.events import CallRefused, PolicyIntervened, ToolCalled
from shapeloop.models import CATALOGUE
from shapeloop.policies import (
    DEFAULT,
    AnswerAfterRepeat,
    HoldValues,
    LookAfterFailure,
    LookFirst,
    LookupHint,
    ModelPreset,
    StateLine,
    resolve,
)
from shapeloop.policies.hold import result_values, user_values

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


def _offered(schema: dict[str, Any]) -> set[str]:
    """The tools a calls step offers."""
    return {v["properties"]["name"]["const"] for v in _calls(schema)}


def _can_answer(schema: dict[str, Any]) -> bool:
    return any("answer" in v.get("properties", {}) for v in schema.get("anyOf", [schema]))


# --- the model's own preset (item 4)


def test_the_default_adds_the_policies_the_brain_declares_for_its_model_and_says_so() -> None:
    brain = ScriptedBrain([lean_answer("hi")], capabilities=Capabilities(preset=("look-first",)))
    run = run_agent(brain, _desk(), "Hello")
    assert run.policies == ("look-first",)
    added = [e for e in _events(run) if e.hook == "for_run"]
    assert [(e.policy, e.change) for e in added] == [("look-first", "on for this model")]
    assert "catalogue" in added[0].reason


def test_the_plain_loop_and_a_list_of_ones_own_take_no_preset() -> None:
    declares = Capabilities(preset=("look-first",))
    plain = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello", policies=())
    assert plain.policies == () and _events(plain) == []
    mine = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                     policies=[LookupHint()])  # fmt: skip
    assert mine.policies == ("lookup-hint",)
    both = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                     policies=[LookFirst(), ModelPreset()])  # fmt: skip
    assert both.policies == ("look-first",), "a policy the run names already is not added twice"


def test_a_policy_taken_out_by_name_stays_out_of_the_model_s_preset_and_the_preset_can_go() -> None:
    declares = Capabilities(preset=("look-first", "hold-values"))
    run = run_agent(ScriptedBrain([lean_answer("hi")], capabilities=declares), _desk(), "Hello",
                    policies=resolve("default,-look-first"))  # fmt: skip
    assert run.policies == ("hold-values",)
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


# --- looking before acting (item 2)


def test_look_first_offers_only_the_reading_tools_at_a_request_s_first_step_then_all() -> None:
    brain = ScriptedBrain([call_step("pwd"), call_step("mkdir", name="alex"), lean_answer("made")])
    run = run_agent(brain, _desk(), "Make a folder alex", policies=[LookFirst()])
    assert run.answer == "made"
    assert _offered(brain.asked[0].schema) == {"pwd", "ls"} and not _can_answer(brain.asked[0].schema)
    assert _offered(brain.asked[1].schema) == {"pwd", "ls", "cd", "mkdir"} and _can_answer(brain.asked[1].schema)
    assert [(e.policy, e.step) for e in _events(run)] == [("look-first", 1)]
    assert "ls, pwd" in _events(run)[0].reason


def test_a_reading_step_keeps_the_plain_prompt_so_the_prompt_cache_holds() -> None:
    plain = ScriptedBrain([call_step("pwd"), lean_answer("/")])
    run_agent(plain, _desk(), "Where am I?", policies=())
    looked = ScriptedBrain([call_step("pwd"), lean_answer("/")])
    run_agent(looked, _desk(), "Where am I?", policies=[LookFirst()])
    assert looked.asked[0].messages == plain.asked[0].messages, "every tool is documented: only the schema differs"
    assert _offered(looked.asked[0].schema) == {"pwd", "ls"} != _offered(plain.asked[0].schema)


def test_look_first_stays_out_where_the_tools_all_read_or_all_act() -> None:
    readers = [t for t in _desk() if t.read_only]
    brain = ScriptedBrain([lean_answer("ok")])
    run = run_agent(brain, readers, "Where am I?", policies=[LookFirst()])
    assert run.interventions == {} and _can_answer(brain.asked[0].schema)
    actors = [t for t in _desk() if not t.read_only]
    run = run_agent(ScriptedBrain([lean_answer("ok")]), actors, "Go", policies=[LookFirst()])
    assert run.interventions == {}


def test_look_after_failure_reads_after_an_acting_call_fails_and_not_after_a_read() -> None:
    brain = ScriptedBrain([
        call_step("cd", folder="alex"), call_step("ls"), call_step("cd", folder="docs"), lean_answer("in docs"),
    ])  # fmt: skip
    run = run_agent(brain, _desk(), "Go into docs", policies=[LookAfterFailure()])
    assert run.answer == "in docs"
    assert _offered(brain.asked[0].schema) == {"pwd", "ls", "cd", "mkdir"}, "the first step is the plain loop's"
    assert _offered(brain.asked[1].schema) == {"pwd", "ls"} and not _can_answer(brain.asked[1].schema)
    assert _offered(brain.asked[2].schema) == {"pwd", "ls", "cd", "mkdir"}, "one reading step a failure"
    assert [e.step for e in _events(run)] == [2] and "cd failed" in _events(run)[0].reason


def test_look_after_failure_ignores_a_failed_read() -> None:
    @tool(read_only=True)
    def cat(path: str) -> str:
        """Show a file."""
        raise FileNotFoundError(path)

    brain = ScriptedBrain([call_step("cat", path="x"), lean_answer("no such file")])
    run = run_agent(brain, [*_desk(), cat], "Show x", policies=[LookAfterFailure()])
    assert run.interventions == {} and _can_answer(brain.asked[1].schema)


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


# --- values that come from results (item 3)


def test_hold_values_holds_the_failed_argument_to_the_values_a_result_gave() -> None:
    brain = ScriptedBrain([
        call_step("buy", symbol="Zeta Corp", amount=5), call_step("symbol_of", company="Zeta Corp"),
        call_step("buy", symbol="ZETA", amount=5), lean_answer("bought"),
    ])  # fmt: skip
    run = run_agent(brain, [symbol_of, buy], "Buy 5 shares of Zeta Corp", policies=[HoldValues()])
    assert run.answer == "bought"
    assert _held(brain.asked[1].schema, "buy", "symbol") is None, "nothing is held before a result comes back"
    held = _held(brain.asked[2].schema, "buy", "symbol")
    assert held is not None and held[:2] == ["ZETA", "NYSE"], "the results' values first, the latest result's first"
    assert "Zeta Corp" not in held, "the value the tool refused is held out"
    assert {"Buy", "shares"} <= set(held), "the user's own words stay in reach"
    assert _held(brain.asked[2].schema, "symbol_of", "company") is None, "another tool is unchanged"
    assert _held(brain.asked[3].schema, "buy", "symbol") is None, "the hold ends once the tool is called"
    calls = [e.call.args for e in run.events if isinstance(e, ToolCalled) and e.call.tool == "buy"]
    assert calls[-1] == {"symbol": "ZETA", "amount": 5}, "a value a result gave is accepted"
    assert [e.step for e in _events(run)] == [3] and "symbol='Zeta Corp'" in _events(run)[0].reason


def test_a_hold_keeps_the_tool_s_own_schema_and_offers_only_what_it_admits() -> None:
    from shapeloop.offer import held

    code = tool(lambda code: code, name="code", description="A code.")
    bounded = dataclasses.replace(code, parameters={"type": "object", "properties": {
        "code": {"type": "string", "maxLength": 4, "description": "four letters"}}, "required": ["code"]})  # fmt: skip
    spec = held(bounded, (("code", "code", ("ZETA", "Zeta Corp")),)).parameters["properties"]["code"]
    assert spec == {"type": "string", "maxLength": 4, "description": "four letters", "enum": ["ZETA"]}
    assert held(bounded, (("code", "code", ("Zeta Corp",)),)) is bounded, "nothing admitted: nothing held"
    assert held(bounded, (("code", "other", ("x",)),)) is bounded


def test_hold_values_offers_what_results_gave_before_the_failure_and_outlives_another_tool_s_failure() -> None:
    @tool(read_only=True)
    def quote(symbol: str) -> str:
        """A stock's quote."""
        raise ValueError("market closed")

    brain = ScriptedBrain([
        call_step("symbol_of", company="Zeta Corp"), call_step("buy", symbol="ZETA Corp", amount=1),
        call_step("quote", symbol="ZETA"), call_step("symbol_of", company="Acme"),
        call_step("buy", symbol="ZETA", amount=1), lean_answer("bought"),
    ])  # fmt: skip
    run = run_agent(brain, [symbol_of, buy, quote], "Buy one Zeta Corp", policies=[HoldValues()])
    assert run.answer == "bought"
    held = _held(brain.asked[4].schema, "buy", "symbol")
    assert held is not None and "ZETA" in held and "ZETA Corp" not in held, held
    assert _held(brain.asked[3].schema, "buy", "symbol") is None, "held only once a result came back"


def test_hold_values_leaves_a_user_s_value_alone_where_nothing_failed() -> None:
    brain = ScriptedBrain([call_step("buy", symbol="MSFT", amount=2), lean_answer("bought")])
    run = run_agent(brain, [symbol_of, buy], "Buy 2 MSFT", policies=[HoldValues()])
    assert run.answer == "bought" and run.interventions == {}, "a user's value no result contains is accepted"


def test_hold_values_refuses_the_wrong_copy_where_the_reply_is_not_constrained() -> None:
    prose = Capabilities(schema=SchemaSupport.NONE)
    brain = ScriptedBrain([
        call_step("buy", symbol="Zeta Corp", amount=5), call_step("symbol_of", company="Zeta Corp"),
        call_step("buy", symbol="Zeta Corp", amount=5), call_step("buy", symbol="MSFT", amount=5),
        lean_answer("bought MSFT"),
    ], capabilities=prose)  # fmt: skip
    run = run_agent(brain, [symbol_of, buy], "Buy 5 shares of Zeta Corp, or MSFT", policies=[HoldValues()])
    refused = [e for e in run.events if isinstance(e, CallRefused)]
    assert [e.call.args["symbol"] for e in refused] == ["Zeta Corp"]
    told = brain.asked[3].messages[-2]["content"] + brain.asked[3].messages[-1]["content"]
    assert "give symbol one of the values the results gave: ZETA, NYSE" in told, told
    made = [e.call.args["symbol"] for e in run.events if isinstance(e, ToolCalled) and e.call.tool == "buy"]
    assert made == ["Zeta Corp", "MSFT"], "the failed value made again is refused; a user's other value runs"
    assert any(e.hook == "check_call" for e in _events(run))


def test_hold_values_suspects_nothing_where_two_arguments_are_unproven() -> None:
    @tool
    def transfer(source: str, target: str) -> str:
        """Move money between accounts."""
        raise ValueError("no such account")

    brain = ScriptedBrain([
        call_step("transfer", source="a", target="b"), call_step("symbol_of", company="Zeta"), lean_answer("no"),
    ])  # fmt: skip
    run = run_agent(brain, [transfer, symbol_of], "Move money from a to b", policies=[HoldValues()])
    assert run.interventions == {}


def test_values_are_read_from_json_and_text_results_and_the_user_s_words() -> None:
    assert result_values('{"a": {"id": 17, "ok": true, "names": ["x", "y"], "text": "%s"}}' % ("z" * 81)) == [
        "17", "x", "y"]  # fmt: skip
    assert result_values("notes.txt\n\n docs \n" + "z" * 200) == ["notes.txt", "docs"]
    hotels = "hotels in Kyoto: H-8812 Gion Garden Inn 41,800 JPY; H-2301 Kamo Inn"
    assert result_values(hotels)[:6] == [hotels, "hotels", "in", "Kyoto", "H-8812", "Gion"], "the line, then its words"
    assert "41,800" in result_values(hotels) and "JPY" in result_values(hotels), "no punctuation around a word"
    assert user_values("Move 'annual report.txt' to «Neue Berichte», bitte!") == [
        "annual report.txt",
        "Neue Berichte",
        "Move",
        "annual",
        "report.txt",
        "to",
        "Neue",
        "Berichte",
        "bitte",
    ]
    assert user_values("把「年度报告」移到新文件夹。") == ["年度报告", "把「年度报告」移到新文件夹"]


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


def test_hold_values_counts_a_result_that_came_back_with_the_failure_in_one_step() -> None:
    """A lookup and the call that needs its value, written in one step: the lookup's result is read
    with the failure, so the step after holds the failed argument to it."""
    brain = ScriptedBrain([
        calls_step(("symbol_of", {"company": "Zeta Corp"}), ("buy", {"symbol": "ZC", "amount": 5})),
        call_step("buy", symbol="ZETA", amount=5), lean_answer("bought"),
    ])  # fmt: skip
    run = run_agent(brain, [symbol_of, buy], "Buy 5 shares of Zeta Corp", policies=[HoldValues()])
    assert run.answer == "bought"
    held = _held(brain.asked[1].schema, "buy", "symbol")
    assert held is not None and held[0] == "ZETA" and "ZC" not in held, held
    assert [e.step for e in _events(run)] == [2]


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


def test_a_conversation_s_later_request_reads_the_earlier_requests_calls() -> None:
    from shapeloop import Conversation
    from shapeloop.policies import Policy, RunView, StepShape

    seen: list[tuple[str, ...]] = []

    class Spy(Policy):
        def shape_step(self, view: RunView) -> StepShape | None:
            seen.append(tuple(f"{o.call.tool}:{o.status.value}:{o.text}" for o in view.earlier))
            return None

    brain = ScriptedBrain([call_step("list_stocks"), lean_answer("two"), lean_answer("ok")])
    with Conversation(brain, _trading(), policies=[Spy()]) as talk:
        talk.ask("Which stocks?")
        talk.ask("Thanks")
    assert seen == [(), (), ('list_stocks:ok:{"stock_list": ["AAPL", "NVDA"], "orders": [12446]}',)]


def test_hold_values_holds_to_what_an_earlier_request_s_results_gave_and_may_make_the_next_step_call() -> None:
    """The value failed is the one the error names (two arguments were unproven); the values held
    come from the earlier request; with must_call the step after the failure may not answer."""
    from shapeloop import Conversation

    brain = ScriptedBrain([
        call_step("list_stocks"), lean_answer("AAPL and NVDA"),
        call_step("place_order", symbol="AMD", order_type="Buy", amount=50),
        call_step("place_order", symbol="NVDA", order_type="Buy", amount=50), lean_answer("bought"),
    ])  # fmt: skip
    with Conversation(brain, _trading(), policies=[HoldValues(must_call=True)]) as talk:
        talk.ask("Which stocks can I trade?")
        turn = talk.ask("Buy 50 shares of the one that makes GPUs")
    assert turn.answer == "bought"
    held = _held(brain.asked[3].schema, "place_order", "symbol")
    assert held is not None and held[:2] == ["AAPL", "NVDA"] and "AMD" not in held, held
    assert not _can_answer(brain.asked[3].schema), "the first held step may only call"
    assert _can_answer(brain.asked[4].schema)
    assert _held(brain.asked[3].schema, "place_order", "order_type") is None


def test_hold_values_holds_a_whole_number_to_the_numbers_results_gave_and_trusts_the_user_s_numbers() -> None:
    from shapeloop import Conversation

    brain = ScriptedBrain([
        call_step("list_stocks"), lean_answer("ok"),
        call_step("cancel_order", order_id=1), call_step("cancel_order", order_id=12446), lean_answer("done"),
    ])  # fmt: skip
    with Conversation(brain, _trading(), policies=[HoldValues()]) as talk:
        talk.ask("List the stocks")
        talk.ask("Cancel my order")
    assert _held(brain.asked[3].schema, "cancel_order", "order_id") == [12446], "a number written as a number"
    # an amount the user wrote is theirs, not a suspect: the symbol the error names is
    brain = ScriptedBrain([call_step("place_order", symbol="ZZ", order_type="Buy", amount=5), lean_answer("no")])
    run = run_agent(brain, _trading(), "Buy 5 shares of ZZ", policies=[HoldValues()])
    assert run.interventions == {}, "nothing came back to hold the symbol to"


def test_a_resumed_conversation_s_policies_read_the_calls_its_log_recorded(tmp_path: Any) -> None:
    from shapeloop import Conversation
    from shapeloop.policies import Policy, RunView, StepShape

    seen: list[tuple[str, ...]] = []

    class Spy(Policy):
        def shape_step(self, view: RunView) -> StepShape | None:
            seen.append(tuple(f"{o.call.tool}:{o.status.value}" for o in view.earlier))
            return None

    path = tmp_path / "talk.jsonl"
    with Conversation(ScriptedBrain([call_step("cancel_order", order_id=3), lean_answer("no")]), _trading(),
                      policies=(), transcript_path=path) as talk:  # fmt: skip
        talk.ask("Cancel order 3")
    with Conversation.resume(path, ScriptedBrain([lean_answer("ok")]), _trading(), policies=[Spy()]) as again:
        again.ask("And now?")
    assert seen == [("cancel_order:error",)]


def test_hold_values_does_not_act_where_no_result_gave_a_number_for_a_whole_number_argument() -> None:
    from shapeloop import Conversation

    brain = ScriptedBrain([
        call_step("list_stocks"), lean_answer("ok"),
        call_step("cancel_order", order_id=77), lean_answer("not found"),
    ])  # fmt: skip
    tools = _trading()
    tools[0] = tool(read_only=True)(lambda: '{"stock_list": ["AAPL", "NVDA"]}')  # no number anywhere
    tools[0] = dataclasses.replace(tools[0], name="list_stocks")
    with Conversation(brain, tools, policies=[HoldValues(must_call=True)]) as talk:
        talk.ask("List the stocks")
        turn = talk.ask("Cancel my order")
    assert turn.answer == "not found" and turn.run.interventions == {}, "nothing to hold an id to: no step made to call"
