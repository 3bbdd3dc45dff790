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


def test_the_old_answer_bias_option_warns_and_does_nothing() -> None:
    with pytest.warns(DeprecationWarning, match=r"LlamaCppBrain\(answer_bias=\.\.\.\) has no effect and will be"):
        made = brain(FakeLlama("{}"), answer_bias=2.0)
    assert not hasattr(made, "answer_bias") and "answer_bias" not in dict(made.capabilities.calibration)
