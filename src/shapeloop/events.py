"""Frozen event records and the sinks that show them.

The loop emits one event for each thing that happens, to every sink, in order. For a run that calls
a tool and then answers, the events are::

    step, reply, thought, tool_call, tool_result, step, reply, thought, answer, stop
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import IO, Any, ClassVar

from shapeloop.brain import Finish, Usage
from shapeloop.jsonl import open_jsonl
from shapeloop.modes import Mode, StopReason
from shapeloop.text import printable, to_json
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import ToolCall


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every event; ``step`` is the step it belongs to (0 before the first)."""

    kind: ClassVar[str] = "event"
    step: int

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON-ready data, with its ``kind``."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            out[f.name] = _plain(getattr(self, f.name))
        return out


@dataclass(frozen=True, kw_only=True)
class StepBegan(Event):
    """A step starts: the model is about to be asked."""

    kind: ClassVar[str] = "step"
    mode: Mode


@dataclass(frozen=True, kw_only=True)
class ModeChanged(Event):
    """The backend refused the schema; the run continues in another mode."""

    kind: ClassVar[str] = "mode"
    mode: Mode
    reason: str


@dataclass(frozen=True, kw_only=True)
class ReplyReceived(Event):
    """The model replied."""

    kind: ClassVar[str] = "reply"
    text: str
    finish: Finish
    usage: Usage | None = None
    engine: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReplyCut(Event):
    """The reply hit the length limit; the model is told to be shorter."""

    kind: ClassVar[str] = "cut"
    text: str


@dataclass(frozen=True, kw_only=True)
class ReplyUnreadable(Event):
    """No step could be read from the reply."""

    kind: ClassVar[str] = "unreadable"
    text: str
    error: str


@dataclass(frozen=True, kw_only=True)
class ThoughtGiven(Event):
    """The step's ``reason``."""

    kind: ClassVar[str] = "thought"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCalled(Event):
    """The model asked for a tool."""

    kind: ClassVar[str] = "tool_call"
    call: ToolCall


@dataclass(frozen=True, kw_only=True)
class CallsMerged(Event):
    """A step wrote one call several times (same tool, same arguments): it ran once, and the model
    is told so beside its result."""

    kind: ClassVar[str] = "calls_merged"
    call: ToolCall
    times: int


@dataclass(frozen=True, kw_only=True)
class CallRefused(Event):
    """A call was refused before it ran, by a policy's ``check_call`` (its reason in ``objection``)."""

    kind: ClassVar[str] = "call_refused"
    call: ToolCall
    objection: str


@dataclass(frozen=True, kw_only=True)
class PolicyIntervened(Event):
    """A policy changed the run: it shaped a step, refused a call, objected to an answer, or (hook
    ``for_run``) was left out because the brain lacks what it needs.

    Attributes:
        policy: the policy's name.
        hook: ``for_run``, ``shape_step``, ``check_call`` or ``check_answer``.
        change: what it changed, in short (``offered 8 of 31 tools``, ``answer only``, ``refused``).
        reason: why, in the policy's words.
    """

    kind: ClassVar[str] = "policy"
    policy: str
    hook: str
    change: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ToolReturned(Event):
    """A tool call's outcome, as the model will see it.

    ``status`` is ``repeat`` for an identical call with an identical result; ``repeats`` counts
    such repeats of this call so far.
    """

    kind: ClassVar[str] = "tool_result"
    call: ToolCall
    status: ToolStatus
    text: str
    chars: int
    truncated: bool = False
    repeats: int = 0


@dataclass(frozen=True, kw_only=True)
class AnswerGiven(Event):
    """The model answered and the answer was accepted."""

    kind: ClassVar[str] = "answer"
    text: str


@dataclass(frozen=True, kw_only=True)
class AnswerRejected(Event):
    """The answer was empty or the caller's acceptor objected."""

    kind: ClassVar[str] = "rejection"
    text: str
    objection: str


@dataclass(frozen=True, kw_only=True)
class RepeatNoticed(Event):
    """A call or a barren reply has started repeating (before the stuck limit stops the run)."""

    kind: ClassVar[str] = "repeat"
    what: str
    times: int


@dataclass(frozen=True, kw_only=True)
class RunStopped(Event):
    """The run ended."""

    kind: ClassVar[str] = "stop"
    stop: StopReason
    reason: str


