"""CheckDone: a request's first answer after calls is put back once, with the task and the calls
made, so a task of several parts is not answered after its first part.

Issue 46: on BFCL's multi-turn tune entries the models often answer after the first part of a request
of several ("log me in and send the message": the login made, its result given as the answer, the
message never sent); on the screen's turns that ended with a subset of the functions the truth needs
(each called right), 5 of 27 for qwen2.5-coder-0.5b and 6 of 23 for qwen2.5-coder-1.5b. The loop's
feedback after a result asks the model to answer if the results answer the task, and a small model
reads one part done as the task done.

This policy objects once a request, to the first answer given after at least one call: the model
reads the task again, the calls it made (each with how it went), and is asked to make the call a part
still needs, or to give its answer again. The second answer stands (the caller's acceptor still sees
it). An answer with no call before it (a question the model answers itself, a request no tool fits)
is left alone, and so is an answer at the run's last step (put back there, the run would end
unanswered). It costs one step for each request answered after calls; the prompt up to the
objection is the one the backend just read, so a prompt cache keeps most of it.
"""

from __future__ import annotations

from shapeloop.policies.base import Objection, Policy, RunView

_LISTED = 8  # the latest calls named in the objection; the count says how many more there were


class CheckDone(Policy):
    """Put a request's first answer after calls back once, to check every part of the task is done."""

    def __init__(self) -> None:
        self._objected = False

    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        del answer
        if self._objected or not view.calls or view.step >= view.max_steps:
            return None
        self._objected = True
        listed = view.calls[-_LISTED:]
        lines = [f"- {outcome.call}: {outcome.status}" for outcome in listed]
        if len(view.calls) > len(listed):
            lines.insert(0, f"- ({len(view.calls) - len(listed)} earlier calls)")
        made = "\n".join(lines)
        return Objection(
            reason=f"the first answer after {len(view.calls)} call(s): the task checked once against the calls made",
            feedback=(
                f"Before you answer, check that every part of the task is done.\nThe task: {view.task}\n"
                f"The calls you made:\n{made}\n"
                "If a part of the task still needs a call, make that call now. If every part is done, "
                "give your answer again."
            ),
        )
