"""Abstain: at a request's first step, answer instead of calling where the model leans to calling
only weakly *and* no offered tool fits the request, both read off the model's own numbers.

Small models call a function where none fits ("set an alarm" with a date tool draws a date call).
Two numbers tell such a step apart, and neither alone does:

- the lean to calling, read where the step chooses (``{"calls"`` against ``{"answer"``; a five-field
  step's ``action``): the best logit that opens a call minus the best that opens an answer, in the
  same forward pass as the step (no extra request). A weak lean is common on right calls too: alone,
  at the margins that gained most on BFCL, it lost on the project's suite, answering questions about
  a file without reading it ("the secret word is 'password'").
- the fit of the best offered tool to the request (:func:`~shapeloop.policies.fit_floor.task_fit`,
  the :class:`~shapeloop.policies.FitFloor` measure): ``read_file`` fits a question about a file
  (0.97 for qwen2.5-coder-1.5b), a date tool does not fit "set an alarm" (-0.84). It costs N+k+1
  evaluations for N tools, the forward term scored only for the ``top`` k tools the reverse term
  ranks first (3 by default), so it is asked only where the lean is weak: the brain calls the
  policy's check at that token (:attr:`~shapeloop.Request.confirm_answer`), and the step answers
  where the fit is below the floor.

Both thresholds are the model's own scale, from the catalogue (``Capabilities.calibration``:
``call_margin`` and ``fit_floor``, the latter shared with :class:`FitFloor`); a model without them,
or a brain that declares neither ``margins`` nor ``logprobs`` (one that does not decode through the
embedded backend's fast engine), leaves the policy out, and the run says so in an event. It reads
numbers, not words: any language the model reads.

Measured on 2026-12-07 (``measurements/lean_fit.json``, ``measurements/policies.json``,
``measurements/suite-abstain/``), with the margin 2.0 and the floors (-0.311, -0.352) (the
catalogue keeps 1.0 for qwen2.5-coder-0.5b since, below):

- read off the plain loop's tune first steps, BFCL's four report kinds (160 items): +12 / -0
  (qwen2.5-coder-0.5b) and +12 / -2 (qwen2.5-coder-1.5b), the gains all irrelevance;
- run through the loop on BFCL tune items where the plain loop's first step leaned below 2.0 (98 of
  279 such items for the 0.5B model, 67 of 143 for the 1.5B; the rest not run for time): it turned
  the steps the read-off named on 66 of 67 and 63 of 64 items; +15 / -1 (irrelevance 12, live
  irrelevance 3; live relevance -1; live multiple 0 / 0 of 15, multiple 0 / 0 of 33) and +9 / -3
  (irrelevance 9; multiple, live simple and live relevance -1 each); on the 1.5B model's multi-turn
  screen (8 entries, 23 turns, with ``top=2``) it turned no turn: every call and the state after
  every turn as the plain loop's, 0/8 either way, at 2.2 times the seconds (it is asked at every
  request's first step, over 18 to 30 functions);
- the forward term for the 3 tools the reverse term ranks first (the default ``top``) turns the
  same first steps as the full fit on every BFCL tune item where the fit is asked and several
  functions are offered (121 and 67 items; ``top=2`` would lose a right live multiple call of the
  1.5B model's, ``top=1`` two, and gain two live irrelevance items for the 0.5B), with 79% and 72%
  of the forward passes there
  (``measurements/lean_fit_top.json``);
- on the suite's tune tasks whose first step leaned below 2.0 and that the read-off said it could
  change, through the loop: +9 / -1 (0.5B: tasks where no tool fits; one question about a file
  answered unread) and +4 / -0 (1.5B), against the plain loop's run of the same day;
- cost: where it is asked (74% of the 0.5B model's tune first steps, 38% of the 1.5B's), the fit
  made a cold first step 2.4 and 2.6 times the plain loop's seconds (medians of 8 and 7 items run
  side by side with ``--cold``); over a stride of 16 of all tune first steps, with ``top=3`` and each
  model alone on the machine, the median first step took 1.51 (0.5B) and 1.01 (1.5B) times the
  plain loop's (``measurements/bfcl-stride-top/``): what is left is the one-function request. The
  policies' rule judges the cost on the 0.5B model (at most 1.3). At a margin of 1.0 the 0.5B
  model keeps +10 / -1 of its +15 / -1 and its median first step over the stride took 1.00 times
  the plain loop's (``measurements/bfcl-stride-margin/``): the catalogue keeps 1.0 for it.

qwen2.5-coder-0.5b's preset (the catalogue's ``preset``, which the default adds through
:class:`~shapeloop.policies.ModelPreset`): at its margin of 1.0, over every BFCL single-turn tune item
where it can act, +19 / -1 (irrelevance 9 -> 18 of 40, live irrelevance 6 -> 16); on its 24
multi-turn tune entries no entry lost and the state right after 22 of 82 turns against 21, an entry
1.22 times the plain loop's seconds (``measurements/policies.json``, ``presets``). For
qwen2.5-coder-1.5b it stays opt-in: its multi-turn entries took 2.2 times the seconds.

The lean alone (this policy's earlier form, deleted) read +20 / -6 and +19 / -5 off BFCL's tune
first steps but finished 26 of the suite's 65 tune tasks against the plain loop's 29 (0.5B) and 40
against 44 (1.5B).
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeloop.policies.base import Policy, RunView, StepShape
from shapeloop.policies.fit_floor import MAX_TASK_CHARS, view_fit

TOP = 3
"""The tools the fit's forward term scores by default (``measurements/lean_fit_top.json``)."""


@dataclass(eq=False, repr=False)
class Abstain(Policy):
    """At a request's first step, answer where the model leans to calling by no more than a margin
    and no offered tool fits the request (its fit below a floor).

    Args:
        call_margin: the lean to calling (logits) above which a first step calls unchecked; None
            takes the brain's calibrated ``call_margin``.
        fit_floor: the best tool's fit below which a weakly leaning first step answers; None takes
            the brain's calibrated ``fit_floor``. A brain without a calibrated value that is not
            given leaves the policy out, with an event that says so.
        max_task_chars: how much of the request the fit scores, from its start (the cost grows with it).
        top: how many tools the fit's forward term scores, those its reverse term ranks first (the
            forward passes are most of the cost, one a tool); None scores every tool.
    """

    call_margin: float | None = None
    fit_floor: float | None = None
    max_task_chars: int = MAX_TASK_CHARS
    top: int | None = TOP

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        """Decision margins and log-probabilities from the brain, and the calibrated values not given."""
        calibrated = {name for name, given in (("call_margin", self.call_margin), ("fit_floor", self.fit_floor))
                      if given is None}  # fmt: skip
        return frozenset({"margins", "logprobs", *calibrated})

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls or view.step != 1 or not view.tools or view.logprobs is None:
            return None
        margin = self.call_margin if self.call_margin is not None else view.calibrated("call_margin")
        floor = self.fit_floor if self.fit_floor is not None else view.calibrated("fit_floor")
        if margin is None or floor is None:  # not reached through run_agent: needs keeps the policy out
            return None

        def unfit(lean: float) -> str:
            """Why the weakly leaning step answers: no tool fits; "" where one does."""
            del lean
            fit = view_fit(view, self.max_task_chars, self.top)
            if fit is None or fit >= floor:
                return ""
            return f"no offered tool fits the request (the best fit {fit:.3f}, below the floor {floor:.3f})"

        return StepShape(reason="a request's first step calls unchecked only with a lean above the model's margin; "
                                "below it, only where an offered tool fits the request",
                         call_margin=margin, confirm_answer=unfit)  # fmt: skip
