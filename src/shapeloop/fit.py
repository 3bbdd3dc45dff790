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

A task that shares no word with any offered tool ("who wrote Pride and Prejudice?" beside
``search_songs``) is held to a second, higher floor where one is calibrated: the words and the
likelihoods are two signs of one thing, and neither is enough alone ("Is it raining in Bergen?" beside
``get_weather`` shares no word; "Convert 100 degrees Fahrenheit to Celsius" beside ``convert_length``
shares one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from statistics import fmean

from shapeloop.grounding import identifier_words, result_words

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


def shared_words(task: str, tools: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The words the task shares with any offered tool's name or description: four letters or more,
    case and plural s aside, function words left out. A path the task names ("notes/todo.txt",
    "/etc/hostname") counts as the words "file" and "path"."""
    words = _content_words(task)
    if _PATH.search(task):
        words |= {"file", "path"}
    tool_words = _content_words(" ".join(" ".join(identifier_words(name)) + " " + doc for name, doc in tools))
    return words & tool_words


def _content_words(text: str) -> frozenset[str]:
    """Words of four letters or more (counted before a plural s comes off: "news", "logs"), case-folded,
    without plural s, function words left out."""
    long = " ".join(word for word in re.findall(r"[^\W\d_]+", text) if len(word) >= 4)
    return result_words(long) - _FUNCTION_WORDS


# Words that say nothing of what a tool does, so that sharing them ties no task to a tool.
_FUNCTION_WORDS = result_words(
    "that these those there here them their they were been being have having does done from with "
    "this what which whom whose when where than then also only just again some every each about into "
    "over under upon onto could would should will shall might must please thanks thank want like "
    "much many more most very tell give make know need"
)
# A file the task names: a name with an extension (a letter first, so "3.5" is none, and two
# characters before it, so "e.g." is none), a path from a root ("/etc/hostname", "./x", "~/notes";
# not "and/or" nor "km/h"), or a Windows path ("C:\temp").
_PATH = re.compile(
    r"(?<![\w./-])(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{0,4}(?!\w)"  # notes/todo.txt
    r"|(?<![\w.])(?:~|\.{1,2})?/[\w.-]+"  # /etc/hostname
    r"|\b[A-Za-z]:\\[\w.\\-]*"  # C:\temp\report
)


def _mean(values: Sequence[float]) -> float:
    return fmean(values) if values else 0.0
