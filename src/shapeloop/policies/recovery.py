"""Recovery: after a failed call, a note that makes the next move plain, and one objection to an
answer that only repeats the error.

Issue 33: on BFCL's multi-turn entries, 15 of 37 turns ended stuck on one failing call repeated to
the limit, and others ended with the error passed on as the answer ("mv: cannot move 'log.txt': No
such file or directory."). After a call that failed, this policy adds a note to the next steps
(until another call is made) that says, from the call, the tool's schema and the tool's own message:

- which of the call's values the tool's message names (a value of the call written in the error
  is the one to change, or to find first with another call);
- the values the tool's schema allows for an argument whose value is not among them;
- the state the caller's ``state`` function reports (``current folder: /workspace``), if given.

And an answer that repeats the failed call's message (its first line, compared as text) is put back
once, since a failed call is not the task done; an answer given again stands. Everything it decides
compares the call's own values with the tool's own text: it reads no word of any language.

Measured: it never acted on BFCL's multi-turn tune entries (``multi_turn_base`` 100-109,
qwen2.5-coder-0.5b): BFCL's API classes return their errors as data (``{"error": ...}``), which the
benchmark passes on as ordinary results, so no call failed. Not judged yet
(``measurements/policies.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shapeloop.policies.base import CallOutcome, Objection, Policy, RunView, StepShape
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool

_MIN_ECHO = 12  # characters of an error's first line an answer must repeat to be taken for an echo
_SHOWN = 200  # characters of the tool's message the note quotes


class Recovery(Policy):
    """After a failed call, say what to change; put back once an answer that only repeats the error.

    Args:
        state: called at a step after a failure; returns a short line of the tools' state.
        object_to_echo: put back an answer that repeats the failed call's message (once a run).
    """

    def __init__(self, state: Callable[[], str] | None = None, *, object_to_echo: bool = True) -> None:
        self.state = state
        self.object_to_echo = object_to_echo
        self._objected = False

    def shape_step(self, view: RunView) -> StepShape | None:
        """A note on the failed call, at each step until the next call."""
        failed = view.last
        if failed is None or failed.status is not ToolStatus.ERROR:
            return None
        tool = next((t for t in view.tools if t.name == failed.call.tool), None)
        lines = [f"{failed.call} failed; the tool said: {_first_line(failed.text)[:_SHOWN]}"]
        named = [f"{key}={value!r}" for key, value in _values(failed) if str(value) in failed.text]
        if named:
            lines.append(
                f"Its message names {', '.join(named)}: change that, or first make a call that shows the right value."
            )
        for key, allowed in _outside_choices(tool, failed.call.args):
            lines.append(f"{key} takes one of: {', '.join(map(str, allowed))}.")
        line = " ".join(str(self.state()).split()) if self.state is not None else ""
        if line:
            lines.append(f"Now: {line}")
        lines.append("Do not make the same call again.")
        return StepShape(reason=f"{failed.call.tool} failed at the last call", note="\n".join(lines))

    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        """Put back, once, an answer that repeats the failed call's message."""
        failed = view.last
        if not self.object_to_echo or self._objected or failed is None or failed.status is not ToolStatus.ERROR:
            return None
        error = " ".join(_first_line(failed.text).split()).casefold()
        if len(error) < _MIN_ECHO or error not in " ".join(answer.split()).casefold():
            return None
        self._objected = True
        return Objection(
            reason=f"the answer repeats the message of the failed call {failed.call}",
            feedback=f"That is the message of the failed call {failed.call}, not the task done. Fix the call "
            "or make another one; if the task cannot be done, give your answer again and say why.",
        )


def _first_line(text: str) -> str:
    """The error's first line that says something (the toolbox's ``ERROR:`` prefix taken off)."""
    for line in text.splitlines():
        line = line.strip().removeprefix("ERROR:").strip()
        if line:
            return line
    return ""


def _values(outcome: CallOutcome) -> list[tuple[str, Any]]:
    """The call's plain values worth looking for in a message (not True/False, not too short)."""
    return [
        (key, value)
        for key, value in outcome.call.args.items()
        if isinstance(value, str | int | float) and not isinstance(value, bool) and len(str(value)) >= 2
    ]


def _outside_choices(tool: Tool | None, args: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """Arguments whose value is not among those the tool's schema allows, with the allowed values."""
    properties = {} if tool is None else tool.parameters.get("properties", {})
    found = []
    for key, value in args.items():
        spec = properties.get(key) if isinstance(properties, Mapping) else None
        allowed = spec.get("enum") if isinstance(spec, Mapping) else None
        if isinstance(allowed, list) and value not in allowed:
            found.append((key, allowed))
    return found
