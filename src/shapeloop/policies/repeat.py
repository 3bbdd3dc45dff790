"""AnswerAfterRepeat: after an identical call returns its identical result again, the next step answers.

The project's suite (issue 46): qwen2.5-coder-0.5b reads a file, reads it again, is told it made the
same call twice with the same result, and reads it a third time, and the run stops as stuck with the
answer in front of it (7 of the tune half's 65 tasks ended so on the plain loop). A repeat means the
model has nothing new to learn from that call; this policy makes the step after a repeat an answer
(:attr:`~shapeloop.policies.StepShape.answer` ``"must"``), taken from the results it has. The run
goes on after it as before if that answer is put back (by the caller's acceptor or another policy).

It acts once for each repeated call (a repeat the run's ``stuck_limit`` allows), reads no word of the
task or of a result, and in prose mode or with native calls it cannot hold the step (the schema does).
"""

from __future__ import annotations

from shapeloop.policies.base import Policy, RunView, StepShape


class AnswerAfterRepeat(Policy):
    """The step after an identical call returned an identical result may only answer."""

    _seen = 0  # outcomes already judged

    def shape_step(self, view: RunView) -> StepShape | None:
        """Answer only, at the step after a step in which a call was repeated with the same result."""
        fresh, self._seen = view.calls[self._seen :], len(view.calls)
        repeated = [outcome for outcome in fresh if outcome.repeats]
        if not repeated:
            return None
        last = repeated[-1]
        times = last.repeats + 1
        return StepShape(
            reason=f"{last.call} returned the same result {times} times: the step after answers from the results",
            answer="must",
        )
