"""The run's tool policy: which tools are offered, approval, truncation, and running a call safely.

Whatever goes wrong in a call (bad arguments, an unknown name, an exception, ``SystemExit``, a
refusal) comes back as text the model can read: ``ERROR: ...`` or ``DENIED: ...``. The loop never
dies of a tool; only Ctrl-C stops it. The calls of one batch run concurrently, except those that
share a lock key; a refusal cancels the whole batch (``CANCELLED: ...``). A call's time covers
checking its arguments, the call, and turning what it returned into text; a call that runs past it
ends as ``ERROR: ... timed out``; its thread cannot be killed, so the tool runs on in the background
and its result is dropped.
"""

from __future__ import annotations

import contextvars
import enum
import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from shapeloop.errors import TimedOut, ToolFailure, ToolRefusal
from shapeloop.limits import Limits, schema_problem
from shapeloop.text import escape_surrogates
from shapeloop.tools import Tool, ToolCall

T = TypeVar("T")

Approver = Callable[[ToolCall], "bool | str"]
"""``approve(call)`` for a tool that acts: True runs the call; False, or a string that says why, refuses it."""


class ToolStatus(enum.StrEnum):
    """How a tool call went. ``REPEAT`` is an identical call with an identical result; ``CANCELLED``
    a call of a batch in which one call was refused, so none ran."""

    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    REPEAT = "repeat"
    CANCELLED = "cancelled"


