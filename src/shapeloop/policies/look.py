"""LookFirst and LookAfterFailure: steps that may only read, where a small model acts blind.

Issue 46: BFCL's account of how models fail at multi-step work starts with not looking at the state
before acting (``cd`` into a folder, then ``mkdir`` the folder it is already in; filling a tank
without reading the fuel level), and with acting again after a failure without reading why. A tool
that only reads says so (:attr:`~shapeloop.Tool.read_only`; MCP's ``readOnlyHint`` maps to it), so
the loop can offer a step the reading tools alone:

- :class:`LookFirst`: a request's first step may only call read-only tools (it must call one); the
  steps after it are the plain loop's, with what was read in the conversation.
- :class:`LookAfterFailure`: after a step in which an acting call failed, the next step may only
  call read-only tools (it must call one), once a failure; then the plain loop again.

Neither acts where the run's tools are all read-only or all acting, and the run's last step may
always answer. The step's schema holds the offer; its prompt still documents every tool, so it is
the plain step's prompt, which the backend's prompt cache keeps (documenting the readers alone made
each request's first two steps evaluate the whole prompt anew). Each shaped step is a
:class:`~shapeloop.events.PolicyIntervened` event. They read no
word of the request or of a result: what a tool declares is all they go by. Their measured effect
is in ``measurements/policies.json``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from shapeloop.policies.base import Policy, RunView, StepShape
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool


class _Reading(Policy):
    """What both policies share: the run's read-only tools, where there are acting ones beside."""

    _readers: frozenset[str] = frozenset()

    def for_run(self, task: str, tools: Sequence[Tool]) -> _Reading:
        del task
        fresh = copy.copy(self)
        readers = frozenset(t.name for t in tools if t.read_only)
        fresh._readers = readers if readers and len(readers) < len(tools) else frozenset()
        return fresh

    def _read(self, why: str) -> StepShape:
        names = ", ".join(sorted(self._readers))
        return StepShape(reason=f"{why}: offered only the tools that read ({names})", tools=self._readers,
                         answer="never", document_all=True)  # fmt: skip


class LookFirst(_Reading):
    """A request's first step may only call the tools that read (:attr:`~shapeloop.Tool.read_only`),
    so the model sees the state before it acts on it."""

    def shape_step(self, view: RunView) -> StepShape | None:
        """Read-only tools only, and a call, at the run's first step."""
        if not self._readers or view.step != 1 or view.calls:
            return None
        return self._read("a request's first step reads the state before acting")


class LookAfterFailure(_Reading):
    """After a step in which a call of an acting tool failed, the next step may only call the tools
    that read (:attr:`~shapeloop.Tool.read_only`), so the model sees why before it acts again."""

    def shape_step(self, view: RunView) -> StepShape | None:
        """Read-only tools only, and a call, at the step after an acting call failed."""
        if not self._readers:
            return None
        failed = [
            o.call.tool for o in view.calls
            if o.step == view.step - 1 and o.status is ToolStatus.ERROR and o.call.tool not in self._readers
        ]  # fmt: skip
        if not failed:
            return None
        return self._read(f"{failed[-1]} failed: the step after reads the state before acting again")
