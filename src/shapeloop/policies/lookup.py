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
and the tool's error message), leaving out functions that take one of the failed arguments (they
use the value rather than give it; so a login that takes the same user name as the failed call is
left out too), and names the best ``top`` of them in a note the next step reads. With ``must_call``
that step may only call: fix the call, take a named function, or any other. Where a named function
then works and the failed function did not, the next step reads a note to make the failed call
again with what came back (and, with ``must_call``, must call, even where the lookup's result was
all the task wanted: one call more). At most ``max_hints`` failures a run are answered so. Nothing
happens where no function comes close (the plain loop's feedback stands) or where the failed call
named a function that does not exist (its name is what to fix, and the error says so); the run's
last step reads the note but may answer (made to call, it would end the run unanswered).

The ranking reads character n-grams weighted by how rare they are among the tools (a gram every
tool holds, such as a preamble all their descriptions share, weighs little) and no word of any
language: a word (combining marks included) is its beginnings and itself, and a run of Chinese,
Japanese or Korean characters its single characters and pairs. Any gram shared counts, so among a
handful of tools a common word ("the", "in") is enough for the note to name a function that has
nothing to do with the failure: the model can still fix the call.

The step that may only call is held by the step's schema: in prose mode, or with native tool calls,
the backend does not constrain the reply, the model may answer anyway, and its answer stands.

Measured on ``multi_turn_base`` 100-119 (``measurements/policies.json``). Two additions for
qwen2.5-coder-0.5b, which takes the named lookup and then makes its failed call again with the old
value, were measured and deleted: spelling the failed call out with the value the lookup's result
gave, and then refusing it made again with the old one. Neither changed an entry's verdict or a
turn's state for either model; the 0.5B model copied its own failed call past both.
"""

from __future__ import annotations

import copy
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

from shapeloop.policies.base import CallOutcome, Policy, RunView, StepShape
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STEM = 7  # a word counts by its beginnings up to this many letters: "kopiere" and "kopiert" share " kopie"
_READ = 2000  # characters of each text (an error message, a tool's description) read for ranking


def _words(text: str) -> list[str]:
    """The words of ``text`` outside Chinese, Japanese and Korean runs: letters, digits and the marks
    that combine with them (Devanagari's vowel signs, a decomposed umlaut), split at anything else."""
    words, word = [], []
    for char in text:
        if (char.isalnum() or unicodedata.category(char) in ("Mn", "Mc")) and not _CJK_RUN.match(char):
            word.append(char)
        elif word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return words


def grams(text: str) -> dict[str, float]:
    """The character n-grams of ``text`` with their weights: each word by its beginnings (3 to 7
    characters) and itself, the word weighing one in all; each character and pair of characters of a
    run of Chinese, Japanese or Korean script."""
    text = unicodedata.normalize("NFC", _CAMEL.sub(" ", text[:_READ])).casefold()
    found: dict[str, float] = defaultdict(float)
    for run in _CJK_RUN.findall(text):
        for part in [*run, *(run[i : i + 2] for i in range(len(run) - 1))]:
            found[part] += 1
    for word in _words(text):
        parts = [" " + word[:size] for size in range(3, min(len(word), _STEM) + 1)] + [f" {word} "]
        for part in parts:
            found[part] += 1 / len(parts)
    return found


def _parameters(tool: Tool) -> Mapping[str, object]:
    properties = tool.parameters.get("properties", {})
    return properties if isinstance(properties, Mapping) else {}


def _arguments_text(tool: Tool, names: Sequence[str]) -> str:
    """The names and descriptions of some of a tool's parameters."""
    parts = []
    for name in names:
        spec = _parameters(tool).get(name)
        parts.append(name)
        if isinstance(spec, Mapping):
            parts.append(str(spec.get("description", "")))
    return "\n".join(parts)


class Ranker:
    """Tools ranked against a text by their name and description, n-grams IDF-weighted among the tools."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        docs = [grams(f"{tool.name}\n{tool.description}") for tool in tools]
        counts: Counter[str] = Counter(gram for doc in docs for gram in doc)
        self.idf = {gram: math.log(1 + len(docs) / count) for gram, count in counts.items()}
        self.vectors = {tool.name: self._weighted(doc) for tool, doc in zip(tools, docs, strict=True)}

    def _weighted(self, found: Mapping[str, float]) -> dict[str, float]:
        vector = {g: math.sqrt(n) * self.idf[g] for g, n in found.items() if g in self.idf}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        return {g: v / norm for g, v in vector.items()}

    def scores(self, texts: Sequence[str]) -> dict[str, float]:
        """Each tool's cosine with ``texts`` read together (each text up to its first 2 000 characters)."""
        found: dict[str, float] = defaultdict(float)
        for text in texts:
            for gram, weight in grams(text).items():
                found[gram] += weight
        query = self._weighted(found)
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
        for name, value in (("top", top), ("max_hints", max_hints)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number, 1 or more, not {value!r}")
        self.top = top
        self.must_call = must_call
        self.max_hints = max_hints
        self._tools: dict[str, Tool] = {}
        self._ranker: Ranker | None = None
        self._hinted = 0
        self._failed: tuple[str, ...] = ()  # after a note that named functions: the functions that failed
        self._named: tuple[str, ...] = ()  # and the functions it named

    def for_run(self, task: str, tools: Sequence[Tool]) -> LookupHint:
        """A fresh copy (a subclass stays one) with the tools' names and descriptions read once."""
        del task
        fresh = copy.copy(self)
        fresh._tools = {tool.name: tool for tool in tools}
        fresh._ranker = Ranker(tools)
        fresh._hinted, fresh._failed, fresh._named = 0, (), ()
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """After a note that named functions, once the model has called: where a named function
        worked and no failed one did, a note to make the failed call again. Where the calls made since
        the last step all failed: the note naming the functions that may give what they lacked."""
        latest = [outcome for outcome in view.calls if outcome.step == view.step - 1]
        if not latest:  # an unreadable reply, a refused call: whatever waits, waits for the next calls
            return None
        answer: Literal["may", "never"] = "never" if self.must_call else "may"  # the run's last step may answer
        if self._failed:
            before, gave, self._failed, self._named = self._failed, self._named, (), ()
            worked = {outcome.call.tool for outcome in latest if outcome.status is ToolStatus.OK}
            if worked & set(gave) and not worked & set(before):
                again = ", ".join(before)
                return StepShape(
                    reason=f"{', '.join(sorted(worked & set(gave)))} worked: {again} is asked for again",
                    note=f"If the task still needs it, call {again} again now, with the values these results give.",
                    answer=answer,
                )
        if self._hinted >= self.max_hints or any(outcome.status is not ToolStatus.ERROR for outcome in latest):
            return None
        if any(outcome.call.tool not in self._tools for outcome in latest):
            return None  # a function that does not exist: its name is what to fix, and the error says so
        named = self.candidates(latest)
        if not named:  # nothing to point to: the plain loop's feedback is all there is to say
            return None
        self._hinted += 1
        failed = tuple(dict.fromkeys(outcome.call.tool for outcome in latest))
        self._failed, self._named = failed, tuple(named)
        signatures = ", ".join(self._tools[name].signature() for name in named)
        note = (  # the words measured on multi_turn_base 100-119: a change of words is a change to measure
            f"{'That call' if len(latest) == 1 else 'Those calls'} failed. If it needs a value you do not have, "
            f"or one the function does not know, a function may give it: {signatures}. Call it first, then the "
            "call that needs its result. Or fix the call's arguments."
        )
        return StepShape(
            reason=f"{', '.join(failed)} failed: named {', '.join(named)}",
            note=note,
            answer=answer,
        )

    def candidates(self, failed: Sequence[CallOutcome]) -> list[str]:
        """The functions closest to what failed, best first; none that the failed calls' functions
        are, or that take one of the failed arguments (they use the value, they do not give it)."""
        if self._ranker is None:
            return []
        used = {outcome.call.tool for outcome in failed}
        inputs = {name for outcome in failed for name in outcome.call.args}
        texts = []
        for outcome in failed:
            tool = self._tools.get(outcome.call.tool)
            if tool is not None:
                texts.append(_arguments_text(tool, list(outcome.call.args)))
            texts.append(outcome.text)
        scores = self._ranker.scores(texts)
        eligible = [
            name
            for name, tool in self._tools.items()
            if name not in used and not inputs & set(_parameters(tool)) and scores.get(name, 0.0) > 0
        ]
        return sorted(eligible, key=lambda name: -scores[name])[: self.top]
