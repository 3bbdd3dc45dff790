"""Abstain: at a request's first step, call only where the model leans to calling by more than a
margin calibrated for it, read off the model's own logits at the token where it chooses, in the same
forward pass (no extra request).

Small models call a function where none fits. At the first key of a calls step (``{"calls"`` or
``{"answer"``; a five-field step's ``action``) the embedded backend sees how far the model leans to
calling: the best logit that opens a call minus the best that opens an answer. A lean that is not
above the margin is turned to an answer. The margin is the model's own scale: the catalogue keeps
one per model (``Capabilities.calibration``: ``call_margin``), read off BFCL's single-turn tune
sample (``python -m benchmarks.margins``); a model without one, or a brain that does not declare
``margins`` (one that does not decode through the embedded backend's fast engine), leaves the policy
out, and the run says so in an event.

Measured (``measurements/margins.json``), read off the plain loop's tune records. The catalogue's
margins are the best the policies' rule allows (no category down by more than 2).
qwen2.5-coder-0.5b, all 376 single-turn tune first steps, at 0.25: 9 wrong calls turned into right
answers (irrelevance 4, live irrelevance 5) and 4 right calls into wrong answers (live relevance 2,
simple python 1, multiple 1); at 0.5 +20 / -6 but live relevance -3; at 0.75 +37 / -13.
qwen2.5-coder-1.5b, all 376, at 0.5: +19 / -5 (live irrelevance 10, irrelevance 9; live multiple 2,
multiple, live simple, live relevance 1 each); at 1.0 +33 / -12, multiple -5.
It is opt-in, in no preset: on the suite's tune half at 0.25 the 0.5B model finished 26 of 65 tasks
against the plain loop's 29 and gained none (it answered where a file had to be read), the 1.5B
model at 0.5 finished 40 against 44 in the same run (3 tasks where no tool fits gained; 7 lost, five
of them files it never read: "the secret word is 'password'"), and at 0.5 the 0.5B model
answered a live task that needs a tool ("What time is it in Tokyo?", through an MCP time
server) with a made-up time, calling led by 0.38, where the plain loop calls the server. The same
margin on the lean to a second call (after a calls step's first call) lost 8 and 16 items (parallel)
at every margin tried and gained none; it was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeloop.policies.base import Policy, RunView, StepShape


@dataclass(eq=False, repr=False)
class Abstain(Policy):
    """At a request's first step, answer where the model's lean to calling is within a margin.

    Args:
        call_margin: the lean to calling (logits) a first step needs to call; None takes the brain's
            calibrated ``call_margin``, and a brain without one leaves the policy out.
    """

    call_margin: float | None = None

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        """Decision margins honoured by the brain, and a calibrated margin where none is given."""
        return frozenset({"margins"} if self.call_margin is not None else {"margins", "call_margin"})

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls or view.step != 1 or not view.tools:
            return None
        margin = self.call_margin if self.call_margin is not None else view.calibrated("call_margin")
        if margin is None:  # not reached through run_agent: needs keeps the policy out
            return None
        return StepShape(reason="a request's first step calls only with a lean above the model's margin",
                         call_margin=margin)  # fmt: skip
