"""ToolRanking: with many tools, each step offers the few whose documentation is closest to the
request and the last result, and names the rest so the model can ask for one.

Issue 33: BFCL's multi-turn entries offer 20 to 40 functions whose documentation alone fills most of
an 8 192-token window, and a small model then calls a plausible neighbour. This policy ranks each
tool's name and documentation (its description, its parameters' names, descriptions and allowed
values) against the request and the latest result, by character n-grams weighted by how rare they
are among the tools (IDF), and offers the top ``max_tools``. It reads no word of any language: a word
of letters becomes its beginnings and itself (``kopiere`` and ``Kopiert`` share ``" kopie"``), runs
of Chinese, Japanese or Korean characters become single characters and pairs, and a gram every
tool's documentation holds weighs next to nothing. So it matches a request to documentation in the
same language, or through the names, numbers and borrowed words they share; a German request
against English documentation matches only through those, a synonym ("how many" for "count") not at
all, and then the escape below is what the model has.

Tools already called in the run are always offered. The cut tools are named in a one-line note; a
model that names one of them (in a step's reason, its call, or its answer) gets it offered from the
next step on, and an answer that names one is put back once, so the model can call it. A call of a
cut tool that reaches the loop anyway (prose mode) runs: this policy refuses nothing.

Measured: not yet (issue 33 asks for first-call accuracy and prompt tokens per step on BFCL's
multi-turn entries, with and without it).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shapeloop.policies.base import Objection, Policy, RunView, StepShape
from shapeloop.tools import Tool

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[^\\W_{_CJK}]+")  # letters and digits of any other script, split at "_"
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STEM = 7  # a word's beginnings count up to this many letters (kopiere, kopiert: " kopie")
_READ = 4000  # characters of a request or a result read for ranking
_LAST_WEIGHT = 0.5  # the latest result counts half as much as the request


def grams(text: str) -> dict[str, float]:
    """The character n-grams of ``text``, with their weights: each word's beginnings (3 to 7 letters:
    ``" kop"`` ... ``" kopier"``) and the whole word (``" kopiere "``), the word weighing one in all;
    and each character and pair of characters of a run of Chinese, Japanese or Korean script."""
    text = _CAMEL.sub(" ", text[:_READ]).casefold()
    found: dict[str, float] = defaultdict(float)
    for run in _CJK_RUN.findall(text):
        for part in [*run, *(run[i : i + 2] for i in range(len(run) - 1))]:
            found[part] += 1
    for word in _WORD.findall(text):
        # each word weighs one, however many beginnings it has: a long word does not outweigh a short one
        parts = [" " + word[:size] for size in range(3, min(len(word) - 1, _STEM) + 1)] + [f" {word} "]
        for part in parts:
            found[part] += 1 / len(parts)
    return found


def documentation(tool: Tool) -> str:
    """What a tool is ranked by: its name, description, and its parameters' names, descriptions and values."""
    parts = [tool.name, tool.description]
    properties = tool.parameters.get("properties", {})
    if isinstance(properties, Mapping):
        for name, spec in properties.items():
            parts.append(str(name))
            if isinstance(spec, Mapping):
                parts.append(str(spec.get("description", "")))
                parts += [str(value) for value in spec.get("enum", ())]
    return "\n".join(parts)


