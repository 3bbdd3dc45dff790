"""LookupHint: after a step whose calls all failed, name the functions that may give the missing
value, and have the next step call.

Issue 33: on BFCL's multi-turn tune entries (``multi_turn_base`` 100-119) the most common failure
is a value the model made up where a function would have given it: a company's name where the tool
takes its ticker symbol, with the lookup that gives the symbol offered and never called; a login
never made before a call that needs it. The model answered right after the failure with the error as
its answer. Made to call after a failure (the deleted ``call-after-failure``), the model repeated the
failed call; told in words what the error quoted (the deleted ``recovery``), it changed nothing. Both
left it to find the lookup among 20 to 40 functions.

This policy finds it: after a step in which every call failed, it ranks the other functions by how
close their name and description are to what failed (the failed arguments' names and descriptions,
and the tool's error message), leaving out functions that take the failed arguments themselves (they
consume the value, they do not give it), and names the best ``top`` of them in a note the next step
reads. With ``must_call`` that step may only call (fix the call, take a named function, or any
other). Where a named function then works and the step did not call the failed function again, the
next step reads a note to make the failed call again with what came back (and, with ``must_call``,
must call). At most ``max_hints`` failures a run are answered so. The ranking reads character
n-grams weighted by how rare they are among the tools (one that more than half of them hold does not
count) and no word of any language: a word of letters is its beginnings and itself, and a run of
Chinese, Japanese or Korean characters its single characters and pairs.

Measured on ``multi_turn_base`` 100-119 (``measurements/policies.json``).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from shapeloop.policies.base import CallOutcome, Policy, RunView, StepShape
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[^\\W_{_CJK}]+")  # letters and digits of any other script, split at "_"
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STEM = 7  # a word's beginnings count up to this many letters (kopiere, kopiert: " kopie")
_READ = 2000  # characters of an error message read for ranking


def grams(text: str) -> dict[str, float]:
    """The character n-grams of ``text`` with their weights: each word's beginnings (3 to 7 letters)
    and the whole word, the word weighing one in all; each character and pair of characters of a run
    of Chinese, Japanese or Korean script."""
    text = _CAMEL.sub(" ", text[:_READ]).casefold()
    found: dict[str, float] = defaultdict(float)
    for run in _CJK_RUN.findall(text):
        for part in [*run, *(run[i : i + 2] for i in range(len(run) - 1))]:
            found[part] += 1
    for word in _WORD.findall(text):
        parts = [" " + word[:size] for size in range(3, min(len(word), _STEM) + 1)] + [f" {word} "]
        for part in parts:
            found[part] += 1 / len(parts)
    return found


def _parameters(tool: Tool) -> Mapping[str, object]:
    properties = tool.parameters.get("properties", {})
    return properties if isinstance(properties, Mapping) else {}


def _described(tool: Tool, names: Sequence[str]) -> str:
    """The names and descriptions of some of a tool's parameters."""
    parts = []
    for name in names:
        spec = _parameters(tool).get(name)
        parts.append(name)
        if isinstance(spec, Mapping):
            parts.append(str(spec.get("description", "")))
    return "\n".join(parts)


class Ranker:
    """Tools ranked against a text by their name and description, n-grams IDF-weighted among the tools;
    a gram that more than half of them hold does not count."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.names = [tool.name for tool in tools]
        docs = [grams(f"{tool.name}\n{tool.description}") for tool in tools]
        counts: Counter[str] = Counter(gram for doc in docs for gram in doc)
        # a gram more than half the tools hold tells them apart too little to count (a shared preamble, "the")
        self.idf = {gram: math.log(len(docs) / count) for gram, count in counts.items() if 2 * count <= len(docs)}
        self.vectors = dict(zip(self.names, (self._weighted(doc) for doc in docs), strict=True))

    def _weighted(self, found: Mapping[str, float]) -> dict[str, float]:
        vector = {g: math.sqrt(n) * self.idf[g] for g, n in found.items() if g in self.idf}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        return {g: v / norm for g, v in vector.items()}

    def scores(self, text: str) -> dict[str, float]:
        """Each tool's cosine with ``text``."""
        query = self._weighted(grams(text))
        return {
            name: sum(value * vector.get(gram, 0.0) for gram, value in query.items())
            for name, vector in self.vectors.items()
        }


