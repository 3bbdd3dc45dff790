"""What a run is and how it ended: its transcript and its record (with its modes and stop reasons,
which live in :mod:`shapeloop.modes` and are re-exported here).

These are the loop's types; they live beside it so that the events and the command line can use
them without importing the loop.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from shapeloop.brain import Message, Usage
from shapeloop.jsonl import check_path, held, unwritable, why_unwritable
from shapeloop.jsonl import open_jsonl as open_jsonl  # re-exported: its home was here
from shapeloop.modes import Mode as Mode  # re-exported, as the next two: their home was here
from shapeloop.modes import StopReason as StopReason
from shapeloop.modes import choose_mode as choose_mode
from shapeloop.text import to_json

if TYPE_CHECKING:
    from shapeloop.events import Event


@dataclass(kw_only=True)
class Transcript:
    """Every message and event of a run, in order; writable as JSON Lines.

    A run given ``transcript_path`` streams it: each entry is appended to the file and flushed as
    it happens, so a crash or ``kill -9`` loses at most the entry being written. The stream holds an
    exclusive lock on the file until it is closed, so a second writer is refused rather than
    interleaving its entries; the system releases the lock of a process that dies.
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    _file: IO[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def streaming(cls, path: str | os.PathLike[str]) -> Transcript:
        """An empty transcript that appends each entry to ``path`` (checked now: see :func:`open_jsonl`),
        holding the file's lock until :meth:`close`.

        Raises:
            TranscriptError: the path cannot be written, or another transcript streams to it.
        """
        return cls(_file=open_jsonl(path, exclusive=True))

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
        file, self._file = self._file, None
        if file is not None:  # given up even where the close fails (a full disk): it releases the lock
            file.close()

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
        half a file); the temporary file is made with ``mkstemp`` beside it.

        Raises:
            TranscriptError: ``path`` is empty, holds a NUL or ends with a slash, is a directory, has a
                name too long, or its folder is missing or cannot be written (or is full); or another
                conversation or run is writing the file there (it holds its lock).
        """
        shown = os.fspath(path)
        check_path(shown)
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise unwritable(shown, "it is a directory")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".transcript-", suffix=".tmp", dir=folder)
        except OSError as exc:
            why = "its folder does not exist" if not os.path.isdir(folder) else exc.strerror
            raise unwritable(shown, why) from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(self.to_jsonl())
            with held(path):  # a log another conversation is writing is not replaced under it
                os.replace(tmp, path)
        except BaseException as exc:
            os.unlink(tmp)
            if isinstance(exc, OSError):
                raise unwritable(shown, why_unwritable(exc)) from exc
            raise

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


OutputT = TypeVar("OutputT", default=Any)
"""The type of a run's answer: ``output_type``'s, or Any (text, or the JSON value for a schema dict)."""


@dataclass(frozen=True, kw_only=True)
class AgentRun(Generic[OutputT]):
    """How a run went.

    Attributes:
        stop: why it ended; only ``answered`` carries an accepted answer.
        reason: a sentence a person can read, naming the facts (the call, the count, the limit).
        answer: the accepted answer as text (a typed answer as JSON), or None.
        output: the accepted answer as an object: an instance of ``output_type`` (the JSON value for
            a schema dict), the text when the run has no ``output_type``; None without an answer.
        steps: how many steps were asked of the model (a switch to prose mode costs none).
        mode: the mode the run ended in: ``constrained`` or ``prose`` (or ``native``).
        usage: token totals, when the backend reported them.
        transcript: every message and event, in order.
        events: the events, as emitted.
        policies: the names of the policies that ran, in order (``()`` for the plain loop).
        interventions: how many times each policy changed the run, by name.
    """

    stop: StopReason
    reason: str
    answer: str | None
    steps: int
    mode: Mode
    usage: Usage | None
    transcript: Transcript
    events: tuple[Event, ...] = field(default=(), repr=False)
    output: OutputT | None = None
    policies: tuple[str, ...] = ()
    interventions: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The run ended with an accepted answer."""
        return self.stop is StopReason.ANSWERED

    @property
    def messages(self) -> list[Message]:
        """The whole conversation, to continue it in another run (``history=``)."""
        return self.transcript.messages

    def to_dict(self) -> dict[str, Any]:
        """The run as plain data (for ``--json``)."""
        return {
            "stop": self.stop.value,
            "reason": self.reason,
            "answer": self.answer,
            "output": self.output if self.answer is None or isinstance(self.output, str) else json.loads(self.answer),
            "steps": self.steps,
            "mode": self.mode.value,
            "usage": None if self.usage is None else self.usage.to_dict(),
            "policies": list(self.policies),
            "interventions": dict(self.interventions),
            "events": [e.to_dict() for e in self.events],
        }
