"""The policy seam: per-run policies, their three hooks, their events, and what a policy may not be."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers import answer_step, call_step, lean_answer, tool_step
from shapeloop import Capabilities, ScriptedBrain, run_agent, tool
from shapeloop.events import AnswerRejected, CallRefused, PolicyIntervened, ToolCalled
from shapeloop.policies import (
    DEFAULT,
    FitFloor,
    LookupHint,
    ModelPreset,
    Objection,
    Policy,
    Refusal,
    RunView,
    StepShape,
    available,
    resolve,
)
from shapeloop.policies.fit_floor import fit_terms, task_fit
from shapeloop.tools import ToolCall

ROOT = Path(__file__).resolve().parents[1]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 4 °C, rain"


@tool
def send_mail(to: str, text: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _actions(schema: Any) -> list[str]:
    """What a step may do, in either step shape: "tool" (a five-field tool step, or calls) and "answer"."""
    variants = schema.get("anyOf", [schema])
    actions = {v["properties"]["action"].get("const", "") if "action" in v["properties"]
               else "tool" if "calls" in v["properties"] else "answer" for v in variants}  # fmt: skip
    return sorted(actions, key=["tool", "answer"].index)


class ScoringBrain(ScriptedBrain):
    """A scripted brain that scores text as a model would: a tool's words and a task that shares them
    make each other likelier (the scorer the FitFloor policy reads)."""

    def __init__(self, script: Sequence[Any], *, floor: float | None = 0.5) -> None:
        calibration = (() if floor is None else (("fit_floor", floor),)) + (("call_margin", -100.0),)
        super().__init__(list(script), capabilities=Capabilities(logprobs=True, margins=True, calibration=calibration))
        self.scored: list[tuple[str, str]] = []

    def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
        self.scored.append((prefix, continuation))
        shared = {w for w in re.findall(r"\w+", prefix.casefold()) if len(w) > 3} & set(
            re.findall(r"\w+", continuation.casefold())
        )
        return [-0.2 if shared - {"user", "request", "tool"} else -1.0] * 3


def _policy_events(run: Any) -> list[PolicyIntervened]:
    return [e for e in run.events if isinstance(e, PolicyIntervened)]


def test_no_policies_is_the_plain_loop_and_the_run_says_so() -> None:
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Rain.")])
    run = run_agent(brain, [get_weather], "Weather in Oslo?", policies=())
    assert run.ok and run.policies == () and run.interventions == {}
    assert _policy_events(run) == []
    assert run.to_dict()["policies"] == []


def test_fit_floor_answers_at_the_first_step_where_no_tool_fits_and_says_why() -> None:
    brain = ScoringBrain([answer_step("Lima.")])
    run = run_agent(brain, [get_weather], "What is the capital of Peru?", policies=[FitFloor()], batch=False)
    assert run.ok and _actions(brain.asked[0].schema) == ["answer"]
    [event] = _policy_events(run)
    assert (event.policy, event.hook, event.change) == ("fit-floor", "shape_step", "answer only")
    assert "below the floor 0.500" in event.reason
    assert run.policies == ("fit-floor",) and run.interventions == {"fit-floor": 1}


def test_fit_floor_leaves_a_fitting_task_alone_and_judges_only_the_first_step() -> None:
    brain = ScoringBrain([tool_step("get_weather", city="Oslo"), answer_step("Rain.")])
    run = run_agent(brain, [get_weather], "What is the weather in Oslo?", policies=[FitFloor()], batch=False)
    assert run.ok and _policy_events(run) == []
    assert _actions(brain.asked[0].schema) == ["tool", "answer"]
    scored = len(brain.scored)
    assert scored == 4, "3N+1 evaluations for N tools, at the first step only"
    # the same policy object serves a second run afresh
    brain = ScoringBrain([answer_step("Lima.")])
    run = run_agent(brain, [get_weather], "Capital of Peru?", policies=[FitFloor()], batch=False)
    assert run.interventions == {"fit-floor": 1}


def test_fit_floor_in_the_default_calls_step_answers_where_no_tool_fits_and_leaves_a_fitting_task_alone() -> None:
    brain = ScoringBrain([lean_answer("Lima.")])
    run = run_agent(brain, [get_weather], "What is the capital of Peru?", policies=[FitFloor()])
    assert run.ok and brain.asked[0].schema == {
        "type": "object", "properties": {"answer": {"type": "string", "minLength": 1}},
        "required": ["answer"], "additionalProperties": False,
    }  # fmt: skip
    [event] = _policy_events(run)
    assert (event.policy, event.hook, event.change) == ("fit-floor", "shape_step", "answer only")
    brain = ScoringBrain([call_step("get_weather", city="Oslo"), lean_answer("Rain.")])
    run = run_agent(brain, [get_weather], "What is the weather in Oslo?", policies=[FitFloor()])
    assert run.ok and _policy_events(run) == [] and len(brain.scored) == 4
    assert [list(v["properties"]) for v in brain.asked[0].schema["anyOf"]] == [["calls"], ["answer"]]


def test_fit_floor_scores_only_the_opening_of_a_long_request() -> None:
    long = "Please look at this log. " + "line of pasted output " * 400
    brain = ScoringBrain([answer_step("x")])
    run_agent(brain, [get_weather], long, policies=[FitFloor(max_task_chars=300)])
    assert brain.scored and max(len(prefix) + len(text) for prefix, text in brain.scored) < 450
    assert any(prefix.startswith("A user's request: Please look at this log.") for prefix, _ in brain.scored)


def test_the_cheaper_fit_scores_forward_only_the_tools_the_reverse_term_ranks_first() -> None:
    brain = ScoringBrain([])
    tools = [("send_mail", "Send an e-mail."), ("get_weather", "The weather in a city."), ("add", "Add two numbers.")]
    task = "What is the weather in Oslo?"

    def forward_passes() -> list[str]:
        passes = [prefix.split(":")[0] for prefix, _ in brain.scored if prefix.startswith("The tool ")]
        brain.scored.clear()
        return passes

    full = fit_terms(brain.continuation_logprobs, task, tools)
    assert all(f is not None for _, f in full) and len(forward_passes()) == 3
    cheap = fit_terms(brain.continuation_logprobs, task, tools, top=1)
    assert forward_passes() == ["The tool get_weather"]
    assert [f is not None for _, f in cheap] == [False, True, False]
    assert [r for r, _ in cheap] == [r for r, _ in full], "the reverse term is scored for every tool either way"
    score = brain.continuation_logprobs
    assert task_fit(score, task, tools, top=1) == task_fit(score, task, tools)
    assert task_fit(score, "Capital of Peru?", tools, top=0) is not None, "top counts from 1"


def test_fit_floor_without_a_calibrated_floor_is_left_out_unless_given_one() -> None:
    brain = ScoringBrain([tool_step("get_weather", city="Lima"), answer_step("x")], floor=None)
    run = run_agent(brain, [get_weather], "What is the capital of Peru?", policies=[FitFloor()])
    [left] = _policy_events(run)
    assert (left.hook, left.change) == ("for_run", "left out") and "fit_floor" in left.reason
    assert brain.scored == [] and run.policies == ()
    brain = ScoringBrain([answer_step("Lima.")], floor=None)
    run = run_agent(brain, [get_weather], "What is the capital of Peru?", policies=[FitFloor(floor=0.5)])
    assert run.interventions == {"fit-floor": 1}


def test_a_policy_whose_needs_the_brain_lacks_is_left_out_with_an_event_and_the_run_goes_on() -> None:
    brain = ScriptedBrain([tool_step("get_weather", city="Lima"), answer_step("x")])
    run = run_agent(brain, [get_weather], "What is the capital of Peru?", policies=[FitFloor()])
    assert run.ok and run.policies == () and run.interventions == {}
    [event] = _policy_events(run)
    assert (event.hook, event.change) == ("for_run", "left out") and "logprobs" in event.reason


@pytest.mark.parametrize(
    ("task", "city"),
    [("Wie ist das Wetter in München morgen?", "München"), ("北京今天的天气怎么样？", "北京")],
)
def test_every_shipped_policy_refuses_nothing_the_plain_loop_runs_in_german_or_chinese(task: str, city: str) -> None:
    def go(policies: Sequence[Policy]) -> list[ToolCall]:
        brain = ScoringBrain([tool_step("get_weather", city=city), answer_step("Regen.")], floor=-10.0)
        run = run_agent(brain, [get_weather, send_mail], task, policies=policies)
        assert not [e for e in run.events if isinstance(e, CallRefused)]
        ran = tuple(p.name for p in policies if not isinstance(p, ModelPreset))  # this brain declares no preset
        assert run.policies == ran, "every policy ran: none was left out"
        return [e.call for e in run.events if isinstance(e, ToolCalled)]

    plain = go(())
    assert plain == [ToolCall(tool="get_weather", args={"city": city})]
    for name in available():
        assert go(resolve(name)) == plain, name


# A policy written outside src/, through the public hooks alone: the fit floor again.
class MyFitFloor(Policy):
    needs = frozenset({"logprobs"})

    def __init__(self, floor: float) -> None:
        self.floor = floor

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls or view.logprobs is None:
            return None
        fit = task_fit(view.logprobs, view.task, [(t.name, t.description) for t in view.tools])
        if fit is not None and fit < self.floor:
            return StepShape(reason=f"fit {fit:.3f} below {self.floor:.3f}", answer="must")
        return None


def test_a_policy_written_outside_the_package_reproduces_a_shipped_one() -> None:
    for task in ("What is the capital of Peru?", "What is the weather in Oslo?"):
        shipped = ScoringBrain([answer_step("x")])
        mine = ScoringBrain([answer_step("x")])
        a = run_agent(shipped, [get_weather, send_mail], task, policies=[FitFloor(floor=0.5)])
        b = run_agent(mine, [get_weather, send_mail], task, policies=[MyFitFloor(0.5)])
        assert shipped.asked[0].schema == mine.asked[0].schema
        assert [e.change for e in _policy_events(a)] == [e.change for e in _policy_events(b)]
        assert b.policies == ("my-fit-floor",)


class NoMail(Policy):
    def check_call(self, view: RunView, call: ToolCall) -> Refusal | None:
        if call.tool == "send_mail":
            return Refusal(reason="mail is off in this run", feedback="mail is off: answer instead.")
        return None


class WantsDigits(Policy):
    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        if not any(ch.isdigit() for ch in answer):
            return Objection(reason="no number in the answer", feedback="Give the temperature as a number.")
        return None


class Counts(Policy):
    """Per-run state: counts the steps it shaped, and tells the model which one it is at."""

    def __init__(self) -> None:
        self.seen = 0

    def shape_step(self, view: RunView) -> StepShape | None:
        self.seen += 1
        return StepShape(reason="numbering", note=f"(step {self.seen})")


def test_a_refused_call_never_runs_and_the_model_reads_why() -> None:
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send."""
        sent.append(to)
        return "ok"

    class NoSend(NoMail):
        def check_call(self, view: RunView, call: ToolCall) -> Refusal | None:
            return super().check_call(view, ToolCall(tool="send_mail", args={})) if call.tool == "send" else None

    brain = ScriptedBrain([tool_step("send", to="a@b.c"), answer_step("Not sent.")])
    run = run_agent(brain, [send], "Mail a@b.c", policies=[NoSend()])
    assert sent == [] and run.ok
    [refused] = [e for e in run.events if isinstance(e, CallRefused)]
    assert refused.objection == "mail is off in this run"
    assert "was not run: mail is off: answer instead." in brain.asked[1].messages[-1]["content"]
    assert run.interventions == {"no-send": 1}


