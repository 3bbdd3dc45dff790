"""EchoedError: an answer that only repeats a failed call's result is put back once, as not an answer.

The project's suite (issue 46): where a call fails, the models often give the tool's error as the
task's answer, word for word (``ERROR: no recipe R-1234; find the id with find_recipe``), though the
error says what to do next and the loop's feedback says a failed call is not an answer. This policy
puts such an answer back to the model once for each failed result, naming the call and saying what
it may do instead: fix the call, call another tool, or say that the task cannot be done. Given
again, the answer stands (a task that cannot be done is answered by saying so; the loop does not
stop it as barren).

An answer *repeats* a failed result when the answer holds the result's first line (less the
``ERROR:`` / ``DENIED:`` mark the toolbox puts there), or the result's first line holds the whole
answer; either of at least ``min_chars`` characters, compared with whitespace and case folded. It
reads no word of any language: the text of a result is compared with the text of an answer.
"""

from __future__ import annotations

import re

from shapeloop.policies.base import CallOutcome, Objection, Policy, RunView
from shapeloop.toolbox import ToolStatus

_FAILED = (ToolStatus.ERROR, ToolStatus.DENIED)
_MARK = re.compile(r"^(?:ERROR|DENIED):\s*")


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


class EchoedError(Policy):
    """Put back, once for each failed result, an answer that only repeats that result.

    Args:
        min_chars: the shortest text compared; shorter answers or results never count as a repeat
            (an answer "no" is not an echo of "no such file").
    """

    def __init__(self, *, min_chars: int = 8) -> None:
        if min_chars < 1:
            raise ValueError(f"min_chars must be at least 1, got {min_chars}")
        self.min_chars = min_chars
        self._objected: frozenset[int] = frozenset()  # the failed outcomes already named, by index

    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        """An objection where ``answer`` repeats a failed result not yet objected to, else None."""
        said = _folded(_MARK.sub("", answer.strip()))
        if len(said) < self.min_chars:
            return None
        for index in range(len(view.calls) - 1, -1, -1):
            outcome = view.calls[index]
            if outcome.status not in _FAILED or index in self._objected or not self._echoes(said, outcome):
                continue
            self._objected |= {index}
            return Objection(
                reason=f"the answer repeats what {outcome.call} returned, a failed call",
                feedback=(
                    f"Your answer repeats the result of {outcome.call}, and that call failed: it is not an answer "
                    "to the task. Fix the call (the result says what was wrong), call another tool, or, if "
                    "the task cannot be done, say so."
                ),
            )
        return None

    def _echoes(self, said: str, outcome: CallOutcome) -> bool:
        first = _folded(_MARK.sub("", outcome.text.strip().split("\n", 1)[0]))
        return len(first) >= self.min_chars and (first in said or said in first)
