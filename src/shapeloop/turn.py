"""One request of a conversation and how its run went: the record :meth:`Conversation.ask` returns
and its log keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shapeloop.run import AgentRun, StopReason
from shapeloop.tools import ToolCall


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One request of a conversation and how its run went.

    Attributes:
        request: what the user asked.
        run: the run (for a resumed conversation's earlier requests, rebuilt from the log: its
            ``events`` are empty and its transcript holds that request's own entries).
        calls: the calls the run made, in order.
        cuts: the markers of what was cut from the history before this request was asked.
    """

    request: str
    run: AgentRun[Any]
    calls: tuple[ToolCall, ...] = ()
    cuts: tuple[str, ...] = ()

    @property
    def stop(self) -> StopReason:
        """Why the request's run ended."""
        return self.run.stop

    @property
    def answer(self) -> str | None:
        """The accepted answer, or None."""
        return self.run.answer

    @property
    def ok(self) -> bool:
        """The request was answered."""
        return self.run.ok