Sink = Callable[[Event], None]


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, ToolCall):
        return {"tool": value.tool, "args": dict(value.args)}
    if isinstance(value, Usage):
        return value.to_dict()
    return value


class JsonlSink:
    """Appends each event to a JSON Lines file as it happens (so a crash loses nothing).

    The file is opened for each event (no handle is left open), never through a symlink.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path

    def __call__(self, event: Event) -> None:
        with open_jsonl(self.path) as handle:
            handle.write(to_json(event.to_dict()) + "\n")


class ConsoleSink:
    """Prints each step as it happens, in a layout meant for a terminal.

    Args:
        stream: where to print (standard error by default, so standard output stays for answers).
        color: use ANSI colours; by default only when ``stream`` is a terminal and ``NO_COLOR``
            is unset.
        preview_chars: how much of a tool result to show.
    """

    def __init__(self, stream: IO[str] | None = None, *, color: bool | None = None, preview_chars: int = 160) -> None:
        self.stream = stream if stream is not None else sys.stderr
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.color = (tty and "NO_COLOR" not in os.environ) if color is None else color
        self.preview_chars = preview_chars

    def __call__(self, event: Event) -> None:
        line = self.format(event)
        if line is not None:
            print(line, file=self.stream, flush=True)

    def format(self, event: Event) -> str | None:
        """The text printed for ``event``, or None for events this sink does not show."""
        if isinstance(event, StepBegan):
            return self._paint(f"── step {event.step} ", "2") + self._paint(f"({event.mode.value})", "2")
        if isinstance(event, ThoughtGiven):
            return self._row("thought", event.text, "36")
        if isinstance(event, ToolCalled):
            return self._row("call", str(event.call), "33")
        if isinstance(event, CallsMerged):
            return self._row("merged", f"{event.call} written {event.times} times: runs once", "33")
        if isinstance(event, CallRefused):
            return self._row("refused", f"{event.call}: {event.objection}", "31")
        if isinstance(event, PolicyIntervened):
            return self._row("policy", f"{event.policy} ({event.hook}): {event.change}: {event.reason}", "35")
        if isinstance(event, ToolReturned):
            size = f"{event.chars} chars" + (", cut" if event.truncated else "")
            repeat = f" (repeat {event.repeats})" if event.repeats else ""
            return self._row(
                f"{event.status.value}",
                f"[{size}]{repeat} {self._preview(event.text)}",
                _STATUS_COLOR[event.status],
            )
        if isinstance(event, AnswerGiven):
            return self._row("answer", event.text, "1;32")
        if isinstance(event, AnswerRejected):
            return self._row("rejected", event.objection, "31")
        if isinstance(event, ReplyUnreadable):
            return self._row("unread", f"{event.error}: {self._preview(event.text)}", "31")
        if isinstance(event, ReplyCut):
            return self._row("cut", "reply hit the length limit", "31")
        if isinstance(event, ModeChanged):
            return self._row("mode", f"now {event.mode.value}: {event.reason}", "35")
        if isinstance(event, RunStopped):
            mark = "1;32" if event.stop is StopReason.ANSWERED else "1;31"
            return self._paint(f"■ {event.stop.value}: {printable(event.reason)}", mark)
        return None

    def _row(self, label: str, text: str, color: str) -> str:
        return f"  {self._paint(f'{label:<8}', color)} {printable(text)}"

    def _preview(self, text: str) -> str:
        flat = " ".join(printable(text).split())
        return flat if len(flat) <= self.preview_chars else flat[: self.preview_chars - 1] + "…"

    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text


_STATUS_COLOR = {
    ToolStatus.OK: "32",
    ToolStatus.ERROR: "31",
    ToolStatus.DENIED: "31",
    ToolStatus.REPEAT: "35",
    ToolStatus.CANCELLED: "31",
}


def max_steps_reason(events: Sequence[Event], max_steps: int) -> str:
    """Why a run stopped at ``max_steps``, with how its last step ended."""
    ended = (e for e in reversed(events) if not isinstance(e, (StepBegan, ReplyReceived, ThoughtGiven)))
    last = next(ended, None)
    tail = f"; the last step ended with {last.kind.replace('_', ' ')}" if last is not None else ""
    return f"no accepted answer after {max_steps} steps (max_steps={max_steps}){tail}"
