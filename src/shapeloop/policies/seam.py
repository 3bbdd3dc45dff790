"""How the loop reaches a run's policies: each hook called at one place, every change an event.

:class:`PolicySet` holds the per-run instances, keeps the calls and results the policies read (the
:class:`~shapeloop.policies.RunView`), combines what the policies ask of a step, and emits a
:class:`~shapeloop.events.PolicyIntervened` event for each change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shapeloop.brain import Brain, Message
from shapeloop.events import Event, PolicyIntervened
from shapeloop.offer import Hold
from shapeloop.policies.base import CallOutcome, Objection, Policy, Refusal, RunView, StepShape, one_by_one
from shapeloop.toolbox import ToolStatus
from shapeloop.tools import Tool, ToolCall

Emit = Callable[[Event], None]


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What the policies together ask of the next step."""

    excluded: frozenset[str] = frozenset()  # tools the step does not offer
    may_answer: bool = True
    note: str = ""  # words the model reads at this step only
    leans: tuple[Lean, ...] = ()  # the decision margins the policies ask, in their order
    hold: Hold = ()  # (tool, argument, the values it may take)

    @property
    def call_margin(self) -> float | None:
        """The margin asked of the brain: the largest any policy asks (each is checked in :meth:`confirm`)."""
        return max((lean.margin for lean in self.leans), default=None)

    @property
    def margins_by(self) -> str:
        """The policy that asked for the largest margin ("" for none): where the brain turned the step
        without asking :meth:`confirm`, the margin it held was that one."""
        return max(self.leans, key=lambda lean: lean.margin).policy if self.leans else ""

    def confirm(self, lean: float) -> tuple[str, str]:
        """Whether a lean to calling within :attr:`call_margin` turns the step to an answer: the first
        policy whose margin holds the lean and whose check (if it has one) gives a reason decides,
        as ``(policy, reason)``; ``("", "")`` keeps the model's choice."""
        for asked in self.leans:
            if lean <= asked.margin:
                why = asked.confirm(lean) if asked.confirm is not None else ""
                if asked.confirm is None or why:
                    within = f"not more than {asked.policy}'s margin {asked.margin:.2f}"
                    return asked.policy, f"{within}, and {why}" if why else within
        return "", ""


@dataclass(frozen=True)
class Lean:
    """One policy's decision margin, and the check that must agree before it turns a step."""

    policy: str
    margin: float
    confirm: Callable[[float], str] | None = None


@dataclass(kw_only=True)
class PolicySet:
    """The policies of one run, each a per-run instance from :meth:`Policy.for_run`."""

    active: list[Policy]
    missing: list[tuple[Policy, frozenset[str]]]  # left out: the brain lacks what they need
    task: str
    tools: tuple[Tool, ...]
    outcomes: list[CallOutcome] = field(default_factory=list)
    preset: tuple[str, ...] = ()  # the names a ModelPreset added, for the event at the start

    @classmethod
    def start(cls, policies: Sequence[Policy], task: str, tools: Sequence[Tool], brain: Brain) -> PolicySet:
        """The per-run instances of ``policies``, less those whose needs the brain does not declare;
        a :class:`~shapeloop.policies.ModelPreset` becomes the policies the brain's model declares
        (:attr:`~shapeloop.Capabilities.preset`), less those the run names already."""
        offers = _offers(brain)
        active, missing = [], []
        expanded, preset = _expanded(policies, brain)
        for policy in expanded:
            lacking = policy.needs - offers
            if lacking:
                missing.append((policy, lacking))
            else:
                active.append(policy.for_run(task, tools))
        return cls(active=active, missing=missing, task=task, tools=tuple(tools), preset=preset)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the policies that run."""
        return tuple(policy.name for policy in self.active)

    def started(self, brain: Brain) -> list[Event]:
        """An event for the model's preset where it added policies, and for each policy left out for
        what the brain lacks."""
        added: list[Event] = [
            PolicyIntervened(step=0, policy=name, hook="for_run", change="on for this model",
                             reason=f"the preset {type(brain).__name__} declares for its model (the catalogue's)")
            for name in self.preset
        ]  # fmt: skip
        return added + [
            PolicyIntervened(
                step=0,
                policy=policy.name,
                hook="for_run",
                change="left out",
                reason=f"it needs {', '.join(sorted(lacking))}, which {type(brain).__name__} does not declare",
            )
            for policy, lacking in self.missing
        ]

    @staticmethod
    def counts(events: Iterable[Event]) -> dict[str, int]:
        """Interventions by policy name (a policy left out counts none)."""
        counted = Counter(e.policy for e in events if isinstance(e, PolicyIntervened) and e.hook != "for_run")
        return dict(counted)

    def view(self, *, messages: Sequence[Message], step: int, max_steps: int, brain: Brain) -> RunView:
        """A read-only snapshot of the run for the hooks."""
        declared = brain.capabilities
        scorer: Any = getattr(brain, "continuation_logprobs", None) if declared.logprobs else None
        many: Any = getattr(brain, "continuations_logprobs", None) if scorer is not None else None
        return RunView(
            task=self.task, tools=self.tools, messages=tuple(dict(m) for m in messages),  # type: ignore[misc]
            calls=tuple(self.outcomes), step=step, max_steps=max_steps, logprobs=scorer,
            logprobs_many=many if callable(many) else one_by_one(scorer) if callable(scorer) else None,
            calibration=declared.calibration,
        )  # fmt: skip

    def record(self, call: ToolCall, status: ToolStatus, text: str, repeats: int, step: int) -> None:
        """Keep a call's outcome, made at ``step``, for later views."""
        self.outcomes.append(CallOutcome(call=call, status=status, text=text, repeats=repeats, step=step))

    def shape_step(self, view: RunView, emit: Emit) -> Shape:
        """What every policy asks of the next step, combined: the tools all of them offer; answer only
        where one says so; no answer where one says so, some tool is left and the step is not the
        run's last (made to call there, the run would end unanswered); the notes joined."""
        names = frozenset(tool.name for tool in self.tools)
        last = view.step >= view.max_steps
        offered, must, never, notes = names, False, False, []
        leans: list[Lean] = []
        held: dict[tuple[str, str], tuple[str, ...]] = {}
        for policy in self.active:
            shape = policy.shape_step(view)
            if shape is None:
                continue
            if last and shape.answer == "never":  # made to call there, the run would end unanswered
                shape = replace(shape, answer="may")
            emit(_intervened(view.step, policy, "shape_step", _described(shape, names), shape.reason))
            offered &= names if shape.tools is None else shape.tools
            must |= shape.answer == "must"
            never |= shape.answer == "never"
            if shape.note:
                notes.append(shape.note)
            if shape.call_margin is not None:
                leans.append(Lean(policy.name, shape.call_margin, shape.confirm_answer))
            for tool, arguments in (shape.hold or {}).items():
                for argument, values in arguments.items():
                    held.setdefault((tool, argument), tuple(values))  # the first policy's hold stands
        hold = tuple((tool, argument, values) for (tool, argument), values in held.items() if tool in names)
        leaned = Shape(leans=tuple(leans), hold=hold)
        if must:
            return replace(leaned, excluded=names, may_answer=True, note="\n".join(notes))
        return replace(leaned, excluded=names - offered, may_answer=not (never and offered), note="\n".join(notes))

    def check_call(self, view: RunView, call: ToolCall, emit: Emit) -> Refusal | None:
        """The first policy's refusal of ``call``, or None."""
        for policy in self.active:
            refusal = policy.check_call(view, call)
            if refusal is not None:
                emit(_intervened(view.step, policy, "check_call", f"refused {call}", refusal.reason))
                return refusal
        return None

    def check_answer(self, view: RunView, answer: str, emit: Emit) -> Objection | None:
        """The first policy's objection to ``answer``, or None."""
        for policy in self.active:
            objection = policy.check_answer(view, answer)
            if objection is not None:
                emit(_intervened(view.step, policy, "check_answer", "objected to the answer", objection.reason))
                return objection
        return None


