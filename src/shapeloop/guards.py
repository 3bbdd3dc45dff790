"""Repeat, barren-reply and budget detection: small state machines over the run's history.

A small model loops: handed a result, it asks for the same thing again. An identical call with an
identical result (ok, error or denied alike) is a repeat, counted per call, so two different calls
that each repeat once are a model going round a wider circle, not one jammed on a tool. A barren
reply (nothing run, nothing finished) identical to the previous barren reply counts the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shapeloop.tools import ToolCall


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """What is known of one call so far.

    Attributes:
        call: the call.
        times: how many times it has been made in this run.
        repeats: how many of those, in a row, returned the same result as the time before.
    """

    call: ToolCall
    times: int
    repeats: int

    def stuck_reason(self, limit: int) -> str:
        """Why a run stops as stuck on this call, at ``limit`` repeats."""
        same = self.repeats + 1
        detail = (
            "with the same result each time"
            if same == self.times
            else f"and the last {same} calls returned the same result"
        )
        return f"{self.call} was called {self.times} times {detail} (stuck_limit={limit} repeats)"


@dataclass(kw_only=True)
class CallRepeats:
    """Per-call repeat counting."""

    _last: dict[str, str] = field(default_factory=dict)
    _records: dict[str, CallRecord] = field(default_factory=dict)

    def observe(self, call: ToolCall, result: str) -> CallRecord:
        """Record that ``call`` returned ``result``; return the call's record."""
        key = call.key
        previous = self._records.get(key)
        same = previous is not None and self._last.get(key) == result
        record = CallRecord(
            call=call,
            times=(previous.times if previous else 0) + 1,
            repeats=(previous.repeats + 1) if (previous and same) else 0,
        )
        self._records[key] = record
        self._last[key] = result
        return record


@dataclass(kw_only=True)
class BarrenRepeats:
    """Counts a barren reply identical to the previous barren reply; reset when a tool runs."""

    _last: str | None = None
    repeats: int = 0

    def observe(self, reply: str) -> int:
        """Record a barren reply; return how many times in a row it repeated the previous one."""
        signature = reply.strip()
        if signature == self._last:
            self.repeats += 1
        else:
            self._last, self.repeats = signature, 0
        return self.repeats

    def reset(self) -> None:
        """A tool ran: the model did something, so the barren streak is over."""
        self._last, self.repeats = None, 0


@dataclass(kw_only=True)
class Budget:
    """Optional limits on total tokens and on wall time.

    Args:
        max_tokens: stop before a step once this many tokens (prompt plus completion, summed over
            the run) have been used.
        max_seconds: stop once this much wall time has passed: before a step, and in the middle
            of a model or tool call (see :meth:`remaining`).
    """

    max_tokens: int | None = None
    max_seconds: float | None = None
    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float | None:
        """Seconds left of the time budget (never below 0), or None without one."""
        if self.max_seconds is None:
            return None
        return max(0.0, self.max_seconds - (time.monotonic() - self.started))

    def exceeded(self, tokens: int) -> str | None:
        """A sentence saying which limit is spent, or None."""
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"the token budget is spent: {tokens} tokens used of {self.max_tokens}"
        elapsed = time.monotonic() - self.started
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return f"the time budget is spent: {elapsed:.1f} s of {self.max_seconds:g} s"
        return None
