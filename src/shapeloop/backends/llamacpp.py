"""The embedded backend: llama.cpp in-process through llama-cpp-python. No daemon, no account.

Constrained decoding comes from the run's step schema compiled to a llama.cpp grammar (the flat
five-field schema where the per-tool one cannot be compiled), the prompt from the model's own chat
template, and the prompt cache is reused across steps, so each step evaluates only the new tokens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

try:
    import numpy as np
except ImportError as exc:  # numpy comes with the local extra, as llama-cpp-python does
    raise ImportError("the embedded backend needs the local extra: pip install 'shapeloop[local]'") from exc

from shapeloop import models
from shapeloop.backends._fast import ENGINE, FastDecoder
from shapeloop.brain import Finish, Message, Reply, Usage
from shapeloop.errors import BackendError, BackendUnavailable, ContextOverflow, SchemaRefused
from shapeloop.step import flat_schema

_INSTALL_HINT = (
    "llama-cpp-python is not installed: pip install 'shapeloop[local]' (the README gives the portable build flags)"
)


class LlamaCppBrain:
    """A brain that runs a GGUF model in this process.

    Args:
        model: a catalogue name (``shapeloop models``) or the path of a ``.gguf`` file.
        n_ctx: the context window, set explicitly; a prompt that does not fit stops the run.
        max_tokens: bound on the tokens generated per step.
        max_reason_chars: bound on the length of the step's ``reason`` in the grammar, so a tiny
            model repeating itself inside the string cannot eat the token budget.
        temperature: sampling temperature; 0 is greedy and repeatable.
        seed: sampling seed.
        n_threads: CPU threads; all cores by default.
        reuse_cache: keep the evaluated prompt between steps (turn off only to measure it).
        pull: pull a catalogue model that is not in the cache yet.
        progress: called with a line of text while pulling or checking the model.
        engine: constrained decoding engine: ``auto`` (llguidance with forced tokens where it is
            installed and compiles the schema, llama.cpp's grammar otherwise), or one of them.
        chat_template: a Jinja chat template to use instead of the model's own; a base model with
            no template gets a plain ``Role: text`` transcript.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = models.DEFAULT_MODEL,
        *,
        n_ctx: int = 8192,
        max_tokens: int = 512,
        max_reason_chars: int | None = 240,
        temperature: float = 0.0,
        seed: int = 0,
        n_threads: int | None = None,
        reuse_cache: bool = True,
        pull: bool = False,
        progress: models.Progress | None = None,
        engine: Literal["auto", "llguidance", "llama.cpp"] = "auto",
        chat_template: str | None = None,
    ) -> None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendUnavailable(_INSTALL_HINT, backend="llamacpp") from exc
        self.path: Path = models.resolve(model, pull_missing=pull, progress=progress)
        self.name = os.fspath(model)
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.max_reason_chars = max_reason_chars
        self.temperature = temperature
        self.seed = seed
        self.reuse_cache = reuse_cache
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=n_ctx,
                n_threads=n_threads or os.cpu_count() or 1,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise BackendUnavailable(
                f"llama.cpp could not load {self.path}: {exc}; the file may be corrupt: pull it again",
                backend="llamacpp",
            ) from exc
        self._formatter = _chat_formatter(self.llm, chat_template)
        self._grammars: dict[str, tuple[Any, str]] = {}
        self.engine = engine
        self._fast: FastDecoder | None = None
        self._fast_schemas: dict[str, dict[str, Any] | None] = {}
        self.last_stats: dict[str, Any] = {}

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Generate one reply, constrained to ``schema`` when one is given.

        The fast engine (llguidance with forced tokens) runs where it is installed and compiles the
        schema; llama.cpp's own grammar runs otherwise. ``Reply.engine`` says which ran, and
        :attr:`last_stats` holds the decode calls and forced tokens of the last reply.
        """
        rendered, tokens = self._render(messages)
        budget = self._room(len(tokens))
        if schema is not None:
            matcher = self._fast_matcher(schema)
            if matcher is not None:
                return self._ask_fast(tokens, matcher, budget)
        grammar, engine = (None, "free") if schema is None else self._grammar(schema)
        cached = self._reusable_prefix(tokens)
        try:
            out: dict[str, Any] = self.llm.create_completion(  # type: ignore[assignment]
                prompt=tokens,
                max_tokens=budget,
                temperature=self.temperature,
                seed=self.seed,
                grammar=grammar,
                stop=rendered.stop,
                stopping_criteria=rendered.stopping_criteria,
            )
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"llama.cpp failed to generate: {exc}", backend="llamacpp") from exc
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        completion = int(usage.get("completion_tokens", 0))
        self.last_stats = {"engine": engine, "decode_calls": completion, "forced_tokens": 0, "tokens": completion}
        return Reply(
            text=choice["text"],
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens", len(tokens))),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                cached_tokens=cached,
            ),
            finish=Finish.LENGTH if choice.get("finish_reason") == "length" else Finish.STOP,
            engine=engine,
        )

    def _fast_matcher(self, schema: Mapping[str, Any]) -> Any:
        """A compiled llguidance matcher for ``schema``, or None to use llama.cpp's grammar."""
        if self.engine == "llama.cpp":
            return None
        if self._fast is None:
            try:
                self._fast = FastDecoder(self.llm)
            except ImportError:
                if self.engine == "llguidance":
                    raise BackendUnavailable(
                        "llguidance is not installed: pip install 'shapeloop[local]'", backend="llamacpp"
                    ) from None
                self.engine = "llama.cpp"
                return None
        key = json.dumps(schema, sort_keys=True)
        if key not in self._fast_schemas:
            # Which schema llguidance takes (the per-tool one, else the flat one, else none) is decided
            # once per schema, not again at every step.
            self._fast_schemas[key] = None
            for candidate in (schema, flat_schema()):
                bounded = bound_reason(candidate, self.max_reason_chars)
                try:
                    self._fast.compile(bounded)
                except ValueError:
                    continue
                self._fast_schemas[key] = bounded
                break
        chosen = self._fast_schemas[key]
        return None if chosen is None else self._fast.compile(chosen)

    def _ask_fast(self, tokens: list[int], matcher: Any, budget: int) -> Reply:
        assert self._fast is not None
        cached = self._reusable_prefix(tokens)
        try:
            self.llm.n_tokens = cached
            self.llm.eval(tokens[cached:])
            made = self._fast.generate(
                matcher, max_tokens=budget, temperature=self.temperature, rng=np.random.default_rng(self.seed)
            )
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"llama.cpp failed to generate: {exc}", backend="llamacpp") from exc
        self.last_stats = {
            "engine": ENGINE, "decode_calls": made.decode_calls, "forced_tokens": made.forced,
            "tokens": len(made.tokens),
        }  # fmt: skip
        return Reply(
            text=self.llm.detokenize(made.tokens).decode("utf-8", errors="replace"),
            usage=Usage(prompt_tokens=len(tokens), completion_tokens=len(made.tokens), cached_tokens=cached),
            finish=Finish.STOP if made.finished else Finish.LENGTH,
            engine=ENGINE,
        )

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens the prompt for ``messages`` takes, with the chat template applied."""
        return len(self._render(messages)[1])

    def _render(self, messages: Sequence[Message]) -> tuple[Any, list[int]]:
        rendered = self._formatter(messages=[dict(m) for m in messages])
        tokens: list[int] = self.llm.tokenize(
            rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        return rendered, tokens

    def _room(self, prompt_tokens: int) -> int:
        """Tokens left for the reply; refuse a prompt that leaves too few."""
        room = self.n_ctx - prompt_tokens
        needed = min(self.max_tokens, 64)
        if room < needed:
            raise ContextOverflow(
                f"the prompt needs {prompt_tokens} tokens and the reply at least {needed}, but the context "
                f"window holds {self.n_ctx} (over by {prompt_tokens + needed - self.n_ctx}): raise n_ctx "
                "(--ctx), lower max_result_chars, or start a shorter conversation",
                prompt_tokens=prompt_tokens + needed,
                context_window=self.n_ctx,
                backend="llamacpp",
            )
        return min(self.max_tokens, room)

    def _reusable_prefix(self, tokens: list[int]) -> int:
        """How many leading prompt tokens are already evaluated (llama-cpp-python keeps them)."""
        if not self.reuse_cache:
            self.llm.reset()  # type: ignore[no-untyped-call]
            return 0
        previous = self.llm.input_ids[: self.llm.n_tokens]
        same = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            same += 1
        return max(0, same - 1) if same == len(tokens) else same

    def _grammar(self, schema: Mapping[str, Any]) -> tuple[Any, str]:
        from llama_cpp.llama_grammar import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            bounded = bound_reason(schema, self.max_reason_chars)
            fallback = bound_reason(flat_schema(), self.max_reason_chars)
            for candidate, engine in ((bounded, "llama.cpp-grammar"), (fallback, "llama.cpp-grammar-flat")):
                try:
                    self._grammars[key] = (
                        LlamaGrammar.from_json_schema(json.dumps(candidate), verbose=False),
                        engine,
                    )
                    break
                except Exception:  # noqa: BLE001 - llama.cpp raises bare exceptions for schemas it cannot compile
                    continue
            else:
                raise SchemaRefused("llama.cpp cannot compile the step schema to a grammar", backend="llamacpp")
        return self._grammars[key]


def bound_reason(schema: Mapping[str, Any], max_chars: int | None) -> dict[str, Any]:
    """A copy of a step schema with ``maxLength`` on every variant's ``reason``."""
    copied: dict[str, Any] = json.loads(json.dumps(schema))
    if max_chars is None:
        return copied
    for variant in copied.get("anyOf", [copied]):
        reason = variant.get("properties", {}).get("reason")
        if isinstance(reason, dict) and reason.get("type") == "string":
            reason.setdefault("maxLength", max_chars)
    return copied


# For a base model with no template of its own: a plain transcript that ends where the model speaks.
PLAIN_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)


def _chat_formatter(llm: Any, template: str | None = None) -> Any:
    """The model's own chat template (or ``template``), as llama-cpp-python renders it; a plain
    transcript for a base model that has none."""
    from llama_cpp import llama_chat_format

    template = template or llm.metadata.get("tokenizer.chat_template") or PLAIN_TEMPLATE
    eos_id, bos_id = llm.token_eos(), llm.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(eos_id) if eos_id != -1 else "",
        bos_token=llm._model.token_get_text(bos_id) if bos_id != -1 else "",
        stop_token_ids=[eos_id],
    )