def test_a_policy_objection_costs_a_step_and_the_acceptor_is_asked_last() -> None:
    accepted: list[str] = []

    def accept(text: str) -> bool:
        accepted.append(text)
        return True

    brain = ScriptedBrain([answer_step("Cold."), answer_step("4 °C.")])
    run = run_agent(brain, [get_weather], "Temperature in Oslo?", policies=[WantsDigits()], accept_answer=accept)
    assert run.ok and run.answer == "4 °C." and run.steps == 2
    assert accepted == ["4 °C."], "the acceptor never saw the answer a policy objected to"
    [rejected] = [e for e in run.events if isinstance(e, AnswerRejected)]
    assert rejected.objection == "no number in the answer"
    assert brain.asked[1].messages[-1]["content"] == "Give the temperature as a number."


def test_a_note_is_read_at_its_step_only_and_per_run_state_stays_in_its_run() -> None:
    policy = Counts()
    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Rain.")])
    run = run_agent(brain, [get_weather], "Weather in Oslo?", policies=[policy])
    assert brain.asked[0].messages[-1]["content"] == "(step 1)"
    assert brain.asked[1].messages[-1]["content"] == "(step 2)"
    assert all(m["content"] not in ("(step 1)", "(step 2)") for m in run.messages), "a note is not kept"
    assert policy.seen == 0, "the policy object itself is untouched: each run has its own instance"
    assert run.interventions == {"counts": 2}