def _expanded(policies: Sequence[Policy], brain: Brain) -> tuple[list[Policy], tuple[str, ...]]:
    """``policies`` with each :class:`~shapeloop.policies.ModelPreset` in place of the policies the
    brain declares for its model (those the run names already left out), and the names it added."""
    from shapeloop.policies import ModelPreset, resolve  # the package imports this module's users

    if not any(isinstance(policy, ModelPreset) for policy in policies):
        return list(policies), ()
    declared = brain.capabilities.preset
    named = {policy.name for policy in policies}
    dropped = {name for p in policies if isinstance(p, ModelPreset) for name in p.drop}
    offered = list(resolve(",".join(declared))) if declared else []
    fresh = [policy for policy in offered if policy.name not in named | dropped]
    out: list[Policy] = []
    for policy in policies:
        out += fresh if isinstance(policy, ModelPreset) else [policy]
        if isinstance(policy, ModelPreset):
            fresh = []  # a second placeholder adds nothing more
    return out, tuple(policy.name for policy in out if policy.name not in named)


def _offers(brain: Brain) -> frozenset[str]:
    """What the brain declares, and has, that a policy may need: ``logprobs`` (declared, with a
    ``continuation_logprobs`` scorer to call), ``margins`` (declared) and each calibrated value by name
    (``fit_floor``, ``call_margin``)."""
    declared = brain.capabilities
    scorer = callable(getattr(brain, "continuation_logprobs", None))
    margins = {"margins"} if declared.margins else set()
    logprobs = {"logprobs"} if declared.logprobs and scorer else set()
    return frozenset(logprobs | margins | {name for name, _ in declared.calibration})


def _intervened(step: int, policy: Policy, hook: str, change: str, reason: str) -> PolicyIntervened:
    return PolicyIntervened(step=step, policy=policy.name, hook=hook, change=change, reason=reason)


def _described(shape: StepShape, names: frozenset[str]) -> str:
    """A step shape in a few words, for the event."""
    parts = []
    if shape.tools is not None:
        parts.append(f"offered {len(shape.tools & names)} of {len(names)} tools")
    if shape.answer == "must":
        parts.append("answer only")
    elif shape.answer == "never":
        parts.append("no answer")
    if shape.note:
        parts.append(f"note: {shape.note}")
    if shape.call_margin is not None:
        checked = ", or where the policy's check says a call is right" if shape.confirm_answer is not None else ""
        parts.append(f"call only with a lean above {shape.call_margin:.2f}{checked}")
    for tool, arguments in (shape.hold or {}).items():
        for argument, values in arguments.items():
            parts.append(f"held {tool}.{argument} to {len(values)} values")
    return "; ".join(parts) or "no change"
