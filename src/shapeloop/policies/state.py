"""StateLine: a line the caller's tools supply, shown to the model at every step.

Issue 33: in multi-turn work small models acted in the wrong folder, never changing directory
before acting on a file elsewhere. The model cannot see state the tools keep; this policy shows a
short line of it (``current folder: /workspace/docs``) at each step, as a note the conversation
does not keep, so the model always reads the state as it is now. The caller writes the line, in any
language; the policy reads nothing of it.

Measured: not on tune data. The BFCL benchmark's adapter writes a line for BFCL's file system
(``--policies plain,state-line``), and no tune entry (``multi_turn_base`` 100-199) uses it; the
benchmark's headline figure is the one without it.
"""

from __future__ import annotations

from collections.abc import Callable

from shapeloop.policies.base import Policy, RunView, StepShape


class StateLine(Policy):
    """Show ``fn()`` to the model at every step (nothing at a step where it returns an empty line).

    Args:
        fn: called before each step; returns the line, for example ``f"current folder: {fs.cwd}"``.
            An exception it raises is the caller's error and ends the run.
        max_chars: the line is cut to this many characters, with a marker.
    """

    def __init__(self, fn: Callable[[], str], *, max_chars: int = 300) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be 1 or more, not {max_chars}")
        self.fn = fn
        self.max_chars = max_chars

    def shape_step(self, view: RunView) -> StepShape | None:
        """The state line as this step's note."""
        del view
        line = " ".join(str(self.fn()).split())
        if not line:
            return None
        if len(line) > self.max_chars:
            line = line[: self.max_chars - 1] + "…"
        return StepShape(reason="the state the caller's tools report", note=line)