def test_shapes_combine_the_tools_every_policy_offers_and_answer_only_wins() -> None:
    class Only(Policy):
        def __init__(self, *names: str) -> None:
            self.names = frozenset(names)

        def shape_step(self, view: RunView) -> StepShape | None:
            return StepShape(reason="kept", tools=self.names, answer="never")

    brain = ScriptedBrain([answer_step("x")] * 3)
    policies = [Only("get_weather", "send_mail"), Only("get_weather")]
    run_agent(brain, [get_weather, send_mail], "t", policies=policies, batch=False)
    variants = brain.asked[0].schema.get("anyOf", [brain.asked[0].schema])
    assert [v["properties"]["tool"].get("const") for v in variants] == ["get_weather"]
    brain = ScriptedBrain([answer_step("x")])
    run_agent(brain, [get_weather], "t", policies=[Only("get_weather"), Only("nothing")], batch=False)
    assert _actions(brain.asked[0].schema) == ["answer"], "a step left no tool may always answer"


def test_a_step_a_policy_makes_call_may_still_answer_at_the_run_s_last_step() -> None:
    class Calls(Policy):
        def shape_step(self, view: RunView) -> StepShape | None:
            return StepShape(reason="keep going", answer="never")

    brain = ScriptedBrain([tool_step("get_weather", city="Oslo"), answer_step("Rain.")])
    run = run_agent(brain, [get_weather], "Weather in Oslo?", policies=[Calls()], max_steps=2, batch=False)
    assert run.answer == "Rain."
    assert _actions(brain.asked[0].schema) == ["tool"], "before the last step the policy holds"
    assert _actions(brain.asked[1].schema) == ["tool", "answer"], "made to call there, the run would end unanswered"
    assert [e.change for e in _policy_events(run)] == ["no answer", "no change"], "the event says what it changed"
    # the default step: calls only, then calls or an answer
    brain = ScriptedBrain([call_step("get_weather", city="Oslo"), lean_answer("Rain.")])
    run = run_agent(brain, [get_weather], "Weather in Oslo?", policies=[Calls()], max_steps=2)
    assert run.answer == "Rain."
    assert list(brain.asked[0].schema["properties"]) == ["calls"], "before the last step the policy holds"
    assert [list(v["properties"]) for v in brain.asked[1].schema["anyOf"]] == [["calls"], ["answer"]]
    assert [e.change for e in _policy_events(run)] == ["no answer", "no change"]


