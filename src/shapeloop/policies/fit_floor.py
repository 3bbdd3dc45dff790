"""FitFloor: at a task's first step, answer without a call where no offered tool fits the task, as
the model's own likelihoods tell it.

Small models call a tool even when none fits ("what is the capital of Australia?" with a weather
tool draws ``get_weather(city="Australia")``). What separates a fitting tool from the rest is how
much the tool's description makes the task more likely, and the task the description:

    forward: log p(task | "The tool NAME: DESCRIPTION / A user's request that this tool does:")
             - log p(task | "A user's request:")
    reverse: log p("NAME: DESCRIPTION" | "A user's request: TASK / A tool that does it:")
             - log p("NAME: DESCRIPTION" | "A tool:")

each a mean over the continuation's tokens (pointwise mutual information per token). A task's fit is
the best tool's forward plus reverse score; below the floor, the first step may only answer. It reads
numbers the model computes, not words, so it works in any language the model reads.

Cost: 3N+1 extra evaluations for N tools at a task's first step, N+1 of them as long as the
request's first ``max_task_chars`` characters: the forward ones, one for each tool, and its base. The
reverse ones open with the same request, which the embedded backend evaluates once, then the N
summaries side by side, 15 to a batch (their bases after "A tool:" are kept across tasks). It
scores in a context of its own, so the step's prompt cache is kept. The reverse term alone would cost about
half, but it does not tell a fitting tool from an unfitting one reliably ("Is it raining in Bergen?"
and "Who wrote War and Peace?" score alike against a weather tool) and on BFCL's tune sample with
qwen2.5-coder-0.5b it turned 11 irrelevant requests into answers against 17 for both terms (and 0
right calls against 2). What the reverse term does well is rank: the tool that fits best is
usually among the first it names, so ``top=k`` scores the forward term only for those k tools (N+k+1
evaluations, k+1 as long as the request; ``Abstain`` does so by default, read off in
``measurements/lean_fit_top.json``). Measured on BFCL's tune sample (``measurements/policies.json``). The floor
is the model's own scale: the catalogue keeps one per model (``Capabilities.calibration``,
``fit_floor``), fitted on BFCL's single-turn tune sample for the Qwen models (``python -m
benchmarks.calibrate --bfcl``) and on the project's suite for the others; a model without one gets
no floor unless ``floor=`` is given, and the run says so in an event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from shapeloop.policies.base import LogProbs, LogProbsMany, Policy, RunView, StepShape, one_by_one

FORWARD = "The tool {name}: {description}\nA user's request that this tool does:"
FORWARD_BASE = "A user's request:"
REVERSE = "A user's request: {task}\nA tool that does it:"
REVERSE_BASE = "A tool:"
MAX_TASK_CHARS = 1000
"""How much of the request is scored: its opening, about 250 tokens of English (each pass scores the
request, so a long pasted one would cost minutes with many tools)."""


def summary(description: str) -> str:
    """The first line of a tool's description: what it does, without its argument notes."""
    lines = [line.strip() for line in description.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def fit_terms(
    logprobs: LogProbs,
    task: str,
    tools: Sequence[tuple[str, str]],
    max_task_chars: int = MAX_TASK_CHARS,
    *,
    many: LogProbsMany | None = None,
    top: int | None = None,
) -> list[tuple[float, float | None]]:
    """Each offered tool's ``(reverse, forward)`` score against the task (its first
    ``max_task_chars`` characters), in the tools' order.

    The reverse passes share their prefix (the request), and their bases one ("A tool:"): ``many``
    scores every summary after one prefix at once, where the brain can
    (:attr:`~shapeloop.policies.base.RunView.logprobs_many`); without it, one by one. The forward
    passes cannot share (the request comes last), so with ``top`` only the ``top`` tools the reverse
    term ranks first get one; the others' forward score is None."""
    if not tools or not task.strip():
        return []
    score = many or one_by_one(logprobs)
    text = " " + " ".join(task.split())[:max_task_chars]
    docs = [" " + f"{name}: {summary(description)}" for name, description in tools]
    asked = score(REVERSE.format(task=text.strip()), docs)
    alone = score(REVERSE_BASE, docs)
    reverse = [_mean(a) - _mean(b) for a, b in zip(asked, alone, strict=True)]
    ranked = sorted(range(len(tools)), key=lambda i: reverse[i], reverse=True)
    chosen = set(ranked if top is None else ranked[: max(top, 1)])
    base = _mean(logprobs(FORWARD_BASE, text))
    forward = [_mean(logprobs(FORWARD.format(name=name, description=summary(description)), text)) - base
               if i in chosen else None for i, (name, description) in enumerate(tools)]  # fmt: skip
    return list(zip(reverse, forward, strict=True))


def task_fit(
    logprobs: LogProbs,
    task: str,
    tools: Sequence[tuple[str, str]],
    max_task_chars: int = MAX_TASK_CHARS,
    *,
    many: LogProbsMany | None = None,
    top: int | None = None,
) -> float | None:
    """The best fit of any offered tool ``(name, description)`` to the task: how much the tool and
    the task make each other more likely, per token (forward + reverse, :func:`fit_terms`); with
    ``top``, of the ``top`` tools the reverse term ranks first; None without tools."""
    terms = fit_terms(logprobs, task, tools, max_task_chars, many=many, top=top)
    return max((r + f for r, f in terms if f is not None), default=None)


def view_fit(view: RunView, max_task_chars: int = MAX_TASK_CHARS, top: int | None = None) -> float | None:
    """:func:`task_fit` of the run's request to the tools it offers, with the brain's scorers; None
    without tools or a scorer."""
    if view.logprobs is None:
        return None
    offered = [(tool.name, tool.description) for tool in view.tools]
    return task_fit(view.logprobs, view.task, offered, max_task_chars, many=view.logprobs_many, top=top)


def _mean(values: Sequence[float]) -> float:
    return fmean(values) if values else 0.0


@dataclass(eq=False, repr=False)
class FitFloor(Policy):
    """Answer without a call at the first step where no tool fits the task (the model's likelihoods).

    Args:
        floor: the fit below which the first step may only answer; None takes the floor calibrated
            for the brain's model (``Capabilities.calibration``): a model without one leaves the
            policy out, with an event that says so.
        max_task_chars: how much of the request is scored, from its start (the cost grows with it).
        top: how many tools the forward term scores, those the reverse term ranks first (cheaper
            with many tools); None, the default, scores every tool.
    """

    floor: float | None = None
    max_task_chars: int = MAX_TASK_CHARS
    top: int | None = None

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        """Log-probabilities, and a calibrated floor where none is given: without one the policy is
        left out, and the run says so in an event."""
        return frozenset({"logprobs"} if self.floor is not None else {"logprobs", "fit_floor"})

    def shape_step(self, view: RunView) -> StepShape | None:
        if view.calls or view.step != 1 or view.logprobs is None or not view.tools:
            return None
        floor = self.floor if self.floor is not None else view.calibrated("fit_floor")
        if floor is None:  # not reached through run_agent: needs keeps the policy out
            return None
        fit = view_fit(view, self.max_task_chars, self.top)
        if fit is None or fit >= floor:
            return None
        return StepShape(reason=f"the task's fit to the best tool is {fit:.3f}, below the floor {floor:.3f}",
                         answer="must")  # fmt: skip