# how a call ended: its status, its text, and whether it was refused for a made-up id
_Outcome = tuple[ToolStatus, str]


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The outcome of one call.

    Attributes:
        call: the call.
        status: ``ok``, ``error`` or ``denied``.
        text: what the model sees: the result, cut to the run's limit, or ``ERROR: ...`` /
            ``DENIED: ...``.
        chars: length of the full result before it was cut.
        truncated: the result was cut to the run's ``max_result_chars``.
    """

    call: ToolCall
    status: ToolStatus
    text: str
    chars: int
    truncated: bool = False


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: {len(text) - limit} of {len(text)} characters cut]"


class Toolbox:
    """The tools of one run, with the run's policy: allow and deny lists, approval, truncation and
    a time limit per call (``timeout`` seconds, or None for none).

    Deny wins over allow; a tool that is not permitted is neither advertised nor run. Each tool's
    parameters schema is held to ``limits`` when the toolbox is made, and each call's arguments
    before it runs (:mod:`shapeloop.limits`).

    Raises:
        ValueError: a tool's schema is refused (too large or deep, a ``$ref`` that dangles or
            recurses without end, a pattern that needs backtracking); one line naming the tool.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        approve: Approver | None = None,
        max_result_chars: int = 4000,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self._all: dict[str, Tool] = {}
        for item in tools:
            if not isinstance(item, Tool):
                raise TypeError(f"expected a shapeloop Tool, got {item!r}: decorate the function with @tool")
            if item.name in self._all:
                raise ValueError(f"two tools are named {item.name!r}; tool names must be unique")
            problem = schema_problem(item.parameters, self.limits)
            if problem is not None:
                raise ValueError(f"tool {item.name!r}: its parameters schema is refused: {problem}")
            self._all[item.name] = item
        allowed = set(self._all) if allow is None else self._names(allow, "allow_tools")
        denied = self._names(deny or (), "deny_tools")
        self.tools: dict[str, Tool] = {n: t for n, t in self._all.items() if n in allowed and n not in denied}
        self._approve = approve
        self._limit = max_result_chars
        self._timeout = timeout
        if max_result_chars < 1:
            raise ValueError("max_result_chars must be at least 1")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"tool_timeout must be more than 0 seconds (or None for no limit), not {timeout!r}")

    def _names(self, names: Iterable[str], what: str) -> set[str]:
        """A list of tool names, checked: a bare string or an unknown name is a mistake, never ignored."""
        if isinstance(names, str):
            raise TypeError(f"{what} takes a list of tool names, not the string {names!r}: write {what}=[{names!r}]")
        chosen = set(names)
        unknown = chosen - set(self._all)
        if unknown:
            raise ValueError(f"{what} names unknown tools {sorted(unknown)}; the tools are {sorted(self._all)}")
        return chosen

    def run(self, call: ToolCall, *, seconds_left: float | None = None) -> ToolResult:
        """Run a call: check it, gate it, call the tool, and render what came back.

        Args:
            call: the call.
            seconds_left: what is left of the run's time budget, if it has one; the call is
                limited to the smaller of this and the toolbox's ``timeout``.
        """
        clock = _Clock.start(seconds_left)
        problem, spent = self._checked(call, clock)
        if problem is not None:
            return self._result(call, *problem)
        refusal = self._refusal(call)
        if refusal is not None:
            return self._result(call, ToolStatus.DENIED, _denied(call, refusal))
        return self._result(call, *self._execute(call, clock, spent))

    def run_batch(self, calls: Sequence[ToolCall], *, seconds_left: float | None = None) -> list[ToolResult]:
        """Run the calls of one step; the results are in the order of ``calls``.

        Every call is checked first and every acting call put to the approver, in order. If one is
        refused, none runs: that one is reported as denied, the others as cancelled. Otherwise the
        calls run concurrently, except that calls sharing a lock key run one after another in the
        order given.
        """
        clock = _Clock.start(seconds_left)
        checked = [self._checked(call, clock) for call in calls]
        outcomes: list[_Outcome | None] = [problem for problem, _ in checked]
        for index, call in enumerate(calls):
            refusal = None if outcomes[index] is not None else self._refusal(call)
            if refusal is not None:
                return [
                    self._result(other, ToolStatus.DENIED, _denied(call, refusal, others=len(calls) - 1))
                    if i == index else self._result(other, ToolStatus.CANCELLED, _cancelled(call, refusal))
                    for i, other in enumerate(calls)
                ]  # fmt: skip
        lanes: dict[tuple[str, Any], list[int]] = {}
        for index, call in enumerate(calls):
            if outcomes[index] is None:
                key = self.tools[call.tool].lock(call.args)
                lanes.setdefault(("lock", key) if key is not None else ("alone", index), []).append(index)

        def run_lane(indexes: list[int]) -> None:
            for index in indexes:
                outcomes[index] = self._execute(calls[index], clock, checked[index][1])

        if len(lanes) == 1:
            run_lane(next(iter(lanes.values())))
        elif lanes:
            with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="shapeloop-tool") as pool:
                list(pool.map(run_lane, lanes.values()))
        done = [outcome for outcome in outcomes if outcome is not None]
        assert len(done) == len(calls), "every call of the batch has an outcome"
        return [self._result(call, *outcome) for call, outcome in zip(calls, done, strict=True)]

    def _result(self, call: ToolCall, status: ToolStatus, text: str) -> ToolResult:
        text = escape_surrogates(text)
        return ToolResult(
            call=call,
            status=status,
            text=truncate(text, self._limit),
            chars=len(text),
            truncated=len(text) > self._limit,
        )

    def _checked(self, call: ToolCall, clock: _Clock) -> tuple[_Outcome | None, float]:
        """Why the call cannot run as written (an unknown tool, bad arguments), or None; and the
        seconds its check took, which count against its ``tool_timeout``."""
        begun = time.monotonic()
        chosen = self.tools.get(call.tool)
        if chosen is None:
            return self._not_available(call.tool), 0.0
        seconds, _ = clock.limit(self._timeout, 0.0)
        until = None if seconds is None else begun + seconds
        problem = chosen.argument_errors(call.args, limits=self.limits, until=until)
        if problem is not None:
            return (ToolStatus.ERROR, f"ERROR: invalid arguments for {chosen.signature()}: {problem}"), 0.0
        return None, time.monotonic() - begun

    def _refusal(self, call: ToolCall) -> str | None:
        """Why the approver refused an acting tool's call, or None."""
        if not self.tools[call.tool].needs_approval:
            return None
        try:
            verdict = self._approve(call) if self._approve is not None else "no approver was given for this run"
        except Exception as exc:  # noqa: BLE001 - the approver's failure refuses the call; the run goes on
            return f"the approver failed: {type(exc).__name__}: {exc}"
        if verdict is True:
            return None
        return verdict if isinstance(verdict, str) and verdict else "the user said no"

    def _execute(self, call: ToolCall, clock: _Clock, spent: float) -> tuple[ToolStatus, str]:
        """Call the tool and render what it returned, within what is left of the call's time once its
        check took ``spent`` seconds. Whatever the tool raises is the call's outcome, ``SystemExit``
        and other ``BaseException`` included; only Ctrl-C (``KeyboardInterrupt``) stops the run."""
        seconds, which = clock.limit(self._timeout, spent)
        shown = f"{(seconds or 0.0) + spent:.3g} s ({which})"
        if seconds is not None and seconds <= 0:
            return (
                ToolStatus.ERROR,
                f"ERROR: {call.tool} did not run: its time ran out while its arguments were checked ({shown})",
            )
        run = functools.partial(self.tools[call.tool].fn, **call.args)
        try:
            return ToolStatus.OK, call_within(seconds, lambda: render(run()))  # a lazy __str__ runs in the time too
        except TimedOut:
            return ToolStatus.ERROR, f"ERROR: {call.tool} timed out after {shown}; it was abandoned"
        except ToolRefusal as exc:
            return ToolStatus.DENIED, f"DENIED: {exc}"
        except ToolFailure as exc:
            return ToolStatus.ERROR, f"ERROR: {exc}"
        except KeyboardInterrupt:
            raise
        except SystemExit as exc:  # argparse, click, sys.exit in a helper: the tool ended, not the run
            return ToolStatus.ERROR, f"ERROR: {call.tool} tried to exit the program (SystemExit: {exc.code!r})"
        except BaseException as exc:  # noqa: BLE001 - a failing tool is feedback, not a crash
            return ToolStatus.ERROR, f"ERROR: {type(exc).__name__}: {exc}"

    def _not_available(self, name: str) -> tuple[ToolStatus, str]:
        offered = ", ".join(sorted(self.tools)) or "none"
        if name in self._all:
            return (
                ToolStatus.DENIED,
                f"DENIED: tool {name!r} is not permitted in this run. Available tools: {offered}.",
            )
        return ToolStatus.ERROR, f"ERROR: there is no tool named {name!r}. Available tools: {offered}."


