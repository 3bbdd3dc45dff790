"""The embedded backend's own logic, on a fake model: the schema it compiles (and the flat one in
its place), the reason bound, the room left for the reply, and the reused prompt prefix."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from helpers import answer_step
from shapeloop import Constraint, ContextOverflow, Request, SchemaRefused, flat_schema, step_schema, tool
from shapeloop.backends.llamacpp import LlamaCppBrain


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@dataclass
class Rendered:
    prompt: str
    stop: list[str] = field(default_factory=list)
    stopping_criteria: Any = None


@dataclass
class FakeLlama:
    """What LlamaCppBrain asks of a loaded model; a token is a character."""

    reply: str = answer_step("ok")
    refuse: tuple[str, ...] = ()  # grammars for schemas whose JSON holds one of these strings fail
    compiled: list[dict[str, Any]] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    resets: int = 0
    closed: int = 0

    def close(self) -> None:
        self.closed += 1

    def render(self, messages: Any) -> tuple[Rendered, list[int]]:
        prompt = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return Rendered(prompt), [ord(c) for c in prompt]

    def evaluated(self) -> list[int]:
        return list(self.held)

    def keep(self, count: int) -> None:
        del self.held[count:]

    def reset(self) -> None:
        self.resets += 1
        self.held.clear()

    def eval(self, tokens: list[int]) -> None:
        self.held += tokens

    def grammar(self, schema: dict[str, Any]) -> dict[str, Any]:
        self.compiled.append(schema)
        if any(word in json.dumps(schema) for word in self.refuse):
            raise ValueError("cannot compile")
        return schema

    def complete(self, tokens: list[int], *, grammar: Any, rendered: Rendered, **sampling: Any) -> dict[str, Any]:
        self.completions.append({"grammar": grammar, **sampling})
        self.held = list(tokens)
        cut = self.reply[: sampling["max_tokens"]]
        finish = "length" if len(cut) < len(self.reply) else "stop"
        usage = {"prompt_tokens": len(tokens), "completion_tokens": len(cut)}
        return {"choices": [{"text": cut, "finish_reason": finish}], "usage": usage}


def brain(fake: FakeLlama, **options: Any) -> LlamaCppBrain:
    return LlamaCppBrain("fake", llama=fake, engine="llama.cpp", **options)  # type: ignore[arg-type]


def ask(b: LlamaCppBrain, text: str = "hi", schema: Any = None) -> Any:
    return b.ask(Request(messages=[{"role": "user", "content": text}], schema=schema))


def test_the_schema_is_compiled_once_with_the_reason_bounded() -> None:
    fake = FakeLlama()
    b = brain(fake, max_reason_chars=50)
    schema = step_schema([lookup])
    first, second = ask(b, schema=schema), ask(b, schema=schema)
    assert first.applied is Constraint.SCHEMA and second.engine == "llama.cpp-grammar"
    assert len(fake.compiled) == 1
    assert all(v["properties"]["reason"]["maxLength"] == 50 for v in fake.compiled[0]["anyOf"])
    assert fake.completions[0]["grammar"] is fake.compiled[0]


def test_a_schema_that_does_not_compile_gets_the_flat_one_and_the_reply_says_so() -> None:
    fake = FakeLlama(refuse=("lookup",))
    reply = ask(brain(fake), schema=step_schema([lookup]))
    assert reply.applied is Constraint.FLAT and reply.engine == "llama.cpp-grammar-flat"
    assert fake.compiled[-1]["properties"].keys() == flat_schema()["properties"].keys()


def test_a_schema_nothing_compiles_is_refused() -> None:
    with pytest.raises(SchemaRefused, match="cannot compile"):
        ask(brain(FakeLlama(refuse=("reason",))), schema=step_schema([lookup]))


def test_prose_has_no_grammar_and_says_nothing_constrained_it() -> None:
    fake = FakeLlama()
    reply = ask(brain(fake))
    assert reply.applied is Constraint.NONE and fake.completions[0]["grammar"] is None


def test_the_reply_gets_the_room_the_window_leaves_and_a_prompt_that_leaves_too_little_is_refused() -> None:
    fake = FakeLlama(reply="x" * 500)
    prompt = len("user: hi\n")
    reply = ask(brain(fake, n_ctx=prompt + 100, max_tokens=400))
    assert fake.completions[0]["max_tokens"] == 100 and reply.finish == "length"
    with pytest.raises(ContextOverflow) as caught:
        ask(brain(FakeLlama(), n_ctx=prompt + 63, max_tokens=400))
    assert caught.value.prompt_tokens == prompt + 64 and caught.value.context_window == prompt + 63
    assert "over by 1" in str(caught.value)


def test_the_evaluated_prefix_is_reused_and_counted_as_cached() -> None:
    fake = FakeLlama()
    b = brain(fake)
    assert ask(b, "hello").usage.cached_tokens == 0
    again = ask(b, "help")  # shares "user: hel" with the evaluated prompt
    assert again.usage.cached_tokens == len("user: hel")
    same = ask(b, "help")  # all of it: one token is evaluated again, so there are logits to sample from
    assert same.usage.cached_tokens == len("user: help\n") - 1


def test_without_cache_reuse_every_prompt_is_evaluated_whole() -> None:
    fake = FakeLlama()
    b = brain(fake, reuse_cache=False)
    ask(b)
    assert ask(b).usage.cached_tokens == 0 and fake.resets == 2


def test_closing_frees_the_model() -> None:
    fake = FakeLlama()
    with brain(fake) as b:
        ask(b)
    assert fake.closed == 1


def test_native_tools_are_refused() -> None:
    with pytest.raises(SchemaRefused, match="no native tool calls"):
        brain(FakeLlama()).ask(Request(messages=[], tools=[lookup.spec()]))


def test_an_unknown_model_is_refused_before_llama_cpp_is_needed() -> None:
    from shapeloop import UnknownModel

    with pytest.raises(UnknownModel, match="unknown model 'gpt-17'"):
        LlamaCppBrain("gpt-17")


def test_a_task_that_shares_no_word_with_any_tool_is_held_to_the_higher_unshared_floor() -> None:
    from shapeloop.backends.llamacpp import UNFIT_BIAS

    class Flat(FakeLlama):
        def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
            # every task fits every tool by 0.3 (+0.15 a token each way over the bases)
            return [-0.85 if prefix.startswith(("The tool", "A user's request: ")) else -1.0] * 3

    songs = (("search_songs", "Search songs by title and artist."),)
    lone = Request(messages=[], task="Who wrote Pride and Prejudice?", offered=songs)
    sharing = Request(messages=[], task="Search for the song Yesterday.", offered=songs)
    b = brain(Flat(), answer_bias=1.5, fit_floor=0.0, unshared_fit_floor=0.5)
    assert b.fit_of(lone) == pytest.approx(0.3) == b.fit_of(sharing)
    assert b.answer_bias_for(lone) == UNFIT_BIAS, "no shared word, and a fit below the higher floor"
    assert b.answer_bias_for(sharing) == 1.5, "a shared word ('search', 'song'): only the first floor applies"
    # fit_floor=-inf turns both off; no second floor, only the first applies
    assert brain(Flat(), answer_bias=1.5, fit_floor=float("-inf"), unshared_fit_floor=0.5).answer_bias_for(lone) == 1.5
    assert brain(Flat(), answer_bias=1.5, fit_floor=0.0).answer_bias_for(lone) == 1.5
    assert brain(Flat(), answer_bias=1.5, fit_floor=0.0, unshared_fit_floor=0.2).answer_bias_for(lone) == 1.5
    # the second floor alone, for a model with no first floor, still judges
    alone = brain(Flat(), answer_bias=1.5, unshared_fit_floor=0.5)
    assert alone.answer_bias_for(lone) == UNFIT_BIAS and alone.answer_bias_for(sharing) == 1.5


def test_shared_words_are_content_words_of_four_letters_and_a_named_path_counts_as_a_file() -> None:
    from shapeloop.fit import shared_words

    length = [("convert_length", "Convert a length between units.")]
    files = [("read_file", "Read a text file in the workspace.")]
    assert shared_words("Convert 100 degrees Fahrenheit to Celsius.", length) == {"convert"}
    assert shared_words("who wrote pride and prejudice?", [("search_songs", "Search songs by title.")]) == set()
    assert shared_words("How many goals has Haaland scored?", [("player_goals", "A player's goal count.")]) == {"goal"}
    # function words tie nothing: "what", "would", "that", "from", "with"
    assert shared_words("What would you do with that?", [("what_would", "Do that with this, from here.")]) == set()
    # four letters counted before the plural s comes off
    assert shared_words("Show me the news", [("get_news", "The latest news headlines.")]) == {"new"}
    assert shared_words("Show the error logs", [("read_logs", "Read the service's logs.")]) == {"log"}
    named_paths = ("What colour does colour.txt name?", "Show /etc/hostname.", "Open ../../etc/passwd", "see ~/notes")
    for named in (*named_paths, r"Open C:\temp\report"):
        assert shared_words(named, files) == {"file"}, named
    for plain in ("Is 3.5 more than 3?", "Say yes and/or no, e.g. at 5 km/h.", "What is the capital of Peru?"):
        assert shared_words(plain, files) == set(), plain


def test_the_answer_bias_is_the_one_calibrated_for_the_model_unless_given() -> None:
    from shapeloop import models
    from shapeloop.backends.llamacpp import ANSWER_BIAS, LlamaCppBrain

    fake = FakeLlama([])
    calibrated = {name: m.answer_bias for name, m in models.CATALOGUE.items() if m.answer_bias is not None}
    assert calibrated, "the catalogue holds calibrated biases"
    for name, bias in calibrated.items():
        assert LlamaCppBrain(name, llama=fake).answer_bias == bias  # type: ignore[arg-type]
    assert LlamaCppBrain("some/model.gguf", llama=fake).answer_bias == ANSWER_BIAS  # type: ignore[arg-type]
    assert LlamaCppBrain("qwen2.5-coder-0.5b", llama=fake, answer_bias=0.0).answer_bias == 0.0  # type: ignore[arg-type]


def test_the_task_is_restated_after_a_result_for_the_models_whose_entry_says_so_unless_given() -> None:
    from shapeloop.backends.llamacpp import LlamaCppBrain

    fake = FakeLlama([])

    def restates(name: str, **kwargs: bool) -> bool:
        return LlamaCppBrain(name, llama=fake, **kwargs).capabilities.restate_task  # type: ignore[arg-type]

    assert restates("qwen2.5-coder-1.5b") and not restates("qwen2.5-coder-0.5b")
    assert not restates("some/model.gguf") and not restates("qwen2.5-coder-1.5b", restate_task=False)
    assert restates("qwen2.5-coder-0.5b", restate_task=True)
    assert LlamaCppBrain("qwen2.5-coder-1.5b", llama=fake).capabilities.exclusive  # type: ignore[arg-type]


def test_below_the_fit_floor_the_first_step_leans_to_the_answer_and_the_fit_is_measured_once() -> None:
    from shapeloop.backends.llamacpp import UNFIT_BIAS

    asked: list[tuple[str, str]] = []

    class Scoring(FakeLlama):
        def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
            # a tool named "weather" and a task about the weather make each other likelier (+0.8 a token each
            # way); the bases score -1 a token
            asked.append((prefix, continuation))
            tied = "weather" in prefix and "weather" in continuation
            return [-0.2 if tied else -1.0] * 3

    b = brain(Scoring(), answer_bias=1.5, fit_floor=0.5)
    weather = (("get_weather", "The weather in a city.\n\nArgs: ..."),)
    fits = Request(messages=[], task="What is the weather in Oslo?", offered=weather)
    unfit = Request(messages=[], task="What is the capital of Peru?", offered=weather)
    assert b.fit_of(fits) == pytest.approx(1.6) and b.answer_bias_for(fits) == 1.5
    assert b.fit_of(unfit) == pytest.approx(0.0) and b.answer_bias_for(unfit) == UNFIT_BIAS
    measured = len(asked)
    b.answer_bias_for(unfit)
    assert len(asked) == measured, "the fit of a task and its tools is measured once"
    # only the first step is judged; without tools or a task nothing is
    assert b.answer_bias_for(Request(messages=[], task=unfit.task, offered=weather, results=1)) == 0.0
    assert b.answer_bias_for(Request(messages=[], task=unfit.task)) == 1.5
    # a model with no calibrated floor is not judged, nor one whose floor is turned off
    assert brain(Scoring(), answer_bias=1.5).answer_bias_for(unfit) == 1.5
    asked.clear()
    assert brain(Scoring(), answer_bias=1.5, fit_floor=float("-inf")).answer_bias_for(unfit) == 1.5
    assert asked == []
