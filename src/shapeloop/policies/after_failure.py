"""CallAfterFailure: a step whose every call failed does not end the request; the next step must call.

Issue 33: reading BFCL's multi-turn tune entries (``multi_turn_base`` 100-119), the 1.5B model
answered right after every one of the 13 steps whose calls all came back ``ERROR:`` (a company's name
given where the tool takes its code; a lookup tool that gives the code was offered and never called),
and its answer repeated the error. Notes in words after a failure did not change that (the deleted
``recovery`` policy). This policy goes through the step's shape instead: after a step in which every
call failed, the next step may only call, so the model fixes the call or uses another tool; after
``max_forced`` such steps in a run it may answer again. It reads only the calls' statuses, so it works
for any tools in any language.

Measured on ``multi_turn_base`` 100-119 (``measurements/policies.json``).
"""

from __future__ import annotations

from shapeloop.policies.base import Policy, RunView, StepShape
from shapeloop.toolbox import ToolStatus


class CallAfterFailure(Policy):
    """After a step whose every call failed (``ERROR:``), the next step must call.

    Args:
        max_forced: at most this many steps of a run are made to call; after them the model may
            answer even after a failure (a task that cannot be done is then said so).
    """

    def __init__(self, *, max_forced: int = 1) -> None:
        if max_forced < 1:
            raise ValueError(f"max_forced must be 1 or more, not {max_forced}")
        self.max_forced = max_forced
        self._seen = 0  # calls the run had made at the last step this instance shaped
        self._forced = 0

    def shape_step(self, view: RunView) -> StepShape | None:
        """Calls only, where the calls made since the last step all failed."""
        latest, self._seen = view.calls[self._seen :], len(view.calls)
        if not latest or self._forced >= self.max_forced:
            return None
        if any(outcome.status is not ToolStatus.ERROR for outcome in latest):
            return None
        self._forced += 1
        failed = len(latest)
        return StepShape(reason=f"the {'call' if failed == 1 else f'{failed} calls'} of the last step failed: "
                                "this step fixes it or calls another tool", answer="never")  # fmt: skip
