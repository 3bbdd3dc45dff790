"""The Abstain policy on the scripted brain: a first step that leans to calling within the margin is
checked against the best tool's fit, and answers only where no tool fits; the check is asked only
there; where the thresholds come from; the events; a brain without margins or log-probabilities."""

from __future__ import annotations

import json
import re

from shapeloop import Capabilities, Reply, Request, ScriptedBrain, run_agent, tool
from shapeloop.events import PolicyIntervened
from shapeloop.policies import Abstain, Policy, RunView, StepShape, resolve
from shapeloop.policies.abstain import TOP


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


CALL = json.dumps({"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]})
ANSWER = json.dumps({"answer": "It is sunny in Oslo."})
CALIBRATED = (("call_margin", 1.0), ("fit_floor", 0.5))


class LeaningBrain(ScriptedBrain):
    """A brain that honours margins as the embedded backend does, scripted: its first step leans to
    calling by ``lean``; within the request's margin it asks the request's check with that lean, and
    answers where the check gives a reason. It scores text as a model would: a task that shares a
    tool's words fits it."""

    def __init__(self, lean: float, calibration: tuple[tuple[str, float], ...] = CALIBRATED,
                 *, margins: bool = True, logprobs: bool = True) -> None:  # fmt: skip
        super().__init__(self._reply, capabilities=Capabilities(margins=margins, logprobs=logprobs,
                                                                calibration=calibration))  # fmt: skip
        self.lean = lean
        self.requests: list[Request] = []
        self.checked: list[float] = []  # the leans the request's check was asked with
        self.scored: list[tuple[str, str]] = []

    def _reply(self, request: Request) -> Reply:
        first = not self.requests
        self.requests.append(request)
        margin = request.call_margin
        if first and margin is not None and self.lean <= margin:
            if request.confirm_answer is None:
                why = f"not more than the margin {margin:.2f}"
            else:
                self.checked.append(self.lean)
                why = request.confirm_answer(self.lean)
            if why:
                return Reply(text=ANSWER, leaned=f"answered: calling led by {self.lean:.2f}, {why}")
        return Reply(text=CALL if first else ANSWER)

    def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
        self.scored.append((prefix, continuation))
        words = {w for w in re.findall(r"\w+", prefix.casefold()) if len(w) > 3} - {"user", "request", "tool", "that"}
        return [-0.2 if words & set(re.findall(r"\w+", continuation.casefold())) else -1.0] * 3


def _events(run: object, change: str = "") -> list[PolicyIntervened]:
    return [e for e in run.events if isinstance(e, PolicyIntervened) and e.change.startswith(change)]  # type: ignore[attr-defined]


def test_a_weak_lean_where_no_tool_fits_answers_and_the_event_says_both_numbers() -> None:
    brain = LeaningBrain(lean=0.4)
    run = run_agent(brain, [weather], "What is the capital of Norway?", policies=(Abstain(),))
    assert run.answer == "It is sunny in Oslo." and run.steps == 1 and brain.checked == [0.4]
    [acted] = _events(run, "answered")
    assert (acted.policy, acted.step) == ("abstain", 1)
    assert "calling led by 0.40" in acted.change and "abstain's margin 1.00" in acted.change
    assert "below the floor 0.500" in acted.change
    assert run.interventions["abstain"] == 2  # the margin set, and the choice it changed


def test_a_weak_lean_where_a_tool_fits_calls_after_the_check() -> None:
    brain = LeaningBrain(lean=0.4)
    run = run_agent(brain, [weather], "What is the weather in Oslo today?", policies=(Abstain(),))
    assert brain.checked == [0.4] and brain.scored  # the fit was measured, and it let the call stand
    assert run.steps == 2 and _events(run, "answered") == []
    assert [e.change for e in _events(run)] == [
        "call only with a lean above 1.00, or where the policy's check says a call is right"
    ]


@tool
def convert(amount: float, unit: str) -> str:
    """Convert an amount between units."""
    return f"{amount} {unit}"


@tool
def lookup_word(word: str) -> str:
    """Look a word up in a dictionary."""
    return word


@tool
def roll_dice(sides: int) -> str:
    """Roll a die with some number of sides."""
    return str(sides)


def test_the_fit_scores_forward_only_the_tools_ranked_first_and_decides_as_the_full_fit_here() -> None:
    def forward_passes(policy: Abstain, task: str) -> tuple[list[str], bool]:
        brain = LeaningBrain(lean=0.4)
        run = run_agent(brain, [convert, weather, lookup_word, roll_dice], task, policies=(policy,))
        tools = [
            prefix.split(":")[0].removeprefix("The tool ")
            for prefix, _ in brain.scored
            if prefix.startswith("The tool ")
        ]
        return tools, bool(_events(run, "answered"))

    assert forward_passes(Abstain(top=None), "What is the weather in Oslo today?") == (
        ["convert", "weather", "lookup_word", "roll_dice"],
        False,
    )
    assert forward_passes(Abstain(top=1), "What is the weather in Oslo today?") == (["weather"], False)
    assert forward_passes(Abstain(top=2), "What is the capital of Norway?")[1] is True
    assert len(forward_passes(Abstain(), "What is the capital of Norway?")[0]) == TOP == 3  # the default


def test_a_strong_lean_calls_and_the_fit_is_never_measured() -> None:
    brain = LeaningBrain(lean=3.0)
    run = run_agent(brain, [weather], "What is the capital of Norway?", policies=(Abstain(),))
    assert run.steps == 2 and brain.checked == [] and brain.scored == []
    assert _events(run, "answered") == []


def test_only_the_first_step_carries_the_margin_and_given_values_win() -> None:
    brain = LeaningBrain(lean=3.0)
    run_agent(brain, [weather], "Weather in Oslo?", policies=(Abstain(),))
    first, second = brain.requests
    assert (first.call_margin, second.call_margin) == (1.0, None)
    assert first.confirm_answer is not None and second.confirm_answer is None
    given = LeaningBrain(lean=1.5)
    run = run_agent(given, [weather], "What is the capital of Norway?",
                    policies=(Abstain(call_margin=2.0, fit_floor=-5.0),))  # fmt: skip
    assert given.requests[0].call_margin == 2.0 and given.checked == [1.5]
    assert run.steps == 2  # every fit is above a floor of -5: the call stands


def test_the_first_policy_whose_margin_holds_the_lean_and_agrees_decides() -> None:
    class Margin(Policy):
        """A user's policy: a margin with no check."""

        def shape_step(self, view: RunView) -> StepShape | None:
            return StepShape(reason="test", call_margin=0.5) if view.step == 1 else None

    unfit = "What is the capital of Norway?"
    weak = run_agent(LeaningBrain(lean=0.3), [weather], unfit, policies=(Margin(), Abstain()))
    assert [e.policy for e in _events(weak, "answered")] == ["margin"]
    middling = LeaningBrain(lean=0.8)  # above the user's margin, within abstain's
    run = run_agent(middling, [weather], unfit, policies=(Margin(), Abstain()))
    assert middling.requests[0].call_margin == 1.0
    assert [e.policy for e in _events(run, "answered")] == ["abstain"]


def test_a_brain_without_margins_or_logprobs_runs_unchanged_and_says_why() -> None:
    for margins, logprobs, lacking in ((False, True, "margins"), (True, False, "logprobs")):
        brain = LeaningBrain(lean=0.1, margins=margins, logprobs=logprobs)
        run = run_agent(brain, [weather], "What is the capital of Norway?", policies=(Abstain(),))
        assert run.steps == 2 and brain.requests[0].call_margin is None and brain.checked == []
        [left] = _events(run, "left out")
        assert lacking in left.reason


def test_a_model_without_calibrated_values_leaves_the_policy_out() -> None:
    for calibration, lacking in (((("fit_floor", 0.5),), "call_margin"), ((("call_margin", 1.0),), "fit_floor")):
        brain = LeaningBrain(lean=0.1, calibration=calibration)
        run = run_agent(brain, [weather], "What is the capital of Norway?", policies=resolve("abstain"))
        assert brain.requests[0].call_margin is None and run.steps == 2
        [left] = _events(run, "left out")
        assert lacking in left.reason


def test_the_point_after_a_batch_steps_call_is_found_string_aware() -> None:
    from shapeloop.backends._fast import _between_calls

    assert _between_calls('{"calls":[{"name":"a","arguments":{"x":1}}')
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":1}')  # the call is still open
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":"}"}')  # a brace inside a string
    assert _between_calls('{"calls":[{"name":"a","arguments":{"x":"]\\"}"}}')  # an escaped quote, then }
    assert not _between_calls('{"answer":{"a":{"b":1}}')  # not a batch step
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":[{"y":1}')  # a list inside the arguments
