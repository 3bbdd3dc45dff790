"""The embedded backend's fast path (llguidance masks and forced tokens) on a real model's vocabulary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel

from helpers import need_model
from shapeloop import Tool, run_agent, step_schema, tool, workspace_tools
from shapeloop.brain import Request
from shapeloop.events import PolicyIntervened, ReplyReceived, ToolCalled
from shapeloop.policies import Abstain

pytestmark = pytest.mark.live


class Point(BaseModel):
    x: int
    y: int


@tool
def plot(at: Point, label: str) -> str:
    """Plot a labelled point."""
    return "ok"


@tool
def set_mode(mode: Literal["fast", "slow", "très lent"]) -> str:
    """Set the mode."""
    return mode


@tool
def scale(factor: float, times: int) -> str:
    """Scale by a factor, some times."""
    return str(factor * times)


WRITE = Tool(
    name="files.write",
    description="Write text to a file.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string", "maxLength": 40}, "text": {"type": "string", "maxLength": 120}},
        "required": ["path", "text"],
    },
    fn=lambda path, text: "ok",
)
TOOLSETS = {"write": [WRITE], "nested": [plot], "enum": [set_mode], "numbers": [scale], "answer": []}


@pytest.fixture(scope="module")
def brain():  # type: ignore[no-untyped-def]
    need_model("smollm2-135m", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    return LlamaCppBrain("smollm2-135m", n_ctx=2048, max_tokens=400, engine="llguidance", temperature=1.0)


def _messages(task: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": 'Reply with a JSON step: "reason", "action", "tool", "args", "answer".'},
        {"role": "user", "content": task},
    ]


@pytest.mark.parametrize("kind", list(TOOLSETS))
def test_every_sampled_reply_is_valid_for_the_per_tool_schema(brain: Any, kind: str) -> None:
    schema = step_schema(TOOLSETS[kind], max_reason_chars=120)
    task = 'Write "quoted" text with a back\\slash, a tab\t, a newline\n and unicode: é, 日本, 🙂.'
    for seed in range(4):
        brain.seed = seed
        reply = brain.ask(Request(messages=_messages(task), schema=schema))
        assert reply.engine == "llguidance"
        assert reply.finish == "stop", reply.text
        jsonschema.validate(json.loads(reply.text), schema)
        stats = brain.last_stats
        assert stats["forced_tokens"] > 0 and stats["decode_calls"] < stats["tokens"]


@pytest.mark.parametrize(
    "step",
    [
        {"reason": 'a "quote", a \\ and a\nnewline', "action": "tool", "tool": "files.write",
         "args": {"path": "a b/é.txt", "text": "日本 🙂 \t {\"json\": [1]}"}, "answer": ""},
        {"reason": "r", "action": "answer", "tool": "", "args": {}, "answer": "ünïcødé and \"quotes\""},
    ],
)  # fmt: skip
def test_the_grammar_admits_steps_as_json_dumps_writes_them(brain: Any, step: dict[str, Any]) -> None:
    schema = step_schema([WRITE])
    matcher = brain._fast.compile(schema) if brain._fast else None
    if matcher is None:
        brain.ask(Request(messages=_messages("x"), schema=schema))
        matcher = brain._fast.compile(schema)
    for ensure_ascii in (False, True):
        text = json.dumps(step, ensure_ascii=ensure_ascii)
        tokens = brain.llama.llm.tokenize(text.encode(), add_bos=False, special=False)
        assert matcher.validate_tokens(tokens) == len(tokens), text
        fresh = brain._fast.compile(schema)
        assert fresh.consume_tokens(tokens) and fresh.is_accepting()


def test_the_fast_path_drives_the_loop_and_says_which_engine_ran(tmp_path: Any) -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    (tmp_path / "colour.txt").write_text("The colour named in this file is teal.\n")
    fast = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=4096)
    run = run_agent(fast, workspace_tools(tmp_path), "Read colour.txt and tell me the colour it names.")
    assert run.ok and "teal" in (run.answer or "").lower(), run.reason
    assert {e.engine for e in run.events if isinstance(e, ReplyReceived)} == {"llguidance"}
    slow = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=4096, engine="llama.cpp")
    reply = slow.ask(Request(messages=[{"role": "user", "content": "hi"}], schema=step_schema([])))
    assert reply.engine == "llama.cpp-grammar"


def test_the_choice_between_calling_and_answering_is_measured_in_either_step_shape() -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    tools = workspace_tools(Path(__file__).resolve().parent.parent / "examples" / "demo")
    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    try:
        for batch in (False, True):
            run = run_agent(brain, tools, "What colour does colour.txt name?", max_steps=1, batch=batch, policies=())
            step = json.loads(next(e.text for e in run.events if isinstance(e, ReplyReceived)))
            calls = "calls" in step if batch else step["action"] == "tool"
            gap = brain.last_stats["decision_gap"]
            # measured where it was chosen (a step's action, a batch step's first key): the sign is the choice
            assert isinstance(gap, float) and (gap > 0) == calls, (batch, step, gap)
    finally:
        brain.close()


def test_a_call_margin_turns_a_lean_within_it_into_an_answer_and_says_so() -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    tools = workspace_tools(Path(__file__).resolve().parent.parent / "examples" / "demo")
    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    try:
        assert brain.capabilities.margins
        free = run_agent(brain, tools, "What colour does colour.txt name?", max_steps=1, policies=())
        gap = brain.last_stats["decision_gap"]
        first = json.loads(next(e.text for e in free.events if isinstance(e, ReplyReceived)))
        assert "calls" in first and gap > 0, (first, gap)
        # within the margin, with a floor every fit is below: the check is asked there, and answers
        held = run_agent(brain, tools, "What colour does colour.txt name?", max_steps=1,
                         policies=(Abstain(call_margin=gap + 1.0, fit_floor=100.0),))  # fmt: skip
        step = json.loads(next(e.text for e in held.events if isinstance(e, ReplyReceived)))
        # the same lean, measured again (the prompt cache moves it by hundredths), within the margin
        assert "answer" in step and brain.last_stats["decision_gap"] <= gap + 1.0
        acted = [e for e in held.events if isinstance(e, PolicyIntervened) and e.change.startswith("answered")]
        assert len(acted) == 1 and acted[0].policy == "abstain", held.events
        assert "below the floor 100.000" in acted[0].change
        # within the margin, but the file tool fits the question better than a floor of -100: it calls
        fits = run_agent(brain, tools, "What colour does colour.txt name?", max_steps=1,
                         policies=(Abstain(call_margin=gap + 1.0, fit_floor=-100.0),))  # fmt: skip
        assert "calls" in json.loads(next(e.text for e in fits.events if isinstance(e, ReplyReceived)))
        below = run_agent(brain, tools, "What colour does colour.txt name?", max_steps=1,
                          policies=(Abstain(call_margin=gap - 1.0, fit_floor=100.0),))  # fmt: skip
        assert "calls" in json.loads(next(e.text for e in below.events if isinstance(e, ReplyReceived)))
    finally:
        brain.close()


def test_the_half_billion_models_default_is_its_preset_which_answers_where_no_tool_fits() -> None:
    """qwen2.5-coder-0.5b's catalogue preset is ``abstain``: with no ``policies`` the run adds it and
    says so, and a question no offered tool fits is answered where the plain loop calls the tool
    (a lean to calling of about 0.2 here, within the model's margin of 1.0, and a fit near -2.7)."""
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    @tool
    def calculate_bmi(weight_kg: float, height_m: float) -> str:
        """Calculate the body mass index from a weight in kilograms and a height in metres."""
        return str(round(weight_kg / height_m**2, 1))

    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    try:
        assert brain.capabilities.preset == ("abstain",)
        task = "Who painted the Mona Lisa?"
        plain = run_agent(brain, [calculate_bmi], task, max_steps=1, policies=())
        assert plain.policies == () and [e.call.tool for e in plain.events if isinstance(e, ToolCalled)] == [
            "calculate_bmi"
        ], "the plain loop calls the one tool here: the case no longer tells the preset apart"
        default = run_agent(brain, [calculate_bmi], task, max_steps=2)
        assert default.policies == ("abstain",)
        said = [e for e in default.events if isinstance(e, PolicyIntervened)]
        added = [e.policy for e in said if e.hook == "for_run" and e.change == "on for this model"]
        assert added == ["abstain"], said
        assert any(e.change.startswith("answered") and "below the floor -0.311" in e.change for e in said), said
        assert not [e for e in default.events if isinstance(e, ToolCalled)]
        assert "vinci" in (default.answer or "").lower(), default.answer
    finally:
        brain.close()


def test_the_fit_floor_scores_a_task_a_tool_fits_above_one_it_does_not_and_the_unfit_one_is_answered() -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city: conditions and temperature.

        Args:
            city: the city's name.
        """
        return f"{city}: light rain, 9 °C"

    from shapeloop.policies import FitFloor
    from shapeloop.policies.fit_floor import task_fit

    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    floor = dict(brain.capabilities.calibration).get("fit_floor")
    assert floor is not None and brain.capabilities.logprobs, "the catalogue model has a calibrated floor"
    offered = [("get_weather", get_weather.description)]
    fits = task_fit(brain.continuation_logprobs, "Is it raining in Bergen right now?", offered)
    unfit = task_fit(brain.continuation_logprobs, "Who wrote the novel War and Peace?", offered)
    assert fits is not None and unfit is not None
    # the fitting task scores well above the other; it does not clear qwen 0.5b's floor (-0.99 against
    # -0.311, measured here), a known miss the docs name
    assert unfit < floor and fits - unfit > 0.5, (unfit, floor, fits)
    run = run_agent(brain, [get_weather], "Who wrote the novel War and Peace?", max_steps=2, policies=[FitFloor()])
    assert not [e for e in run.events if isinstance(e, ToolCalled)] and run.answer, run.reason
    assert run.interventions == {"fit-floor": 1}
    # without the policy, the fitting task calls the tool
    run = run_agent(brain, [get_weather], "Is it raining in Bergen right now?", max_steps=3, policies=())
    assert [e.call.tool for e in run.events if isinstance(e, ToolCalled)][:1] == ["get_weather"]
    brain.close()


def test_a_text_longer_than_a_batch_is_scored_whole_in_its_own_context() -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    from shapeloop.backends.llamacpp import LlamaCppBrain

    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    try:
        counting = "one two three four five six seven eight nine ten. " * 60  # about 660 tokens: two batches
        assert len(brain.llama.llm.tokenize(counting.encode())) > brain.llama.llm.n_batch
        scores = brain.continuation_logprobs(counting, " one two three four five")
        # it was cut to nothing (and the fit's reverse term read 0) when the prefix passed a batch; now
        # every token is scored, at its place after the whole prefix: the model continues the count
        assert len(scores) == len(brain.llama.llm.tokenize(b" one two three four five", add_bos=False))
        assert sum(scores) / len(scores) > -1.0, scores
        odd = brain.continuation_logprobs(counting, " purple elephants sing")
        assert sum(odd) / len(odd) < sum(scores) / len(scores) - 2.0, (odd, scores)
    finally:
        brain.close()


def test_scoring_reuses_what_a_call_shares_with_the_last_and_scores_the_same() -> None:
    need_model("qwen2.5-coder-0.5b", fast=True)
    import numpy as np

    from shapeloop.backends.llamacpp import LlamaCppBrain

    def same(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and np.allclose(a, b, atol=0.25) and abs(np.mean(a) - np.mean(b)) < 0.15

    brain = LlamaCppBrain("qwen2.5-coder-0.5b", n_ctx=2048)
    context = brain.llama._scorer()[0]
    decoded: list[int] = []
    plain_decode = context.decode

    def counting(batch: Any) -> None:
        decoded.append(batch.batch.n_tokens)
        plain_decode(batch)

    context.decode = counting
    try:
        request = "A user's request: is it raining in Bergen right now?\nA tool that does it:"
        first = brain.llama.continuation_logprobs(request, " get_weather: current weather for a city")
        decoded.clear()
        mail = " send_mail: send an e-mail"
        shared = brain.llama.continuation_logprobs(request, mail)
        # the second call kept the request and evaluated only its last token and the continuation
        assert sum(decoded) == len(brain.llama.llm.tokenize(mail.encode(), add_bos=False)), decoded
        brain.llama.continuation_logprobs("Something else entirely:", " x")  # the context now holds other text
        decoded.clear()
        fresh = brain.llama.continuation_logprobs(request, mail)
        assert sum(decoded) > len(brain.llama.llm.tokenize(request.encode())), "the request evaluated again"
        again = brain.llama.continuation_logprobs(request, " get_weather: current weather for a city")
        # the same scores, but for the arithmetic of a batch of another shape (llama.cpp sums the
        # attention in another order: up to 0.14 a token here, measured)
        assert same(shared, fresh) and same(first, again), (shared, fresh)
        # side by side, each in a sequence of its own, the same scores as one at a time; twenty
        # continuations fill two groups (15 sequences at a time)
        docs = [" get_weather: current weather for a city", " send_mail: send an e-mail", " x", " get_weather"]
        docs += [f" tool_{i}: does thing number {i} for the user" for i in range(16)]
        together = brain.llama.continuations_logprobs(request, docs)
        alone = [brain.llama.continuation_logprobs(request, doc) for doc in docs]
        assert [len(t) for t in together] == [len(a) for a in alone]
        assert all(same(t, a) for t, a in zip(together, alone, strict=True)), (together, alone)
        # the brain keeps the scores after "A tool:" across tasks, and gives them in the order asked
        bases = brain.continuations_logprobs("A tool:", docs[:2])
        assert brain.continuations_logprobs("A tool:", [docs[1], docs[0], docs[1]]) == [bases[1], bases[0], bases[1]]
    finally:
        brain.close()


@tool
def day_of_week(date: str) -> str:
    """The day of the week of a date.

    Args:
        date: the date, YYYY-MM-DD.
    """
    return "a Tuesday"