def test_resolve_reads_presets_and_names_and_refuses_an_unknown_name_listing_the_choices() -> None:
    assert resolve("plain") == () and resolve("default") == DEFAULT and resolve(None) == DEFAULT
    assert [p.name for p in resolve("plain,fit-floor")] == ["fit-floor"]
    assert [p.name for p in resolve("plain,fit-floor,-fit-floor")] == []
    with pytest.raises(ValueError, match=r"unknown policy 'grounding': choose from plain, default"):
        resolve("grounding")
    with pytest.raises(TypeError, match="subclass Policy"):
        run_agent(ScriptedBrain([answer_step("x")]), [], "t", policies=["fit-floor"])  # type: ignore[list-item]


def test_the_old_grounding_switches_warn_and_do_nothing() -> None:
    with pytest.warns(DeprecationWarning, match=r"ground_values=\.\.\.\) has no effect"):
        run = run_agent(ScriptedBrain([answer_step("x")]), [], "t", ground_values=False)
    assert run.ok


# Module dicts that are tables of fixed data, not settings: nothing reads them as configuration.
_TABLES = {
    "BUILTIN",  # the backend registry by name (STYLE: a registry dict looks backends up)
    "_EXTRAS",  # the CLI's install hint for each backend
    "_FORMATS",  # the test double's reply formats
    "_STATUS_COLOR",  # the console's colours
}


