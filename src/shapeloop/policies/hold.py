"""HoldValues: after a call fails on a value the model wrote, the next call of that tool takes the
argument from the values the results have given since (or the user wrote), not the failed one.

Issue 46, item 3: a call often needs a value an earlier result gave (an id, a path, a ticker symbol),
and a small model copies the wrong thing: qwen2.5-coder-0.5b calls ``get_stock_info(symbol="Zeta
Corp")``, is told it failed, looks the symbol up, and makes its failed call again unchanged. Telling
it the right value in words was measured and changed nothing (``LookupHint``'s history); this policy
takes the wrong copy out of the model's reach instead, in the step's schema.

When a call fails, its *suspect* is the one plain argument (a string whose schema admits any short
text, or a whole number, with no ``enum``, ``const`` or ``pattern`` of its own) whose value no earlier
result held: a value from a result is trusted, and so is a number the user wrote; a number counts as
a whole (``1`` is not in ``12446``). Where two or more arguments are unproven, the suspect is the one
whose value the error names as a whole word, if only one; else none is suspected, and the policy
stays out. Earlier results are this request's and, in a :class:`~shapeloop.Conversation`, the
earlier requests' (:attr:`~shapeloop.policies.RunView.earlier`): on BFCL's multi-turn entries the id
a call needs was most often given a request before (an order placed, a flight booked). From the
first result that came back with the failure (another call of the same step: a model that writes a
lookup and the call that needs its value in one step reads both results at once) or after it, or
at once where earlier requests gave results, until the model calls that tool again, each step holds
that argument of that tool (:attr:`~shapeloop.policies.StepShape.hold`) to the values seen: the
values results have given, this request's latest first, then the earlier requests' (the strings and
numbers of a JSON result, the lines and then the words of a text one, none over 80 characters; a
whole-number argument takes those that write a number), and the user's own values (each quoted part
of the request and each word, the punctuation around it taken off), less the value that failed; at
most ``max_values``, half of them kept for the user's. With ``must_call`` the first held step may
only call, once a run (a model otherwise answers with the error; made to call at every failure, it
called until the run's last step). A later failure that names no suspect leaves the
hold as it is. The other tools, the tool's other arguments and the answer stay open. Where the reply
is not constrained (prose, native calls), a call of the held tool with another value is refused
(:meth:`HoldValues.check_call`), the values named, unless the value is written in the request (and
is not the one that failed).

So the only value held out is the one a call carried when the tool refused it, and that may be the
user's (the tool may have refused the call for another reason: a login missing, the wrong folder).
A value the model must compose (``..``, a joined path) or a user's words that no whitespace splits
(a request in Chinese or Japanese) cannot be written under the schema's hold; prose mode accepts a
value written in the request. The policy reads no word of any language: values are compared as they
are written.

Measured (``measurements/tuning-history.md``, ``measurements/policies.json``): on BFCL's multi-turn
screen, before it read a result of the failure's own step or a text result's words, it acted once for
qwen2.5-coder-0.5b (nothing changed); as it is, on the suite's multi-step tasks it acted on 2 tasks a
model and changed none (the models answered at the held step). Opt-in.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import jsonschema

from shapeloop.policies.base import Policy, Refusal, RunView, StepShape
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool, ToolCall

_QUOTED = re.compile(r"""(?:^|(?<=\W))(["'`])(.+?)\1(?=\W|$)|“(.+?)”|«(.+?)»|「(.+?)」|『(.+?)』|„(.+?)“""")
_PROBES = ("q", "\u2063zq7")  # any short text: a schema that refuses one of them constrains its values
_NUMBER = re.compile(r"-?\d{1,18}")
_EDGE = "\"'`.,;:!?()[]{}<>«»“”‘’„「」『』。、，；：！？（）【】"


def result_values(text: str, *, max_line: int = 80) -> list[str]:
    """The values a result gives: every string and number of a JSON result (keys left out), or the
    lines of a text result and then each word of it (an id in a sentence: ``H-8812 Gion Garden Inn
    41,800 JPY; ...``), without the punctuation around it; in order, each once, none longer than
    ``max_line`` characters (a value a call takes is short: a file's text is not one)."""
    try:
        data = json.loads(text)
    except ValueError:
        lines = [line.strip() for line in text.splitlines()]
        words = (word.strip(_EDGE) for line in lines for word in line.split())
        return list(dict.fromkeys(v for v in (*lines, *words) if v and len(v) <= max_line))
    return list(dict.fromkeys(value for value in _scalars(data) if len(value) <= max_line))


def _scalars(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for value in data.values():
            yield from _scalars(value)
    elif isinstance(data, list):
        for value in data:
            yield from _scalars(value)
    elif isinstance(data, str) and data.strip():
        yield data
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield str(data)


def user_values(text: str) -> list[str]:
    """The values a user's words hold as a model would copy them: each quoted part, and each word
    without the punctuation around it."""
    quoted = [next(g for g in m.groups()[1:] if g) for m in _QUOTED.finditer(text)]
    words = (word.strip(_EDGE) for word in text.split())
    return list(dict.fromkeys([*quoted, *(w for w in words if w)]))


class HoldValues(Policy):
    """Hold the argument a failed call made up to the values results gave since, and the user's.

    Args:
        max_values: at most this many values are held (the most recent results' first, then the
            user's); more would make the schema the model reads long.
        must_call: the first step of a run that holds a failed argument may only call (a tool; the
            failed one with a value held, or any other), not answer.
    """

    def __init__(self, *, max_values: int = 60, must_call: bool = False) -> None:
        if not isinstance(max_values, int) or isinstance(max_values, bool) or max_values < 1:
            raise ValueError(f"max_values must be a whole number, 1 or more, not {max_values!r}")
        self.max_values = max_values
        self.must_call = must_call
        self._pushed = False  # whether a held step of this run has had to call (one does, at most)
        self._strings: dict[str, dict[str, str]] = {}  # by tool: the arguments held, with their types
        # (tool, argument, failed value, the first outcome of the failure's step: results from there on count)
        self._suspect: tuple[str, str, str, int] | None = None
        self._seen = 0
        self._held: tuple[str, ...] = ()

    def for_run(self, task: str, tools: Sequence[Tool]) -> HoldValues:
        """A fresh copy that knows which arguments of each tool take strings."""
        del task
        fresh = copy.copy(self)
        fresh._strings = {t.name: _held_arguments(t) for t in tools}
        fresh._suspect, fresh._seen, fresh._held, fresh._pushed = None, 0, (), False
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """Hold the suspect argument of the failed tool to the values seen since the failure."""
        self._follow(view)
        self._held = ()
        if self._suspect is None:
            return None
        tool, argument, failed, since = self._suspect
        if not any(o.status is ToolStatus.OK for o in (*view.earlier, *view.calls[since:])):
            return None  # nothing has come back, earlier or since: the plain loop's feedback stands
        results = [o for o in (*view.earlier, *view.calls) if o.status is ToolStatus.OK]
        fits = _NUMBER.fullmatch if self._strings[tool][argument] == "integer" else bool  # a number takes numbers
        found = (v for o in reversed(results) for v in result_values(o.text))
        given = list(dict.fromkeys(v for v in found if v != failed and fits(v)))
        said = [v for v in user_values(view.task) if v != failed and v not in given and fits(v)]
        room = self.max_values - min(len(said), self.max_values // 2)  # half kept for the user's values
        values = [*given[:room], *said][: self.max_values]
        if not values:
            return None
        self._held = tuple(values)
        shown = ", ".join(values[:8]) + (", ..." if len(values) > 8 else "")
        reason = f"{tool} failed with {argument}={failed!r}: its {argument} is held to the {len(values)} values seen"
        note = f"{tool} failed with {argument}={failed!r}. Values seen: {shown}"
        answer: Literal["may", "never"] = "never" if self.must_call and not self._pushed else "may"
        self._pushed |= answer == "never"
        return StepShape(reason=reason, note=note, hold={tool: {argument: self._held}}, answer=answer)

    def check_call(self, view: RunView, call: ToolCall) -> Refusal | None:
        """Where the reply was not constrained: refuse the held tool called with a value not held
        (one written in the request is let through, but for the value that failed)."""
        if self._suspect is None or not self._held or call.tool != self._suspect[0]:
            return None
        argument = self._suspect[1]
        value = call.args.get(argument)
        if not isinstance(value, str) or value in self._held or (value in view.task and value != self._suspect[2]):
            return None
        shown = ", ".join(self._held[:8])
        return Refusal(reason=f"{call.tool}.{argument}={value!r} is none of the values held",
                       feedback=f"{call.tool} failed with {argument}={self._suspect[2]!r}; give {argument} one of "
                                f"the values the results gave: {shown}")  # fmt: skip

    def _follow(self, view: RunView) -> None:
        """Read the outcomes since the last step: a failure names a suspect, a call of the held tool
        ends the hold."""
        for index in range(self._seen, len(view.calls)):
            outcome = view.calls[index]
            if self._suspect is not None and outcome.call.tool == self._suspect[0]:
                self._suspect = None
            if outcome.status is ToolStatus.ERROR:
                self._suspect = self._suspected(view, index) or self._suspect
        self._seen = len(view.calls)

    def _suspected(self, view: RunView, index: int) -> tuple[str, str, str, int] | None:
        call = view.calls[index].call
        earlier = [o.text for o in (*view.earlier, *view.calls[:index]) if o.status is ToolStatus.OK]
        # a number is proven whole (1 is not in 12446), by a result or by the user's own words
        numbers = {v for text in earlier for v in result_values(text)} | set(user_values(view.task))
        unproven = [
            (name, value if isinstance(value, str) else str(value)) for name, value in call.args.items()
            if name in self._strings.get(call.tool, ()) and (
                (isinstance(value, str) and value and not any(value in text for text in earlier))
                or (isinstance(value, int) and not isinstance(value, bool) and str(value) not in numbers)
            )
        ]  # fmt: skip
        if len(unproven) > 1:  # the one the error names (as a whole: "a" is not in "account"), if only one
            error = view.calls[index].text
            unproven = [(name, value) for name, value in unproven
                        if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", error)]  # fmt: skip
        if len(unproven) != 1:
            return None
        name, value = unproven[0]
        step = view.calls[index].step  # its calls came back together: the first of them counts
        return call.tool, name, value, next(i for i, o in enumerate(view.calls) if o.step == step)


def _held_arguments(tool: Tool) -> dict[str, str]:
    """The tool's top-level arguments that take a plain string or a whole number, with that type: a
    string schema that admits any short text, an integer one with no values of its own (an ``enum``,
    ``const`` or ``pattern`` says what it takes, and is left alone)."""
    properties = tool.parameters.get("properties") or {}
    return {
        name: spec["type"] for name, spec in properties.items()
        if isinstance(spec, dict) and (
            (spec.get("type") == "string" and all(map(jsonschema.Draft202012Validator(spec).is_valid, _PROBES)))
            or (spec.get("type") == "integer" and not {"enum", "const"} & set(spec))
        )
    }  # fmt: skip