@dataclass(frozen=True, kw_only=True)
class _Clock:
    """The time of the calls of one step: the run's deadline (``max_seconds``), if it has one."""

    until: float | None

    @classmethod
    def start(cls, seconds_left: float | None) -> _Clock:
        return cls(until=None if seconds_left is None else time.monotonic() + seconds_left)

    def limit(self, timeout: float | None, spent: float) -> tuple[float | None, str]:
        """The seconds a call may still take, ``spent`` seconds into its ``timeout``, and which limit says so."""
        limits = (
            (None if timeout is None else timeout - spent, "tool_timeout"),
            (None if self.until is None else self.until - time.monotonic(), "the run's max_seconds"),
        )
        return min(((s, w) for s, w in limits if s is not None), default=(None, ""))


def _denied(call: ToolCall, why: str, *, others: int = 0) -> str:
    """What the model reads for a call that was not approved (``others``: calls of its step that did not run)."""
    text = f"DENIED: {call.tool} was not approved ({why}). Do not retry it; answer without it or use another tool."
    return text + (f" The other {others} call{'s' if others != 1 else ''} of this step did not run." if others else "")


def _cancelled(refused: ToolCall, why: str) -> str:
    """What the model reads for each other call of a step in which ``refused`` was not approved."""
    return f"CANCELLED: this call did not run: the batch was cancelled because {refused} was not approved ({why})."


def call_within(seconds: float | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, in a worker thread when ``seconds`` is given, waiting at most that long.

    A Python thread cannot be killed: on :class:`TimedOut` the call runs on in the background (a
    daemon thread, so it does not keep the process alive) and what it returns is dropped. An
    exception ``fn`` raises, ``KeyboardInterrupt`` included, is raised here.
    """
    if seconds is None:
        return fn(*args)
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
            outcome.append((False, exc))

    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True, name="shapeloop-call")
    worker.start()
    worker.join(max(0.0, seconds))
    if not outcome:
        raise TimedOut(f"no result after {seconds:g} s")
    done, value = outcome[0]
    if done:
        return cast(T, value)
    raise value


def render(value: Any) -> str:
    """A tool's return value as text."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