def _module_switches(path: Path) -> list[str]:
    """Module-level names bound to a bool (or annotated Literal) in a source file: a switch."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value, annotation = node.targets, node.value, None
        elif isinstance(node, ast.AnnAssign):
            targets, value, annotation = [node.target], node.value, node.annotation
        else:
            continue
        literal = annotation is not None and "Literal" in ast.unparse(annotation)
        boolean = isinstance(value, ast.Constant) and isinstance(value.value, bool)
        name = ast.unparse(targets[0])
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set)) and name not in _TABLES and name != "__all__"
        if literal or boolean or mutable:
            found.append(f"{path.relative_to(ROOT)}: {ast.unparse(targets[0])}")
    return found


def test_no_module_switch_configures_behaviour_and_nothing_patches_shapeloop() -> None:
    switches = [s for path in sorted((ROOT / "src").rglob("*.py")) for s in _module_switches(path)]
    assert switches == []
    globals_used = [p for p in (ROOT / "src").rglob("*.py") if re.search(r"^\s+global\s", p.read_text(), re.M)]
    assert globals_used == []
    patched = []
    for folder in ("tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bsetattr\((?:shapeloop|[a-z_]*_module\b|loop|prompts|offer|search)", line):
                    patched.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert patched == []


def test_a_policy_module_reads_no_word_list() -> None:
    """No shipped policy decides by a list of words: no collection of three or more word literals, no
    regular expression that alternates between words."""
    words = re.compile(r"^[^\W\d_]{2,}$")
    for path in sorted((ROOT / "src" / "shapeloop" / "policies").glob("*.py")):
        tree = ast.parse(path.read_text())
        exported = {
            id(n.value) for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n).startswith("__all__")
        }
        exported |= {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}  # Literal[...] types
        for node in ast.walk(tree):
            if isinstance(node, (ast.Set, ast.List, ast.Tuple)) and id(node) not in exported:
                literals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                assert sum(bool(words.match(w)) for w in literals) < 3, f"{path.name}:{node.lineno}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.search(r"\(\?:[a-z]{3,}\|[a-z]{3,}\|", node.value), f"{path.name}:{node.lineno}"


def test_a_policy_that_needs_a_scorer_is_left_out_where_the_brain_declares_one_but_has_none() -> None:
    from shapeloop import Capabilities, PolicyIntervened
    from shapeloop.policies import FitFloor

    declared_only = ScriptedBrain([answer_step("x")], capabilities=Capabilities(logprobs=True))
    run = run_agent(declared_only, [], "t", policies=(FitFloor(floor=-0.5),))
    assert run.policies == ()
    [left] = [e for e in run.events if isinstance(e, PolicyIntervened)]
    assert (left.hook, left.change) == ("for_run", "left out") and "logprobs" in left.reason


def test_the_fit_floor_without_a_calibrated_floor_is_left_out_and_says_so() -> None:
    from shapeloop import Capabilities, PolicyIntervened
    from shapeloop.policies import FitFloor

    class Scoring(ScriptedBrain):
        def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
            return [-1.0]

    uncalibrated = Capabilities(logprobs=True)
    run = run_agent(Scoring([answer_step("x")], capabilities=uncalibrated), [], "t", policies=(FitFloor(),))
    [left] = [e for e in run.events if isinstance(e, PolicyIntervened)]
    assert run.policies == () and "fit_floor" in left.reason
    run = run_agent(Scoring([answer_step("x")], capabilities=uncalibrated), [], "t", policies=(FitFloor(floor=-2.0),))
    assert run.policies == ("fit-floor",)
    calibrated = Capabilities(logprobs=True, calibration=(("fit_floor", -2.0),))
    run = run_agent(Scoring([answer_step("x")], capabilities=calibrated), [], "t", policies=(FitFloor(),))
    assert run.policies == ("fit-floor",)


class BatchScoringBrain(ScoringBrain):
    """A ScoringBrain that also scores several continuations of one prefix at once, as the embedded
    backend does; it records each batch it is asked."""

    def __init__(self, script: Sequence[Any]) -> None:
        super().__init__(script)
        self.batches: list[tuple[str, tuple[str, ...]]] = []

    def continuations_logprobs(self, prefix: str, continuations: Sequence[str]) -> list[list[float]]:
        self.batches.append((prefix, tuple(continuations)))
        return [self.continuation_logprobs(prefix, c) for c in continuations]


def test_the_fit_floor_scores_the_tools_side_by_side_where_the_brain_can_and_judges_the_same() -> None:
    task = "What is the capital of Peru?"
    one = ScoringBrain([answer_step("Lima.")])
    both = BatchScoringBrain([answer_step("Lima.")])
    runs = [run_agent(b, [get_weather, send_mail], task, policies=[FitFloor()]) for b in (one, both)]
    assert [r.interventions for r in runs] == [{"fit-floor": 1}] * 2
    assert [e.reason for e in _policy_events(runs[0])] == [e.reason for e in _policy_events(runs[1])]
    # the request against both tools, and both tools alone: two batches, not four single passes
    assert [(prefix.split(":")[0], len(docs)) for prefix, docs in both.batches] == [("A user's request", 2),
                                                                                  ("A tool", 2)]  # fmt: skip
    assert sorted(both.scored) == sorted(one.scored), "the same texts scored, only grouped"


# LookupHint: tools of a small trading desk, where a name given for a code fails and a lookup gives the code
PRICES = {"ZETA": "150.75"}


@tool
def stock_price(symbol: str) -> str:
    """Get the current price of a stock.

    Args:
        symbol: the stock symbol that identifies the stock (ZETA).
    """
    if symbol not in PRICES:
        raise ValueError(f"no stock with symbol {symbol!r}")
    return PRICES[symbol]


@tool
def symbol_of(company: str) -> str:
    """Get the stock symbol of a company from the company's name."""
    return "ZETA" if "zeta" in company.casefold() else "not found"


