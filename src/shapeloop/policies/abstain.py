"""Abstain: at a request's first step, call only where the model leans to calling by more than a
margin calibrated for it, and make a second call only where it leans to one; both read off the
model's own logits at the token where it chooses, in the same forward pass (no extra request).

Small models call a function where none fits and, asked for one call, write several. At the first
key of a batch step (``{"calls"`` or ``{"answer"``) the embedded backend sees how far the model leans
to calling: the best logit that opens a call minus the best that opens an answer; after the first
call, how far it leans to another (a comma against the list's end). A margin turns a lean that is not
above it to the other side. The margins are the model's own scale: the catalogue keeps them per
model (``Capabilities.calibration``: ``call_margin``, ``more_margin``), read off BFCL's single-turn
tune sample (``python -m benchmarks.margins``); a model without them, or a brain that does not
declare ``margins`` (one that does not decode through the embedded backend's fast engine), leaves the
policy out, and the run says so in an event. Measured in ``measurements/policies.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeloop.policies.base import Policy, RunView, StepShape


@dataclass(eq=False, repr=False)
class Abstain(Policy):
    """At a request's first step, answer where the model's lean to calling is within a margin, and
    keep to one call where its lean to a second is.

    Args:
        call_margin: the lean to calling (logits) a first step needs to call; None takes the brain's
            calibrated ``call_margin``, and a brain without one leaves the policy out.
        more_margin: the lean to another call the first step needs to make a second; None takes the
            calibrated ``more_margin`` where there is one, else no such margin.
    """

    call_margin: float | None = None
    more_margin: float | None = None

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        """Decision margins honoured by the brain, and a calibrated call margin where none is given."""
        return frozenset({"margins"} if self.call_margin is not None else {"margins", "call_margin"})

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls or view.step != 1 or not view.tools:
            return None
        call = self.call_margin if self.call_margin is not None else view.calibrated("call_margin")
        more = self.more_margin if self.more_margin is not None else view.calibrated("more_margin")
        if call is None and more is None:
            return None
        return StepShape(reason="a request's first step leans by the model's calibrated margins",
                         call_margin=call, more_margin=more)  # fmt: skip
