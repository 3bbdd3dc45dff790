"""Frozen event records, the run's transcript, and the sinks that show them.

The loop emits one event for each thing that happens, to every sink, in order. For a run that calls
a tool and then answers, the events are::

    step, reply, thought, tool_call, tool_result, step, reply, thought, answer, stop
"""

from __future__ import annotations

import enum
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import IO, Any, ClassVar

from shapeloop.brain import Finish, Message, Usage
from shapeloop.errors import TranscriptError
from shapeloop.text import printable, to_json
from shapeloop.tools import ToolCall, ToolStatus


class Mode(enum.StrEnum):
    """How the run asked the model for steps."""

    CONSTRAINED = "constrained"
    """The step schema was enforced by the backend (a grammar or ``format``)."""
    PROSE = "prose"
    """The backend refused the schema; the step was read out of a prose reply."""
    NATIVE = "native"
    """The backend's own tool-calling API carried the calls."""


class StopReason(enum.StrEnum):
    """Why a run ended."""

    ANSWERED = "answered"
    MAX_STEPS = "max_steps"
    STUCK = "stuck"
    BARREN = "barren"
    BACKEND_ERROR = "backend_error"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"


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


@dataclass(kw_only=True)
class Transcript:
    """Every message and event of a run, in order; writable as JSON Lines.

    A run given ``transcript_path`` streams it: each entry is appended to the file and flushed as
    it happens, so a crash or ``kill -9`` loses at most the entry being written.
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    _file: IO[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def streaming(cls, path: str | os.PathLike[str]) -> Transcript:
        """An empty transcript that appends each entry to ``path`` (checked now: see :func:`open_jsonl`)."""
        return cls(_file=open_jsonl(path))

    def add_message(self, message: Message) -> None:
        """Record a message of the conversation."""
        self.add({"type": "message", "role": message["role"], "content": message["content"]})

    def add_event(self, event: Event) -> None:
        """Record an event."""
        self.add({"type": "event", **event.to_dict()})

    def add(self, entry: dict[str, Any]) -> None:
        """Record an entry (and write it through, when streaming)."""
        self.entries.append(entry)
        if self._file is not None:
            self._file.write(to_json(entry) + "\n")
            self._file.flush()

    def close(self) -> None:
        """Stop streaming and close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def messages(self) -> list[Message]:
        """The conversation, as sent to the model."""
        return [Message(role=e["role"], content=e["content"]) for e in self.entries if e["type"] == "message"]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events, as plain data."""
        return [e for e in self.entries if e["type"] == "event"]

    def to_jsonl(self) -> str:
        """One JSON object per line."""
        return "".join(to_json(e) + "\n" for e in self.entries)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the transcript as JSON Lines, replacing ``path`` atomically (a reader never sees
        half a file); the temporary file is made with ``mkstemp`` beside it."""
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".transcript-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(self.to_jsonl())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def open_jsonl(path: str | os.PathLike[str]) -> IO[str]:
    """Open ``path`` to append JSON Lines to, creating it; refuse a symlink, a folder, or anything
    that is not a regular file, with a message saying what to pass instead.

    Raises:
        TranscriptError: the path cannot be written.
    """
    shown = os.fspath(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        why = {errno.ELOOP: "it is a symlink", errno.EISDIR: "it is a directory"}.get(exc.errno or 0, exc.strerror)
        raise TranscriptError(
            f"cannot write a transcript to {shown!r}: {why}; name a file in a folder you can write"
        ) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TranscriptError(f"cannot write a transcript to {shown!r}: it is not a regular file; name a file")
    return os.fdopen(fd, "a", encoding="utf-8")


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, ToolCall):
        return {"tool": value.tool, "args": dict(value.args)}
    if isinstance(value, Usage):
        return {
            "prompt_tokens": value.prompt_tokens,
            "completion_tokens": value.completion_tokens,
            "cached_tokens": value.cached_tokens,
        }
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
}
