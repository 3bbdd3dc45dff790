"""The Abstain policy on the scripted brain: the margins a request's first step carries, where they
come from, the event where a margin changed the model's choice, and a brain without margins."""

from __future__ import annotations

import json

from shapeloop import Capabilities, Reply, Request, ScriptedBrain, run_agent, tool
from shapeloop.events import PolicyIntervened
from shapeloop.policies import Abstain, resolve


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


CALL = json.dumps({"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]})
ANSWER = json.dumps({"answer": "It is sunny in Oslo."})


def margin_brain(leans: dict[int, str], calibration: tuple[tuple[str, float], ...] = ()) -> ScriptedBrain:
    """A brain that honours margins as the embedded backend does, scripted: ``leans[n]`` is what the
    n-th request's margin changed (its reply then answers)."""
    replies = iter([CALL, ANSWER, ANSWER])

    def ask(request: Request) -> Reply:
        n = len(asked)
        asked.append(request)
        if n in leans:
            return Reply(text=ANSWER, leaned=leans[n])
        return Reply(text=next(replies))

    asked: list[Request] = []
    brain = ScriptedBrain(ask, capabilities=Capabilities(margins=True, calibration=calibration))
    brain.requests = asked  # type: ignore[attr-defined]
    return brain


def test_the_first_step_carries_the_calibrated_margin_and_later_steps_none() -> None:
    brain = margin_brain({}, calibration=(("call_margin", 1.5),))
    run = run_agent(brain, [weather], "Weather in Oslo?", policies=(Abstain(),))
    first, second = brain.requests  # type: ignore[attr-defined]
    assert (first.call_margin, second.call_margin) == (1.5, None)
    shaped = [e for e in run.events if isinstance(e, PolicyIntervened) and e.policy == "abstain"]
    assert len(shaped) == 1 and "call only with a lean above 1.50" in shaped[0].change


def test_given_margins_win_over_the_calibrated_ones() -> None:
    brain = margin_brain({}, calibration=(("call_margin", 1.5),))
    run_agent(brain, [weather], "Weather in Oslo?", policies=(Abstain(call_margin=0.25),))
    assert brain.requests[0].call_margin == 0.25  # type: ignore[attr-defined]


def test_a_margin_that_changed_the_choice_is_an_event_naming_the_policy() -> None:
    brain = margin_brain({0: "answered: calling led by 0.40, not more than the margin 1.50"},
                         calibration=(("call_margin", 1.5),))  # fmt: skip
    run = run_agent(brain, [weather], "What is the capital of Norway?", policies=(Abstain(),))
    assert run.answer == "It is sunny in Oslo." and run.steps == 1
    acted = [e for e in run.events if isinstance(e, PolicyIntervened) and e.change.startswith("answered")]
    assert [(e.policy, e.step) for e in acted] == [("abstain", 1)]
    assert run.interventions["abstain"] == 2  # the margins set, and the choice they changed


def test_a_brain_without_margins_runs_unchanged_and_says_why() -> None:
    plain = ScriptedBrain([CALL, ANSWER])
    run = run_agent(plain, [weather], "Weather in Oslo?", policies=(Abstain(call_margin=1.0),))
    assert run.answer == "It is sunny in Oslo." and plain.asked[0].call_margin is None
    left = [e for e in run.events if isinstance(e, PolicyIntervened) and e.change == "left out"]
    assert len(left) == 1 and "margins" in left[0].reason


def test_a_model_without_a_calibrated_margin_leaves_the_policy_out() -> None:
    brain = margin_brain({})
    run = run_agent(brain, [weather], "Weather in Oslo?", policies=resolve("abstain"))
    assert brain.requests[0].call_margin is None  # type: ignore[attr-defined]
    left = [e for e in run.events if isinstance(e, PolicyIntervened) and e.change == "left out"]
    assert len(left) == 1 and "call_margin" in left[0].reason


def test_the_point_after_a_batch_steps_call_is_found_string_aware() -> None:
    from shapeloop.backends._fast import _between_calls

    assert _between_calls('{"calls":[{"name":"a","arguments":{"x":1}}')
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":1}')  # the call is still open
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":"}"}')  # a brace inside a string
    assert _between_calls('{"calls":[{"name":"a","arguments":{"x":"]\\"}"}}')  # an escaped quote, then }
    assert not _between_calls('{"answer":{"a":{"b":1}}')  # not a batch step
    assert not _between_calls('{"calls":[{"name":"a","arguments":{"x":[{"y":1}')  # a list inside the arguments
