"""What a run is and how it ended: its modes, its stop reasons, its transcript and its record.

These are the loop's types; they live beside it so that the events and the command line can use
them without importing the loop.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from shapeloop.brain import Message, Usage

if TYPE_CHECKING:
    from shapeloop.events import Event


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
    ERROR = "error"
    """The run raised (a failing tool acceptor, a brain's untranslated error); ``run_many`` keeps it
    as this stop, the exception in ``reason``, rather than losing the batch."""


@dataclass(kw_only=True)
class Transcript:
    """Every message and event of a run, in order; writable as JSON Lines."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def add_message(self, message: Message) -> None:
        """Record a message of the conversation."""
        self.entries.append({"type": "message", "role": message["role"], "content": message["content"]})

    def add_event(self, event: Event) -> None:
        """Record an event."""
        self.entries.append({"type": "event", **event.to_dict()})

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
        return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.entries)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the transcript as JSON Lines (atomically: a reader never sees half a file)."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(self.to_jsonl())
        os.replace(tmp, path)

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
            "events": [e.to_dict() for e in self.events],
        }
