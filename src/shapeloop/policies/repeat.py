"""AnswerAfterRepeat: after an identical call returns its identical result again, the next step answers.

A repeat means the model has nothing new to learn from that call, and a small model that repeats
once often repeats until the run stops as stuck with the answer in front of it (qwen2.5-coder-0.5b
on the project's suite: it read ``poem.txt`` three times, was told twice that the call and its
result were the same, and the run stopped). This policy makes the step after a repeat an answer
(:attr:`~shapeloop.policies.StepShape.answer` ``"must"``), taken from the results the model has;
the run goes on as before if that answer is put back (by the caller's acceptor or another policy).

It acts once for each repeat (a repeat the run's ``stuck_limit`` allows): a reply at that step that
gives no answer the loop can read (cut off, unreadable) leaves the next step open again. It reads no
word of the task or of a result. In prose mode the schema that holds the step is not sent, and the
model's reply stands.

Measured (``measurements/tuning-history.md``): on the suite's tune half, run beside ``echoed-error``
(since deleted; it changed no task), it acted for the 0.5B model on the 2 tasks that the plain loop
stopped as stuck (one answered right, ``poem-first``; one answered wrong), for the 1.5B model on
none; on BFCL's multi-turn screen (8 entries) it acted once (0.5B) and changed nothing; on the live
git task through mcp-server-git it never acted. Opt-in.
"""

from __future__ import annotations

from shapeloop.policies.base import Policy, RunView, StepShape


class AnswerAfterRepeat(Policy):
    """The step after an identical call returned an identical result may only answer."""

    def shape_step(self, view: RunView) -> StepShape | None:
        """Answer only, at the step after a step in which a call was repeated with the same result."""
        repeated = [outcome for outcome in view.calls if outcome.step == view.step - 1 and outcome.repeats]
        if not repeated:
            return None
        last = repeated[-1]
        times = last.repeats + 1
        return StepShape(
            reason=f"{last.call} returned the same result {times} times: the step after answers from the results",
            answer="must",
        )
