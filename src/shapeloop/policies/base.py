"""The policy seam: help for small models that a run declares, and that the loop reaches through
three hooks only.

A :class:`Policy` is handed to one run (``run_agent(..., policies=[...])``). At the run's start the
loop calls :meth:`Policy.for_run`, which returns the instance that serves that run alone (per-run
state lives there, never in a module or a class attribute). The loop then calls, each at one place:

- :meth:`Policy.shape_step` before each constrained step: which tools the step offers, whether it
  may (or must) answer, and a note the model reads at that step only;
- :meth:`Policy.check_call` before a call runs: a :class:`Refusal` is fed back instead of running it;
- :meth:`Policy.check_answer` before the caller's ``accept_answer``: an :class:`Objection` is put
  to the model, and costs a step.

Each hook sees a read-only :class:`RunView` and returns a typed change or None. Every change the
loop applies is a :class:`~shapeloop.events.PolicyIntervened` event, counted on
:attr:`shapeloop.AgentRun.interventions`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from shapeloop.brain import Message
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool, ToolCall

LogProbs = Callable[[str, str], Sequence[float]]
"""``logprobs(prefix, continuation)``: the log-probability of each token of the continuation."""

LogProbsMany = Callable[[str, Sequence[str]], Sequence[Sequence[float]]]
"""``many(prefix, continuations)``: :data:`LogProbs` of each continuation after one prefix, which a
brain may evaluate once for all of them."""


def one_by_one(logprobs: LogProbs) -> LogProbsMany:
    """:data:`LogProbsMany` from a scorer of one continuation at a time."""
    return lambda prefix, continuations: [logprobs(prefix, c) for c in continuations]


@dataclass(frozen=True, kw_only=True)
class CallOutcome:
    """A call the run made and what came back, as the model read it."""

    call: ToolCall
    status: ToolStatus
    text: str
    repeats: int = 0
    step: int = 0  # the step that made the call: the calls of one step came back together


@dataclass(frozen=True, kw_only=True)
class RunView:
    """What a hook may read of the run: a snapshot, never the loop's own state.

    Attributes:
        task: the user's request for this run.
        tools: the tools the run offers (after ``allow_tools`` / ``deny_tools``), in order.
        messages: the conversation so far, system prompt first.
        calls: every call made so far with its outcome, oldest first.
        step: the step about to be asked (``shape_step``) or being handled (the other hooks).
        max_steps: the run's step limit.
        logprobs: the brain's log-probability scorer, where it declares one (``needs={"logprobs"}``).
        logprobs_many: the same for several continuations of one prefix at once: the brain's own
            where it has one (the embedded backend evaluates the prefix once), else ``logprobs``
            one by one.
        calibration: values the brain's model was calibrated for (for example ``fit_floor``).
    """

    task: str
    tools: tuple[Tool, ...]
    messages: tuple[Message, ...]
    calls: tuple[CallOutcome, ...]
    step: int
    max_steps: int
    logprobs: LogProbs | None = None
    logprobs_many: LogProbsMany | None = None
    calibration: tuple[tuple[str, float], ...] = ()

    @property
    def last(self) -> CallOutcome | None:
        """The latest call's outcome, or None before any call."""
        return self.calls[-1] if self.calls else None

    def calibrated(self, name: str) -> float | None:
        """A calibrated value of the brain's model, or None where it has none."""
        return dict(self.calibration).get(name)


@dataclass(frozen=True, kw_only=True)
class StepShape:
    """A change to the next constrained step.

    Attributes:
        reason: why, in words a person reads in the transcript.
        tools: offer only these tools (None: leave the offer as it is).
        answer: ``may`` (unchanged), ``must`` (the step can only answer), ``never`` (it must call;
            but the run's last step may always answer: made to call there, the run would end
            unanswered).
            The step's schema holds it: in prose mode, or with native tool calls, the backend does
            not constrain the reply, and what the model replies stands.
        note: words the model reads at this step only (appended to the request, not kept in the
            conversation; the event keeps them).
        call_margin: the step calls only where the model leans to calling by more than this (its
            logits; :attr:`~shapeloop.Request.call_margin`), on a brain that declares ``margins``.
        confirm_answer: with ``call_margin``, where the lean is within it, the brain asks this with
            the lean at that token: a reason turns the step to an answer, ``""`` keeps the model's
            choice (:attr:`~shapeloop.Request.confirm_answer`). What it measures is paid only there.
            None: the margin alone turns it.
        hold: arguments held to a list of values at this step, by tool and argument name
            (``{"stock_price": {"symbol": ("ZETA", "ZTC")}}``): the step's schema lets the model
            write only those there; the tool's other arguments, and the other tools, are unchanged.
            As ``answer``, held by the schema only: the policy's ``check_call`` enforces it where the
            reply is not constrained.
    """

    reason: str
    tools: frozenset[str] | None = None
    answer: Literal["may", "must", "never"] = "may"
    note: str = ""
    call_margin: float | None = None
    confirm_answer: Callable[[float], str] | None = None
    hold: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A call refused before it runs; ``feedback`` is what the model reads instead of a result."""

    reason: str
    feedback: str


@dataclass(frozen=True, kw_only=True)
class Objection:
    """An answer put back to the model; ``feedback`` is what it reads. It costs a step."""

    reason: str
    feedback: str


class Policy:
    """Base of every policy: subclass it and override the hooks you need.

    Settings are arguments of the constructor. State a policy keeps during a run lives on the
    instance :meth:`for_run` returns (by default a shallow copy of the policy), so one policy object
    can serve many runs at once.

    Attributes:
        needs: capabilities the policy needs from the brain (``"logprobs"``). On a brain without
            them, the run says so in an event and goes on without the policy.
    """

    needs: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        """The policy's name in events, transcripts and ``--policies``: its class name, kebab-cased."""
        return re.sub(r"(?<!^)(?=[A-Z])", "-", type(self).__name__).lower()

    def for_run(self, task: str, tools: Sequence[Tool]) -> Policy:
        """The instance that serves one run: a fresh copy, so per-run state never leaks."""
        del task, tools
        return copy.copy(self)

    def shape_step(self, view: RunView) -> StepShape | None:
        """Change the next constrained step, or None."""
        del view
        return None

    def check_call(self, view: RunView, call: ToolCall) -> Refusal | None:
        """Refuse a call before it runs, or None to let it run."""
        del view, call
        return None

    def check_answer(self, view: RunView, answer: str) -> Objection | None:
        """Object to an answer before the caller's acceptor sees it, or None."""
        del view, answer
        return None

    def __repr__(self) -> str:
        return f"<policy {self.name}>"