@tool
def remove_from_watchlist(symbol: str) -> str:
    """Remove a stock from the watchlist."""
    return f"removed {symbol}"


@tool
def account_balance() -> str:
    """Get the account's balance."""
    return "1000.00"


DESK = [stock_price, symbol_of, remove_from_watchlist, account_balance]


def _looked_up(*between: str) -> list[str]:
    """A model that calls with a company's name, fails, looks the symbol up and calls again: the
    replies ``between`` come right after the failure."""
    return [
        tool_step("stock_price", symbol="Zeta Corp"), *between, tool_step("symbol_of", company="Zeta Corp"),
        tool_step("stock_price", symbol="ZETA"), answer_step("150.75"),
    ]  # fmt: skip


def test_lookup_hint_names_the_function_that_gives_what_failed_and_has_the_failed_call_made_again() -> None:
    brain = ScriptedBrain(_looked_up())
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint()], batch=False)
    assert run.answer == "150.75"
    assert brain.asked[0].messages[-1]["content"] == "Price of Zeta Corp?", "a first step is the plain loop's"
    note = brain.asked[1].messages[-1]["content"]
    assert "symbol_of(company: string)" in note, note
    assert "remove_from_watchlist" not in note, "a function that takes the failed argument uses it, it does not give it"
    assert "stock_price(" not in note, "the failed function itself is not named"
    assert _actions(brain.asked[1].schema) == ["tool"], "the step after the failure must call"
    again = brain.asked[2].messages[-1]["content"]
    assert "call stock_price again" in again and _actions(brain.asked[2].schema) == ["tool"]
    assert _actions(brain.asked[3].schema) == ["tool", "answer"], "after the call is made again, the step is free"
    assert "symbol_of" not in brain.asked[3].messages[-1]["content"]
    events = _policy_events(run)
    assert [e.hook for e in events] == ["shape_step", "shape_step"] and run.interventions == {"lookup-hint": 2}
    assert "named symbol_of" in events[0].reason


