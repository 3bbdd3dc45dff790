"""A brain that routes between backends: a small local model first, a larger one once the run
starts going round in circles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shapeloop.brain import Brain, Message, Reply
from shapeloop.errors import SchemaRefused
from shapeloop.events import RepeatNoticed


class RouterBrain:
    """Asks ``primary`` until the run has repeated itself ``escalate_after`` times, then ``fallback``.

    The loop calls :meth:`notice_repeat` as soon as a call or a barren reply repeats, before its
    ``stuck_limit`` stops the run, so the larger model gets the turn that can still finish the work.
    Keep ``stuck_limit`` above ``escalate_after``.

    Args:
        primary: the brain asked first (say a local model).
        fallback: the brain asked after escalating (say a larger or remote one).
        escalate_after: repeats noticed before escalating.
    """

    def __init__(self, primary: Brain, fallback: Brain, *, escalate_after: int = 1) -> None:
        self.primary = primary
        self.fallback = fallback
        self.escalate_after = escalate_after
        self.repeats_noticed = 0
        self.escalations: list[RepeatNoticed] = []

    @property
    def escalated(self) -> bool:
        """The fallback is answering now."""
        return self.repeats_noticed >= self.escalate_after

    @property
    def active(self) -> Brain:
        """The brain that answers the next question."""
        return self.fallback if self.escalated else self.primary

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Ask the active brain."""
        return self.active.ask(messages, schema)

    def ask_native(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> Reply:
        """Ask the active brain through its native tool API, if it has one."""
        ask_native = getattr(self.active, "ask_native", None)
        if ask_native is None:
            raise SchemaRefused("the active brain has no native tool calls", backend="router")
        reply: Reply = ask_native(messages, tools)
        return reply

    def notice_repeat(self, event: RepeatNoticed) -> None:
        """Called by the loop when the run starts repeating."""
        self.repeats_noticed += 1
        if self.repeats_noticed == self.escalate_after:
            self.escalations.append(event)

    def reset(self) -> None:
        """Go back to the primary brain (before a new run)."""
        self.repeats_noticed = 0
