"""The fast constrained path for the embedded backend: llguidance masks and forced tokens.

A step is mostly structure the schema already decides (``{"reason": "``, ``", "action": "``, a tool
name once its first letters decide it, the argument keys). Wherever the grammar allows exactly one
continuation, those tokens are taken without sampling and evaluated in one batch, so a step costs
fewer decode calls than it has tokens. Elsewhere llguidance's mask (well under a millisecond a
token) is applied to the logits, which keeps free-text speed and emits compact JSON.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapeloop.backends._llama import LlamaModel

ENGINE = "llguidance"
DECISION_CUES = ('"action": "', '{"')  # a step's action value, a batch step's first key: call or answer
CALLING = ('tool"', 'calls"')  # what the model writes there to call (a step's action, a batch step's key)
ANSWERING = 'answer"'


@dataclass(frozen=True, kw_only=True)
class Generated:
    """What one constrained generation produced."""

    tokens: list[int]
    finished: bool  # the grammar completed (False: the token limit cut it)
    decode_calls: int  # llama.cpp decode calls after the prompt
    forced: int  # tokens taken from the grammar without sampling
    decision_gap: float | None = None  # where the step chooses: best calling logit minus best answering logit
    more_gap: float | None = None  # after a batch step's first call: best "another call" logit minus best "no more"
    leaned: str = ""  # where a margin changed the model's choice, what it changed


class FastDecoder:
    """Constrained greedy or sampled decoding on a loaded model with llguidance.

    The tokenizer is built once per model (about a second); each schema is compiled once and the
    compiled matcher is copied for every request.

    Raises:
        ImportError: llguidance is not installed.
    """

    def __init__(self, model: LlamaModel) -> None:
        import llguidance
        import llguidance.llamacpp
        import llguidance.numpy

        self._llg = llguidance
        self._np_llg = llguidance.numpy
        self.model = model
        with warnings.catch_warnings():
            # llguidance 1.9 calls llama_token_get_attr, which llama-cpp-python 0.3.36 deprecates
            warnings.simplefilter("ignore", DeprecationWarning)
            self.tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(model.vocab())
        self.eos = model.eos
        self.n_vocab = model.n_vocab
        self._compiled: dict[str, Any] = {}
        self._bitmask = llguidance.numpy.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    def compile(self, schema: Mapping[str, Any]) -> Any:
        """A matcher for ``schema`` (cached); raises ValueError if llguidance cannot compile it."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._compiled:
            grammar = self._llg.LLMatcher.grammar_from_json_schema(
                # the same separators as json.dumps: the prompt's examples look like this, and a
                # model stays closer to what it was shown (forced tokens cost little)
                dict(schema),
                defaults={
                    "whitespace_flexible": False,
                    "key_separator": ": ",
                    "item_separator": ", ",
                    "json_allow_general_unicode_escapes": True,
                },
            )
            matcher = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
            if matcher.is_error():
                raise ValueError(f"llguidance cannot compile the schema: {matcher.get_error()}")
            self._compiled[key] = matcher
        return self._compiled[key].deep_copy()

    def generate(
        self,
        matcher: Any,
        *,
        max_tokens: int,
        temperature: float,
        rng: np.random.Generator,
        call_margin: float | None = None,
        confirm_answer: Callable[[float], str] | None = None,
    ) -> Generated:
        """Generate from the evaluated prompt until the grammar completes or ``max_tokens``. Where the
        step chooses between a call and an answer (a step's ``action``, a batch step's first key),
        measure how far the model leans to calling (``Generated.decision_gap``), and after a batch
        step's first call how far it leans to another (``more_gap``, measured only: a margin on it
        lost on BFCL's tune sample); where ``call_margin`` is given and the lean to calling is not
        above it, answer (``leaned`` says so), unless ``confirm_answer`` (asked with the lean there)
        gives no reason."""
        out: list[int] = []
        calls = forced = 0
        tail = text = leaned = ""
        gap: float | None = None
        more: float | None = None
        while len(out) < max_tokens and not matcher.is_stopped():
            ff = matcher.compute_ff_tokens()[: max_tokens - len(out)]
            if ff:
                matcher.consume_tokens(ff)
                out += ff
                forced += len(ff)
            else:
                decide = gap is None and tail.endswith(DECISION_CUES)
                between = not decide and more is None and text.endswith("}") and _between_calls(text)
                kind = "call" if decide else "more" if between else None
                margin = call_margin if decide else None
                confirm = confirm_answer if decide else None
                token, found, why = self._choose(matcher, temperature, rng, kind, margin, confirm)
                if decide:
                    gap = found
                elif between:
                    more = found
                if why:
                    leaned = f"answered: calling led by {found:.2f}, {why}"
                if token == self.eos or not matcher.consume_token(token):
                    break
                out.append(token)
                ff = [token]
            piece = self.model.detokenize(ff)
            text += piece
            tail = (tail + piece)[-max(map(len, DECISION_CUES)) - 8 :]
            if matcher.is_stopped() or len(out) >= max_tokens:
                break
            self.model.eval(ff)  # forced tokens go in one batch: one decode call, not len(ff)
            calls += 1
        return Generated(tokens=out, finished=matcher.is_stopped() or matcher.is_accepting(), decode_calls=calls,
                         forced=forced, decision_gap=gap, more_gap=more, leaned=leaned)  # fmt: skip

    def _choose(
        self,
        matcher: Any,
        temperature: float,
        rng: np.random.Generator,
        decide: str | None = None,
        margin: float | None = None,
        confirm: Callable[[float], str] | None = None,
    ) -> tuple[int, float | None, str]:
        """The next token; where ``decide`` names a choice (``call``: a call or an answer; ``more``:
        another call or none), the gap between its two sides (:meth:`_sides`), and why ``margin``
        turned the choice to the second side ("" where it did not): the gap was not above it, and
        ``confirm``, asked with the gap, gave a reason."""
        logits = self.model.logits()
        self._np_llg.fill_next_token_bitmask(matcher, self._bitmask, 0)
        allowed = np.unpackbits(self._bitmask[0].view(np.uint8), bitorder="little")[: self.n_vocab].astype(bool)
        logits[~allowed] = -np.inf
        gap: float | None = None
        if decide is not None:
            first, second = self._sides(allowed, decide)
            if first and second:
                gap = float(logits[first].max() - logits[second].max())
                if margin is not None and gap <= margin:
                    why = confirm(gap) if confirm is not None else f"not more than the margin {margin:.2f}"
                    if why:
                        return second[int(np.argmax(logits[second]))], gap, why
        if temperature <= 0:
            return int(np.argmax(logits)), gap, ""
        scaled = (logits - logits.max()) / temperature
        probs = np.exp(scaled)
        probs /= probs.sum()
        return int(rng.choice(self.n_vocab, p=probs)), gap, ""

    def _sides(self, allowed: np.ndarray[Any, Any], decide: str) -> tuple[list[int], list[int]]:
        """The allowed tokens on each side of a choice: for ``call``, those that open a call and those
        that open an answer; for ``more``, those that go on to another call and those that close the list."""
        first: list[int] = []
        second: list[int] = []
        for token in np.flatnonzero(allowed)[:64]:
            text = self.model.detokenize([int(token)])
            if decide == "more":
                text = text.lstrip()
                if text.startswith(","):
                    first.append(int(token))
                elif text.startswith("]"):
                    second.append(int(token))
            elif text and any(word.startswith(text) for word in CALLING):
                first.append(int(token))
            elif text and ANSWERING.startswith(text):
                second.append(int(token))
        return first, second


def _between_calls(text: str) -> bool:
    """Whether ``text``, a batch step being written, has just closed a call of its ``calls`` list
    (the list open, no call open), read string-aware."""
    if not text.startswith('{"calls"'):
        return False
    depth, quoted, escaped = 0, False, False
    for char in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth == 2 and not quoted