def test_lookup_hint_in_the_default_calls_step_names_the_lookup_then_has_the_failed_call_made_again() -> None:
    brain = ScriptedBrain([
        call_step("stock_price", symbol="Zeta Corp"), call_step("symbol_of", company="Zeta Corp"),
        call_step("stock_price", symbol="ZETA"), lean_answer("150.75"),
    ])  # fmt: skip
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint()])
    assert run.answer == "150.75"
    assert brain.asked[0].messages[-1]["content"] == "Price of Zeta Corp?", "a first step is the plain loop's"
    note = brain.asked[1].messages[-1]["content"]
    assert "symbol_of(company: string)" in note and "remove_from_watchlist" not in note, note
    assert list(brain.asked[1].schema["properties"]) == ["calls"], "the step after the failure must call"
    assert "call stock_price again" in brain.asked[2].messages[-1]["content"]
    assert list(brain.asked[2].schema["properties"]) == ["calls"]
    assert _actions(brain.asked[3].schema) == ["tool", "answer"], "after the call is made again, the step is free"
    assert run.interventions == {"lookup-hint": 2}


def test_lookup_hint_does_nothing_where_no_call_fails_and_hints_once_a_run() -> None:
    brain = ScriptedBrain([tool_step("account_balance"), answer_step("1000.00")])
    run = run_agent(brain, DESK, "My balance?", policies=[LookupHint()], batch=False)
    assert run.interventions == {} and _actions(brain.asked[1].schema) == ["tool", "answer"]
    brain = ScriptedBrain([
        tool_step("stock_price", symbol="Zeta Corp"),
        tool_step("stock_price", symbol="Zeta"),  # fixed its own way, failed again
        answer_step("I could not find it."),
    ])  # fmt: skip
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint(must_call=True)], batch=False)
    assert run.answer == "I could not find it."
    assert _actions(brain.asked[2].schema) == ["tool", "answer"], "after max_hints the model may answer a failure"
    assert run.interventions == {"lookup-hint": 1}


def test_lookup_hint_leaves_the_answer_open_without_must_call_and_keeps_out_where_it_has_nothing_to_name() -> None:
    brain = ScriptedBrain([tool_step("stock_price", symbol="Zeta Corp"), answer_step("Not found.")])
    run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint(must_call=False)], batch=False)
    assert (
        _actions(brain.asked[1].schema) == ["tool", "answer"] and "symbol_of" in brain.asked[1].messages[-1]["content"]
    )
    for tools in ([stock_price], [stock_price, remove_from_watchlist]):
        brain = ScriptedBrain([tool_step("stock_price", symbol="Zeta Corp"), answer_step("Not found.")])
        run = run_agent(brain, tools, "Price of Zeta?", policies=[LookupHint()], batch=False)
        assert run.answer == "Not found." and run.interventions == {}, "nothing else to name: no note, no forced call"
        assert brain.asked[1].messages[-1]["content"].startswith("Result of stock_price")


def test_lookup_hint_asks_for_the_failed_call_again_only_after_a_named_function_worked() -> None:
    brain = ScriptedBrain([
        tool_step("stock_price", symbol="Zeta Corp"),
        tool_step("account_balance"),  # not the function the note named (symbol_of)
        answer_step("I could not get the price."),
    ])  # fmt: skip
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint(top=1)], batch=False)
    assert run.answer == "I could not get the price." and run.interventions == {"lookup-hint": 1}
    brain = ScriptedBrain([tool_step("stock_price", symbol="Zeta Corp"), answer_step("Not found.")])
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint()], max_steps=2, batch=False)
    assert run.answer == "Not found.", "the last step is never made to call: the run would end unanswered"
    assert _actions(brain.asked[1].schema) == ["tool", "answer"]
    assert "symbol_of" in brain.asked[1].messages[-1]["content"]


