"""AnswerBias: lean a task's first step towards answering, by the model's own logits.

Small models call a tool even where none fits the request. Where a constrained step chooses between
calling and answering (a step's ``action``, a batch step's first key), the embedded backend reads
the model's logits for both; this policy adds ``bias`` to answering there, before any result has
come back, so a model that leans only a little towards calling answers instead. It reads no words,
so it works in any language; it costs nothing (no extra evaluation: the choice is made in the
step's own decoding).

The bias is the model's own scale: the catalogue keeps one per model (``Capabilities.calibration``,
``answer_bias``), chosen on BFCL's single-turn tune sample from the gaps the plain loop's first
steps measured (``python -m benchmarks.calibrate --bias``); a model without one gets no bias unless
``bias=`` is given, and the run says so in an event. Measured in ``measurements/policies.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeloop.policies.base import Policy, RunView, StepShape


@dataclass(eq=False, repr=False)
class AnswerBias(Policy):
    """Add ``bias`` logits to answering where the step chooses, until a first result comes back.

    Args:
        bias: the logits added (positive: towards answering); None takes the bias calibrated for
            the brain's model (``Capabilities.calibration``): a model without one leaves the
            policy out, with an event that says so.
    """

    bias: float | None = None

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        """A brain that shifts the choice (``decision_bias``), and a calibrated bias where none is given."""
        return frozenset({"decision_bias"} if self.bias is not None else {"decision_bias", "answer_bias"})

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls:
            return None
        bias = self.bias if self.bias is not None else view.calibrated("answer_bias")
        if not bias:
            return None
        return StepShape(reason=f"no result has come back yet: answering gets {bias:+g} logits where the step "
                                "chooses between a call and an answer", answer_bias=bias)  # fmt: skip