class LookupHint(Policy):
    """After a step whose every call failed (``ERROR:``), name the functions that may give what it
    lacked, and (``must_call``) have the next step call.

    Args:
        top: how many functions the note names at most.
        must_call: the step after the failure may only call (it may still fix the failed call).
        max_hints: at most this many steps of a run are shaped; after them the model may answer
            after a failure as in the plain loop (a task that cannot be done is then said so).
    """

    def __init__(self, *, top: int = 2, must_call: bool = True, max_hints: int = 1) -> None:
        if top < 1:
            raise ValueError(f"top must be 1 or more, not {top}")
        if max_hints < 1:
            raise ValueError(f"max_hints must be 1 or more, not {max_hints}")
        self.top = top
        self.must_call = must_call
        self.max_hints = max_hints
        self._tools: dict[str, Tool] = {}
        self._ranker: Ranker | None = None
        self._seen = 0  # calls the run had made at the last step this instance shaped
        self._hinted = 0
        self._pending: tuple[str, ...] = ()  # functions that failed before a note that named others

    def for_run(self, task: str, tools: Sequence[Tool]) -> LookupHint:
        """A fresh instance with the tools' names and descriptions read once."""
        del task
        fresh = LookupHint(top=self.top, must_call=self.must_call, max_hints=self.max_hints)
        fresh._tools = {tool.name: tool for tool in tools}
        fresh._ranker = Ranker(tools)
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """The note and the call-only step where the calls made since the last step all failed; after
        the step that followed such a note, where a call of it worked but no failed function was
        called again, a note to make the failed call again with what came back."""
        latest, self._seen = view.calls[self._seen :], len(view.calls)
        pending, self._pending = self._pending, ()
        worked = [outcome.call.tool for outcome in latest if outcome.status is ToolStatus.OK]
        if pending and worked and not set(pending) & set(worked):
            names = ", ".join(pending)
            return StepShape(
                reason=f"a named function worked: {names} again with its result",
                note=f"If the task still needs it, call {names} again now, with the values these results give.",
                answer="never" if self.must_call else "may",
            )
        if not latest or self._hinted >= self.max_hints:
            return None
        if any(outcome.status is not ToolStatus.ERROR for outcome in latest):
            return None
        self._hinted += 1
        named = self.candidates(latest)
        failed = tuple(dict.fromkeys(outcome.call.tool for outcome in latest))
        note = "That call failed." if len(latest) == 1 else "Those calls failed."
        if named:
            self._pending = failed
            signatures = ", ".join(self._tools[name].signature() for name in named)
            note += (
                " If it needs a value you do not have, or one the function does not know, a function may give it: "
                f"{signatures}. Call it first, then the call that needs its result."
            )
        note += " Or fix the call's arguments."
        reason = f"{', '.join(failed)} failed: " + (
            f"named {', '.join(named)}" if named else "no function gives its inputs"
        )
        return StepShape(reason=reason, note=note, answer="never" if self.must_call else "may")

    def candidates(self, failed: Sequence[CallOutcome]) -> list[str]:
        """The functions closest to what failed, best first; none that the failed calls' functions
        are, or that take one of the failed arguments (they use the value, they do not give it)."""
        if self._ranker is None:
            return []
        used = {outcome.call.tool for outcome in failed}
        inputs = {name for outcome in failed for name in outcome.call.args}
        query = []
        for outcome in failed:
            tool = self._tools.get(outcome.call.tool)
            if tool is not None:
                query.append(_described(tool, list(outcome.call.args)))
            query.append(outcome.text)
        scores = self._ranker.scores("\n".join(query))
        eligible = [
            name
            for name, tool in self._tools.items()
            if name not in used and not inputs & set(_parameters(tool)) and scores.get(name, 0.0) > 0
        ]
        return sorted(eligible, key=lambda name: -scores[name])[: self.top]