class Ranker:
    """Tools ranked against a text by their documentation's n-grams, IDF-weighted among the tools."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.names = [tool.name for tool in tools]
        docs = [grams(documentation(tool)) for tool in tools]
        counts: Counter[str] = Counter(gram for doc in docs for gram in doc)
        self.idf = {gram: math.log(1 + len(docs) / count) for gram, count in counts.items()}
        self.vectors = [self._weighted(doc) for doc in docs]

    def _weighted(self, found: Mapping[str, float]) -> dict[str, float]:
        vector = {g: math.sqrt(n) * self.idf[g] for g, n in found.items() if g in self.idf}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        return {g: v / norm for g, v in vector.items()}

    def scores(self, *texts: tuple[str, float]) -> dict[str, float]:
        """Each tool's score: the cosine of its documentation with each text, times the text's weight."""
        totals = dict.fromkeys(self.names, 0.0)
        for text, weight in texts:
            query = self._weighted(grams(text))
            for name, vector in zip(self.names, self.vectors, strict=True):
                totals[name] += weight * sum(value * vector.get(gram, 0.0) for gram, value in query.items())
        return totals


class ToolRanking(Policy):
    """Offer at most ``max_tools`` tools a step: those closest to the request and the last result.

    Args:
        max_tools: how many tools a step offers at most (tools already called or asked for by name
            come on top of the ranked ones). With this many tools or fewer, the policy does nothing.
    """

    def __init__(self, max_tools: int = 8) -> None:
        if max_tools < 1:
            raise ValueError(f"max_tools must be 1 or more, not {max_tools}")
        self.max_tools = max_tools
        self._ranker: Ranker | None = None
        self._asked: set[str] = set()  # cut tools the model named: offered from then on
        self._cut: frozenset[str] = frozenset()  # what the last step cut
        self._start: int | None = None  # where this run's own messages begin

    def for_run(self, task: str, tools: Sequence[Tool]) -> ToolRanking:
        """A fresh instance with the tools' documentation read once."""
        del task
        fresh = ToolRanking(self.max_tools)
        fresh._ranker = Ranker(tools) if len(tools) > self.max_tools else None
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """Offer the top tools; name the cut ones in the note."""
        if self._ranker is None or len(view.tools) <= self.max_tools:
            return None
        if self._start is None:
            self._start = max(len(view.messages) - 1, 0)
        names = [tool.name for tool in view.tools]
        self._asked |= named(names, _said(view.messages[self._start :]))
        kept = {outcome.call.tool for outcome in view.calls} | self._asked
        texts = [(view.task, 1.0)] + ([(view.last.text, _LAST_WEIGHT)] if view.last is not None else [])
        scores = self._ranker.scores(*texts)
        for name in sorted(names, key=lambda n: (-scores.get(n, 0.0), names.index(n))):
            if len(kept) >= self.max_tools:
                break
            kept.add(name)
        kept &= set(names)
        self._cut = frozenset(names) - kept
        if not self._cut:
            return None
        cut = [name for name in names if name in self._cut]
        return StepShape(
            reason=f"{len(cut)} of {len(names)} tools cut: the step offers the {len(kept)} whose documentation "
            "is closest to the request and the last result, and those called or asked for",
            tools=frozenset(kept),
            note=f"Not offered at this step: {', '.join(cut)}. If you need one of these, answer with its name "
            "alone, and it will be offered at the next step.",
        )

    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        """Put back, once, an answer that names a tool this policy cut: the model can call it now."""
        wanted = named(sorted(self._cut - self._asked), [answer])
        if not wanted:
            return None
        self._asked |= wanted
        shown = ", ".join(sorted(wanted))
        return Objection(
            reason=f"the answer names {shown}, cut from the step's tools: it is offered from the next step",
            feedback=f"{shown} is offered now: call it if the task needs it; otherwise give your answer again.",
        )


def named(names: Iterable[str], texts: Iterable[str]) -> set[str]:
    """The tool names written in ``texts`` as whole names (``cp`` in "call cp", not in "cpu")."""
    joined = "\n".join(texts)
    found = set()
    for name in names:
        head = r"(?<![A-Za-z0-9_.])" if name[:1].isascii() else ""
        tail = r"(?![A-Za-z0-9_])" if name[-1:].isascii() else ""
        if re.search(head + re.escape(name) + tail, joined):
            found.add(name)
    return found


def _said(messages: Sequence[Any]) -> list[str]:
    """What the model wrote in these messages."""
    return [message["content"] for message in messages if message["role"] == "assistant"]
