"""Whether any offered tool fits a task, read off the model's own likelihoods.

Small models call a tool even when none fits ("what is the capital of Australia?" with a weather
tool draws ``get_weather(city="Australia")``). Asked outright ("can one of these tools do this?"),
qwen2.5-coder-0.5b says no to nearly every task, fitting or not; its logits at the step's choice
between a tool and an answer do not separate the two either. What does separate them is how much a
tool's description makes the task more likely, and the task the description:

    forward: log p(task | "The tool NAME: DESCRIPTION / A user's request that this tool does:")
             - log p(task | "A user's request:")
    reverse: log p("NAME: DESCRIPTION" | "A user's request: TASK / A tool that does it:")
             - log p("NAME: DESCRIPTION" | "A tool:")

each a mean over the continuation's tokens (pointwise mutual information, per token). A task's fit is
the best tool's forward plus reverse score. On the benchmark's tune half, qwen2.5-coder-0.5b's fits
put half of the tasks where no tool fits below every task that needs one
(``measurements/calibration.json``); each catalogue model has its own floor, calibrated there, since
the scale is the model's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import fmean

# (prefix, continuation) -> the log-probability of each of the continuation's tokens after the prefix
LogProbs = Callable[[str, str], Sequence[float]]

FORWARD = "The tool {name}: {description}\nA user's request that this tool does:"
FORWARD_BASE = "A user's request:"
REVERSE = "A user's request: {task}\nA tool that does it:"
REVERSE_BASE = "A tool:"


def summary(description: str) -> str:
    """The first line of a tool's description: what it does, without its argument notes."""
    lines = [line.strip() for line in description.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def tool_fit(logprobs: LogProbs, task: str, name: str, description: str) -> float:
    """How much one tool and the task make each other more likely, per token (forward + reverse)."""
    task, doc = " " + " ".join(task.split()), " " + f"{name}: {summary(description)}"
    forward = _mean(logprobs(FORWARD.format(name=name, description=summary(description)), task))
    forward -= _mean(logprobs(FORWARD_BASE, task))
    reverse = _mean(logprobs(REVERSE.format(task=task.strip()), doc)) - _mean(logprobs(REVERSE_BASE, doc))
    return forward + reverse


def task_fit(logprobs: LogProbs, task: str, tools: Sequence[tuple[str, str]]) -> float | None:
    """The best fit of any offered tool ``(name, description)`` to the task; None without tools."""
    if not tools or not task.strip():
        return None
    return max(tool_fit(logprobs, task, name, description) for name, description in tools)


def _mean(values: Sequence[float]) -> float:
    return fmean(values) if values else 0.0
