"""StateLine: a line of the state the tools keep, shown to the model at every step.

Issue 33: in multi-turn work small models acted in the wrong folder, never changing directory
before acting on a file elsewhere. The model cannot see state the tools keep; this policy shows a
short line of it (``current folder: /workspace/docs``) at each step, as a note the conversation
does not keep, so the model always reads the state as it is now.

The line comes from one of two places. The caller writes it (``StateLine(fn)``), in any language;
or the policy reads it from tools the caller names (``StateLine(reads=["pwd", "ls"])``, issue 46),
each of which must declare that it only reads (:attr:`~shapeloop.Tool.read_only`): the policy calls
them itself, before each step, with the arguments given (none by default), and shows each result
after the call that gave it. The policy reads nothing of the line.

Not measured this round: the BFCL benchmark's ``state-line`` column writes its own line for BFCL's
file system (``pwd`` and ``ls`` through BFCL's executor), and no run of it is in
``measurements/policies.json``; ``reads=`` is not yet run there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shapeloop.errors import TimedOut
from shapeloop.policies.base import Policy, RunView, StepShape
from shapeloop.toolbox import call_within, render
from shapeloop.tools import Tool

Read = str | tuple[str, Mapping[str, Any]]
"""A read :class:`StateLine` makes: a tool's name (called with no arguments), or its name and arguments."""


class StateLine(Policy):
    """Show ``fn()``, or what the named read-only tools return, to the model at every step (nothing
    at a step where the line is empty).

    Args:
        fn: called before each step; returns the line, for example ``f"current folder: {fs.cwd}"``.
            An exception it raises is the caller's error and ends the run.
        reads: instead of ``fn``, the tools to call before each step: names, or ``(name, args)``.
            Each must be one of the run's tools and declare ``read_only``, or the run does not start
            (:class:`ValueError`); a read that fails shows its ``ERROR:`` in the line.
        max_chars: the line is cut to this many characters, with a marker.
        read_timeout: seconds each read may take before it shows as an error.
    """

    def __init__(
        self,
        fn: Callable[[], str] | None = None,
        *,
        reads: Sequence[Read] = (),
        max_chars: int = 300,
        read_timeout: float = 10.0,
    ) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be 1 or more, not {max_chars}")
        if (fn is None) == (not reads):
            raise ValueError("StateLine takes exactly one of: a function that writes the line, or reads=[tool names]")
        self.fn = fn
        self.reads = tuple((r, {}) if isinstance(r, str) else (r[0], dict(r[1])) for r in reads)
        self.max_chars = max_chars
        self.read_timeout = read_timeout
        self._tools: dict[str, Tool] = {}

    def for_run(self, task: str, tools: Sequence[Tool]) -> StateLine:
        """A copy that holds the named reading tools of this run; refuses a name that is not one."""
        del task
        fresh = copy.copy(self)
        by_name = {t.name: t for t in tools}
        for name, _ in self.reads:
            found = by_name.get(name)
            if found is None:
                raise ValueError(f"StateLine reads {name!r}, which is not one of the run's tools "
                                 f"({', '.join(by_name) or 'none'})")  # fmt: skip
            if not found.read_only:
                raise ValueError(f"StateLine reads only tools that declare read_only=True; {name!r} does not "
                                 f"(it may act: calling it at every step could change what it reports)")  # fmt: skip
        fresh._tools = {name: by_name[name] for name, _ in self.reads}
        return fresh

    def shape_step(self, view: RunView) -> StepShape | None:
        """The state line as this step's note."""
        del view
        line = " ".join(str(self.fn() if self.fn is not None else self._read()).split())
        if not line:
            return None
        if len(line) > self.max_chars:
            line = line[: self.max_chars - 1] + "…"
        return StepShape(reason="the state the caller's tools report", note=line)

    def _read(self) -> str:
        parts = []
        for name, args in self.reads:
            try:
                tool = self._tools[name]
                text = render(call_within(self.read_timeout, lambda tool=tool, args=args: tool(**args)))
            except TimedOut:
                text = f"ERROR: no result within {self.read_timeout:g} s"
            except Exception as exc:  # noqa: BLE001 - a failed read shows in the line; the run goes on
                text = f"ERROR: {type(exc).__name__}: {exc}"
            shown = json.dumps(args, ensure_ascii=False) if args else ""
            parts.append(f"{name}({shown}) -> {text}")
        return "; ".join(parts)
