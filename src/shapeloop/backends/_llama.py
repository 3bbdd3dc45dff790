"""The one adapter between the embedded backend and llama-cpp-python.

Everything the backend needs from a loaded model goes through :class:`LlamaModel`, so that the
uses of llama-cpp-python's private attributes (``_model``, ``_ctx``) sit here and nowhere else.
They were read from version :data:`PINNED_VERSION`; a test fails loudly when the installed
version differs, so the attributes are checked again before the pin moves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shapeloop.brain import Message
from shapeloop.errors import BackendUnavailable

PINNED_VERSION = "0.3.36"

SCORING_WINDOW = 2048
"""Tokens of the context that scores text (``continuation_logprobs``): a prefix and continuation
longer than this are cut at its end."""

SCORING_SEQUENCES = 16
"""Sequences the scoring context holds at once: a prefix, and continuations scored side by side."""

INSTALL_HINT = (
    "llama-cpp-python is not installed: pip install 'shapeloop[local]' (the README gives the portable build flags)"
)

# For a base model with no template of its own: a plain transcript that ends where the model speaks.
PLAIN_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)


class LlamaModel:
    """A loaded ``llama_cpp.Llama`` and its chat template, with what the backend asks of it.

    Args:
        llm: the ``llama_cpp.Llama``.
        chat_template: a Jinja chat template to use instead of the model's own.
    """

    def __init__(self, llm: Any, chat_template: str | None = None) -> None:
        self.llm = llm
        self._formatter = _chat_formatter(llm, chat_template)
        self._scoring: tuple[Any, Any] | None = None  # a second context for scoring text, made on first use
        self._scored: list[int] = []  # the tokens the scoring context holds, from position 0

    @classmethod
    def load(cls, path: Path, *, n_ctx: int, n_threads: int | None, seed: int,
             chat_template: str | None = None) -> LlamaModel:  # fmt: skip
        """Load a GGUF file.

        Raises:
            BackendUnavailable: llama-cpp-python is missing, or it cannot load the file.
        """
        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendUnavailable(INSTALL_HINT, backend="llamacpp") from exc
        try:
            llm = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or os.cpu_count() or 1, seed=seed, verbose=False
            )
        except (ValueError, RuntimeError) as exc:
            raise BackendUnavailable(
                f"llama.cpp could not load {path}: {exc}; the file may be corrupt: pull it again", backend="llamacpp"
            ) from exc
        return cls(llm, chat_template)

    def close(self) -> None:
        """Free the model and its contexts (a second close does nothing)."""
        if self._scoring is not None:
            for part in self._scoring:
                part.close()
            self._scoring = None
        self.llm.close()

    def render(self, messages: Sequence[Message]) -> tuple[Any, list[int]]:
        """The chat template applied to ``messages`` (with its stop criteria), and its tokens."""
        rendered = self._formatter(messages=[dict(m) for m in messages])
        tokens: list[int] = self.llm.tokenize(
            rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        return rendered, tokens

    def evaluated(self) -> list[int]:
        """The tokens whose state the context holds now."""
        return list(self.llm.input_ids[: self.llm.n_tokens])

    def keep(self, count: int) -> None:
        """Keep the first ``count`` evaluated tokens and forget the rest."""
        self.llm.n_tokens = count

    def reset(self) -> None:
        """Forget every evaluated token."""
        self.llm.reset()

    def eval(self, tokens: Sequence[int]) -> None:
        """Evaluate ``tokens`` after those the context holds."""
        self.llm.eval(list(tokens))

    def complete(self, tokens: list[int], *, grammar: Any, rendered: Any, **sampling: Any) -> dict[str, Any]:
        """A completion of ``tokens`` (llama-cpp-python reuses the evaluated prefix itself)."""
        out: dict[str, Any] = self.llm.create_completion(
            prompt=tokens, grammar=grammar, stop=rendered.stop, stopping_criteria=rendered.stopping_criteria,
            **sampling,
        )  # fmt: skip
        return out

    def grammar(self, schema: Mapping[str, Any]) -> Any:
        """llama.cpp's grammar for ``schema``; ValueError if it cannot be compiled."""
        from llama_cpp.llama_grammar import LlamaGrammar

        try:
            return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as exc:
            raise ValueError(f"llama.cpp cannot compile the schema to a grammar: {exc}") from exc

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``."""
        text: bytes = self.llm.detokenize(list(tokens))
        return text.decode("utf-8", errors="replace")

    @property
    def eos(self) -> int:
        """The end-of-sequence token."""
        return int(self.llm.token_eos())

    @property
    def n_vocab(self) -> int:
        """The vocabulary's size."""
        return int(self.llm.n_vocab())

    def vocab(self) -> Any:
        """The model's vocabulary handle, as llguidance's tokenizer bridge takes it (private)."""
        return self.llm._model.vocab

    def continuation_logprobs(self, prefix: str, continuation: str) -> list[float]:
        """The log-probability of each token of ``continuation`` after ``prefix`` (plain text, no chat
        template), evaluated in batches of ``n_batch`` with logits only where a continuation token is
        predicted: a prefix longer than a batch is evaluated whole, not cut. It runs in a second
        context on the same weights (:data:`SCORING_WINDOW` tokens; text beyond it is left out), so
        the prompt the main context holds stays cached for the next step. That context keeps the last
        prefix it evaluated, but its last token: a call that opens the same way (one request scored
        against each of several tools) evaluates only from where the two part (private)."""
        before = self.llm.tokenize(prefix.encode("utf-8"), add_bos=True, special=False)
        after = self.llm.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
        return self.token_logprobs(before, after)

    def token_logprobs(self, before: Sequence[int], after: Sequence[int]) -> list[float]:
        """:meth:`continuation_logprobs` of tokens: each of ``after``'s after ``before`` (private)."""
        context = self._scorer()[0]
        before, after = list(before), list(after)
        after = after[: max(0, context.n_ctx() - len(before))]
        if not after or not before:
            return []
        self._hold(before[:-1])
        results: list[list[float]] = [[]]
        self._score_group(before, [after], [0], results)
        return results[0]

    def continuations_logprobs(self, prefix: str, continuations: Sequence[str]) -> list[list[float]]:
        """:meth:`continuation_logprobs` of each continuation after one prefix: the prefix is
        evaluated once, and the continuations side by side, each in a sequence of its own that reads
        the prefix and itself only, in as few batches as they fill (15 sequences and the window's room
        at a time) (private)."""
        before = self.llm.tokenize(prefix.encode("utf-8"), add_bos=True, special=False)
        afters = [self.llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in continuations]
        return self.token_logprobs_many(before, afters)

    def token_logprobs_many(self, before: Sequence[int], afters: Sequence[Sequence[int]]) -> list[list[float]]:
        """:meth:`continuations_logprobs` of tokens (private)."""
        context = self._scorer()[0]
        before = list(before)
        room = context.n_ctx() - len(before)
        if len(afters) < 2 or not before or room < 2 or any(len(after) > room for after in afters):
            return [self.token_logprobs(before, after) for after in afters]
        self._hold(before[:-1])  # the prefix but its last token, in sequence 0 (it stays for the next call)
        results: list[list[float]] = [[] for _ in afters]
        group: list[int] = []
        for index, after in enumerate(afters):  # groups that fit the window and the sequences
            full = len(group) >= SCORING_SEQUENCES - 1 or sum(len(afters[i]) for i in group) + len(after) > room
            if group and full:
                self._score_group(before, afters, group, results)
                group = []
            if after:
                group.append(index)
        if group:
            self._score_group(before, afters, group, results)
        return results

    def _hold(self, tokens: list[int]) -> None:
        """Make sequence 0 hold ``tokens``: what it holds of them is kept, the rest evaluated."""
        context, batch = self._scorer()
        kept, size = _shared(self._scored, tokens), context.params.n_batch
        if not context.kv_cache_seq_rm(0, kept, -1):  # a recurrent model cannot drop a tail: start over
            context.kv_cache_clear()
            kept = 0
        self._scored = self._scored[:kept]
        try:
            for start in range(kept, len(tokens), size):
                chunk = tokens[start : start + size]
                batch.set_batch(batch=chunk, n_past=start, logits_all=False)
                batch.batch.logits[len(chunk) - 1] = False
                context.decode(batch)
                self._scored.extend(chunk)
        except BaseException:
            context.kv_cache_clear()
            self._scored = []
            raise

    def _score_group(self, before: list[int], afters: Sequence[Sequence[int]], group: Sequence[int],
                     results: list[list[float]]) -> None:  # fmt: skip
        """Score the continuations ``group`` names, each in sequence 1, 2, ... over sequence 0's prefix."""
        context, batch = self._scorer()
        first, size = len(before) - 1, min(context.params.n_batch, 256)  # rows of logits a batch holds
        entries = [(seq, position, token)
                   for seq, index in enumerate(group, start=1)
                   for position, token in enumerate([before[-1], *afters[index][:-1]], start=first)]  # fmt: skip
        rows = []
        try:
            for seq in range(1, len(group) + 1):
                context.kv_cache_seq_cp(0, seq, 0, first)
            for start in range(0, len(entries), size):
                chunk = entries[start : start + size]
                for i, (seq, position, token) in enumerate(chunk):
                    batch.batch.token[i], batch.batch.pos[i] = token, position
                    batch.batch.seq_id[i][0], batch.batch.n_seq_id[i], batch.batch.logits[i] = seq, 1, True
                batch.batch.n_tokens = len(chunk)
                context.decode(batch)
                raw = np.ctypeslib.as_array(context.get_logits(), shape=(len(chunk), self.n_vocab))
                rows.append(raw.astype(np.float32))
        except BaseException:
            context.kv_cache_clear()
            self._scored = []
            raise
        finally:
            for seq in range(1, len(group) + 1):
                context.kv_cache_seq_rm(seq, 0, -1)
        scored = _logprobs(rows, [token for index in group for token in afters[index]])
        for index in group:
            results[index], scored = scored[: len(afters[index])], scored[len(afters[index]) :]

    def _scorer(self) -> tuple[Any, Any]:
        """The scoring context and its batch: the main context's settings, a smaller window."""
        if self._scoring is None:
            import llama_cpp
            from llama_cpp import _internals

            params = llama_cpp.llama_context_params.from_buffer_copy(self.llm.context_params)
            params.n_ctx = min(SCORING_WINDOW, self.llm.n_ctx())
            params.n_batch = params.n_ubatch = min(self.llm.n_batch, params.n_ctx)
            params.n_seq_max, params.kv_unified = SCORING_SEQUENCES, True  # one window the sequences share
            context = _internals.LlamaContext(model=self.llm._model, params=params, verbose=False)
            batch = _internals.LlamaBatch(n_tokens=params.n_batch, embd=0, n_seq_max=1, verbose=False)
            self._scoring = (context, batch)
        return self._scoring

    def logits(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        """A copy of the logits of the last evaluated token (private)."""
        raw = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.n_vocab,))
        return raw.astype(np.float32)


def _logprobs(rows: Sequence[np.ndarray[Any, Any]], tokens: Sequence[int]) -> list[float]:
    """The log-probability of each of ``tokens`` under the logits of the same row (rows in batches)."""
    scores = np.concatenate(rows)
    top = scores.max(axis=1, keepdims=True)
    normal = top[:, 0] + np.log(np.exp(scores - top).sum(axis=1))
    return [float(scores[i, token] - normal[i]) for i, token in enumerate(tokens)]


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