def test_lookup_hint_waits_through_a_barren_step_and_stays_a_subclass() -> None:
    brain = ScriptedBrain(_looked_up("not json at all"))
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[LookupHint()])
    assert run.answer == "150.75"
    assert "call stock_price again" in brain.asked[3].messages[-1]["content"], "the step after the lookup asks again"

    class Mine(LookupHint):
        def candidates(self, failed: Sequence[Any]) -> list[str]:
            return ["account_balance"]

    brain = ScriptedBrain(
        [tool_step("stock_price", symbol="Zeta Corp"), tool_step("account_balance"), answer_step("x")]
    )
    run = run_agent(brain, DESK, "Price of Zeta Corp?", policies=[Mine()])
    assert "account_balance()" in brain.asked[1].messages[-1]["content"] and run.policies == ("mine",)
    with pytest.raises(ValueError, match="top must be a whole number"):
        LookupHint(top=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("failed", "args", "lookup", "docs"),
    [
        ("kurs", {"kuerzel": "Zeta AG"}, "kuerzel_suchen",
         {"kurs": ("Aktueller Kurs einer Aktie.", "kuerzel", "Das Börsenkürzel der Aktie."),
          "kuerzel_suchen": ("Das Börsenkürzel einer Firma aus ihrem Namen suchen.", "firma", "Name der Firma."),
          "kontostand": ("Den Kontostand des Kontos zeigen.", "konto", "Die Kontonummer.")}),
        ("股价", {"代码": "泽塔公司"}, "查代码",
         {"股价": ("查询股票的当前价格。", "代码", "股票代码。"),
          "查代码": ("根据公司名称查询股票代码。", "公司", "公司名称。"),
          "余额": ("查询账户余额。", "账户", "账户号码。")}),
    ],
)  # fmt: skip
def test_lookup_hint_ranks_documentation_in_any_language(
    failed: str, args: dict[str, str], lookup: str, docs: dict[str, tuple[str, str, str]]
) -> None:
    from shapeloop import Tool
    from shapeloop.policies.base import CallOutcome
    from shapeloop.toolbox import ToolStatus

    tools = [
        Tool(name=name, description=text, parameters={"type": "object", "properties": {p: {"type": "string",
             "description": pd}}, "required": [p]}, fn=lambda **_: "")
        for name, (text, p, pd) in docs.items()
    ]  # fmt: skip
    hint = LookupHint(top=1).for_run("", tools)
    outcome = CallOutcome(call=ToolCall(tool=failed, args=args), status=ToolStatus.ERROR, text="ERROR: ?")
    assert hint.candidates([outcome]) == [lookup]


def test_lookup_hint_serves_each_request_of_a_batched_conversation_afresh() -> None:
    from shapeloop import Conversation

    def batch(name: str, **arguments: str) -> str:
        return json.dumps({"calls": [{"name": name, "arguments": arguments}]})

    brain = ScriptedBrain([
        batch("stock_price", symbol="Zeta Corp"), batch("symbol_of", company="Zeta Corp"),
        batch("stock_price", symbol="ZETA"), json.dumps({"answer": "150.75"}),
        batch("stock_price", symbol="Zeta Corp"), json.dumps({"answer": "?"}),
    ])  # fmt: skip
    talk = Conversation(brain, DESK, policies=[LookupHint()], batch=True)
    first = talk.ask("Price of Zeta Corp?")
    second = talk.ask("And again?")
    assert first.answer == "150.75" and first.run.interventions == {"lookup-hint": 2}
    assert "symbol_of(company: string)" in brain.asked[1].messages[-1]["content"]
    assert '"answer"' not in json.dumps(brain.asked[1].schema), "the step after the failure must call"
    assert second.run.interventions == {"lookup-hint": 1}, "a new request is a new run: it may be hinted again"
    assert all("symbol_of(company" not in m["content"] for m in talk.history), "a note is not kept"
