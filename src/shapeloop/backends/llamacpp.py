"""The embedded backend: llama.cpp in-process through llama-cpp-python. No daemon, no account.

Constrained decoding comes from the run's step schema compiled to a llama.cpp grammar (a looser
one from ``step.fallback_schemas`` where it cannot be compiled), the prompt from the model's own chat
template, and the prompt cache is reused across steps, so each step evaluates only the new tokens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

try:
    import numpy as np
except ImportError as exc:  # numpy comes with the local extra, as llama-cpp-python does
    raise ImportError("the embedded backend needs the local extra: pip install 'shapeloop[local]'") from exc

from shapeloop import models
from shapeloop.backends._common import ErrorTable, mapped_errors
from shapeloop.backends._fast import ENGINE, FastDecoder
from shapeloop.backends._llama import LlamaModel
from shapeloop.brain import BaseBrain, Capabilities, Constraint, Finish, Message, Reply, Request, Usage
from shapeloop.deprecation import warn_no_effect
from shapeloop.errors import BackendError, BackendUnavailable, ContextOverflow, SchemaRefused
from shapeloop.step import bounded, fallback_schemas

ERRORS: ErrorTable = (
    (ValueError, BackendError, "llama.cpp failed to generate: {exc}"),
    (RuntimeError, BackendError, "llama.cpp failed to generate: {exc}"),
)
"""llama-cpp-python reports a failed decode as ValueError or RuntimeError, and has no error type of its own."""


class LlamaCppBrain(BaseBrain):
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
        llama: a model already loaded (tests pass a fake); ``model`` then only names it.
        answer_bias: deprecated, no effect (it added logits to answering at a task's first step,
            and lost on BFCL's tune sample at every bias); it will be removed.

    The brain scores text (``Capabilities.logprobs``: :meth:`continuation_logprobs`), and declares
    the fit floor calibrated for a catalogue model (``Capabilities.calibration``), which the
    :class:`~shapeloop.policies.FitFloor` policy reads. With the fast engine, :attr:`last_stats`
    has the step's ``decision_gap``: where it chose between calling and answering, the best calling
    logit minus the best answering one; and ``more_gap``: after a batch step's first call, the best
    logit of going on to another call minus the best of ending the list.
    """

    capabilities = Capabilities(exclusive=True)  # one model, one context: one run at a time

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
        llama: LlamaModel | None = None,
        answer_bias: float | None = None,
    ) -> None:
        warn_no_effect("a lean to answering lost on BFCL's tune sample at every bias (measurements/calibration.json)",
                       stacklevel=2, prefix="LlamaCppBrain(", answer_bias=answer_bias)  # fmt: skip
        self.name = os.fspath(model)
        if llama is None:
            models.check_name(model)  # an unknown name is refused before llama.cpp is needed
            self.path: Path | None = models.resolve(model, pull_missing=pull, progress=progress)
            llama = LlamaModel.load(self.path, n_ctx=n_ctx, n_threads=n_threads, seed=seed, chat_template=chat_template)
        else:
            self.path = None
        self.llama = llama
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.max_reason_chars = max_reason_chars
        entry = models.CATALOGUE.get(os.fspath(model))
        self.capabilities = Capabilities(exclusive=True, logprobs=True, calibration=models.calibration(entry),
                                         margins=engine != "llama.cpp",
                                         preset=entry.preset if entry else ())  # fmt: skip
        self._bases: dict[tuple[str, str], list[float]] = {}
        self.temperature = temperature
        self.seed = seed
        self.reuse_cache = reuse_cache
        self._grammars: dict[str, tuple[Any, str, Constraint]] = {}
        self.engine = engine
        self._fast: FastDecoder | None = None
        self._fast_schemas: dict[str, tuple[dict[str, Any], Constraint] | None] = {}
        self.last_stats: dict[str, Any] = {}

    def close(self) -> None:
        """Free the model's memory now rather than when the brain is collected."""
        self.llama.close()

    def forget_prompt(self) -> None:
        """Forget the evaluated prompt, so the next request evaluates its whole prompt (a benchmark
        that compares two runs of one request in one process calls it between them)."""
        self.llama.reset()

    def ask(self, request: Request) -> Reply:
        """Generate one reply, constrained to the request's schema when it has one.

        The fast engine (llguidance with forced tokens) runs where it is installed and compiles the
        schema; llama.cpp's own grammar runs otherwise. Where neither compiles the schema, the flat
        step schema is used and ``Reply.applied`` says so. ``Reply.engine`` says which engine ran,
        and :attr:`last_stats` holds the decode calls and forced tokens of the last reply.
        """
        if request.tools is not None:
            raise SchemaRefused("the embedded backend has no native tool calls", backend="llamacpp")
        schema = request.schema
        rendered, tokens = self.llama.render(request.messages)
        budget = self._room(len(tokens))
        if schema is not None:
            fast = self._fast_matcher(schema)
            if fast is not None:
                matcher, applied = fast
                reply = self._ask_fast(tokens, matcher, budget, request)
                return replace(reply, applied=applied)
        grammar, engine, applied = (None, "free", Constraint.NONE) if schema is None else self._grammar(schema)
        cached = self._reusable_prefix(tokens)
        with mapped_errors(ERRORS, backend="llamacpp"):
            out = self.llama.complete(
                tokens, grammar=grammar, rendered=rendered, max_tokens=budget, temperature=self.temperature,
                seed=self.seed,
            )  # fmt: skip
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
            applied=applied,
            engine=engine,
        )

    def _fast_matcher(self, schema: Mapping[str, Any]) -> tuple[Any, Constraint] | None:
        """A compiled llguidance matcher for ``schema`` (or a looser one) and which it is, or None
        to use llama.cpp's grammar."""
        if self.engine == "llama.cpp":
            return None
        if self._fast is None:
            try:
                self._fast = FastDecoder(self.llama)
            except ImportError:
                if self.engine == "llguidance":
                    raise BackendUnavailable(
                        "llguidance is not installed: pip install 'shapeloop[local]'", backend="llamacpp"
                    ) from None
                self.engine = "llama.cpp"
                self.capabilities = replace(self.capabilities, margins=False)  # llama.cpp's grammar has no margins
                return None
        key = json.dumps(schema, sort_keys=True)
        if key not in self._fast_schemas:
            # Which schema llguidance takes (the per-tool one, else a looser one, else none) is decided
            # once per schema, not again at every step.
            self._fast_schemas[key] = None
            looser = [(candidate, Constraint.FLAT) for candidate in fallback_schemas(schema)]
            for candidate, applied in [(dict(schema), Constraint.SCHEMA), *looser]:
                bounded = bound_reason(candidate, self.max_reason_chars)
                try:
                    self._fast.compile(bounded)
                except ValueError:
                    continue
                self._fast_schemas[key] = (bounded, applied)
                break
        chosen = self._fast_schemas[key]
        return None if chosen is None else (self._fast.compile(chosen[0]), chosen[1])

    def continuations_logprobs(self, prefix: str, continuations: Sequence[str]) -> list[list[float]]:
        """:meth:`continuation_logprobs` of each continuation after one prefix: the prefix is evaluated
        once and the continuations side by side (the fit floor's request against each tool)."""
        kept = prefix in ("A user's request:", "A tool:")
        todo = [c for c in dict.fromkeys(continuations) if not (kept and (prefix, c) in self._bases)]
        with mapped_errors(ERRORS, backend="llamacpp"):
            made = self.llama.continuations_logprobs(prefix, todo)
        scored = dict(zip(todo, made, strict=True))
        asked = [scored[c] if c in scored else self._bases[prefix, c] for c in continuations]
        if kept:
            if len(self._bases) + len(scored) > 1024:
                self._bases.clear()
            self._bases.update({(prefix, c): scores for c, scores in scored.items()})
        return asked

    def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
        """The log-probability of each token of ``continuation`` after ``prefix`` (plain text, no chat
        template). A prefix the policies use for every task ("A tool:") keeps its scores across
        tasks. It runs in a context of its own, so the prompt cache is kept for the next step."""
        return self.continuations_logprobs(prefix, [continuation])[0]

    def _ask_fast(self, tokens: list[int], matcher: Any, budget: int, request: Request) -> Reply:
        assert self._fast is not None
        cached = self._reusable_prefix(tokens)
        with mapped_errors(ERRORS, backend="llamacpp"):
            self.llama.keep(cached)
            self.llama.eval(tokens[cached:])
            made = self._fast.generate(
                matcher, max_tokens=budget, temperature=self.temperature, rng=np.random.default_rng(self.seed),
                call_margin=request.call_margin, confirm_answer=request.confirm_answer,
            )  # fmt: skip
        self.last_stats = {
            "engine": ENGINE, "decode_calls": made.decode_calls, "forced_tokens": made.forced,
            "tokens": len(made.tokens), "decision_gap": made.decision_gap, "more_gap": made.more_gap,
        }  # fmt: skip
        return Reply(
            text=self.llama.detokenize(made.tokens),
            usage=Usage(prompt_tokens=len(tokens), completion_tokens=len(made.tokens), cached_tokens=cached),
            finish=Finish.STOP if made.finished else Finish.LENGTH,
            engine=ENGINE,
            leaned=made.leaned,
        )

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens the prompt for ``messages`` takes, with the chat template applied."""
        return len(self.llama.render(messages)[1])

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
            self.llama.reset()
            return 0
        previous = self.llama.evaluated()
        same = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            same += 1
        return max(0, same - 1) if same == len(tokens) else same

    def _grammar(self, schema: Mapping[str, Any]) -> tuple[Any, str, Constraint]:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            candidates = [(dict(schema), "llama.cpp-grammar", Constraint.SCHEMA)]
            candidates += [(c, "llama.cpp-grammar-flat", Constraint.FLAT) for c in fallback_schemas(schema)]
            for candidate, engine, applied in candidates:
                try:
                    self._grammars[key] = (
                        self.llama.grammar(bound_reason(candidate, self.max_reason_chars)),
                        engine,
                        applied,
                    )
                    break
                except ValueError:
                    continue
            else:
                raise SchemaRefused("llama.cpp cannot compile the step schema to a grammar", backend="llamacpp")
        return self._grammars[key]


def bound_reason(schema: Mapping[str, Any], max_chars: int | None) -> dict[str, Any]:
    """A copy of a step schema with every variant's ``reason`` held to ``max_chars`` (:func:`bounded`)."""
    copied: dict[str, Any] = json.loads(json.dumps(schema))
    if max_chars is None:
        return copied
    for variant in copied.get("anyOf", [copied]):
        reason = variant.get("properties", {}).get("reason")
        if isinstance(reason, dict) and reason.get("type") == "string":
            variant["properties"]["reason"] = bounded(reason, max_chars)
    return copied
