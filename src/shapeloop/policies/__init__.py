"""Policies: the help a run gives a small model, declared per run.

``run_agent(..., policies=())`` runs the plain loop; ``policies=None`` (the default) runs
:data:`DEFAULT`. A preset is a plain tuple: compose your own (``(*SMALL_MODEL, MyPolicy())``). Each
policy lives in its own module here, with its measured effect and cost in its docstring; the
decision for each is in ``measurements/policies.json``.

Write one by subclassing :class:`Policy` and overriding any of its hooks (``shape_step``,
``check_call``, ``check_answer``); see :mod:`shapeloop.policies.base`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from shapeloop.policies.abstain import Abstain
from shapeloop.policies.base import (
    CallOutcome,
    Objection,
    Policy,
    Refusal,
    RunView,
    StepShape,
)
from shapeloop.policies.fit_floor import FitFloor
from shapeloop.policies.lookup import LookupHint
from shapeloop.policies.preset import ModelPreset
from shapeloop.policies.repeat import AnswerAfterRepeat
from shapeloop.policies.state import StateLine
from shapeloop.policies.tool_cut import ToolCut

PLAIN: tuple[Policy, ...] = ()
"""The plain loop: no help beyond the step, the extractor, repeats, the acceptor and the guards."""

SMALL_MODEL: tuple[Policy, ...] = ()
"""The policies that earned their place on BFCL's tune sample for small models (none yet: see
``measurements/policies.json`` for each one tried and why it is not here)."""

DEFAULT: tuple[Policy, ...] = (*SMALL_MODEL, ModelPreset())
"""What ``run_agent`` runs when ``policies`` is not given: :data:`SMALL_MODEL`, and the policies the
brain's model was measured to need (:class:`ModelPreset`: the catalogue's ``preset`` for the model,
declared by the brain; none for a brain that declares none)."""

# read-only tables of names: nothing here can be reassigned to change what a run does
_PRESETS: Mapping[str, tuple[Policy, ...]] = MappingProxyType(
    {"plain": PLAIN, "default": DEFAULT, "small-model": SMALL_MODEL}
)
_BUILDERS: Mapping[str, Callable[[], Policy]] = MappingProxyType(
    {
        "abstain": Abstain,
        "answer-after-repeat": AnswerAfterRepeat,
        "fit-floor": FitFloor,
        "lookup-hint": LookupHint,
        "tool-cut": ToolCut,
    }
)


def available() -> list[str]:
    """The names :func:`resolve` takes: presets first, then single policies."""
    return [*_PRESETS, *_BUILDERS]


def resolve(spec: str | Sequence[Policy] | None) -> tuple[Policy, ...]:
    """Policies from a command line's words: ``plain``, ``default``, or names joined by commas
    (``default,fit-floor``: a preset and a policy; ``-fit-floor`` takes one out, from the model's own
    preset too; ``-model-preset`` takes the model's preset out).

    Raises:
        ValueError: a name that is neither a preset nor a policy; the message lists the names.
    """
    if spec is None:
        return DEFAULT
    if not isinstance(spec, str):
        return tuple(spec)
    chosen: list[Policy] = []
    for word in (part.strip() for part in spec.split(",")):
        drop = word.startswith("-")
        name = word.removeprefix("-")
        if name in _PRESETS and not drop:
            chosen += _PRESETS[name]
        elif name in _BUILDERS:
            chosen = [p for p in chosen if p.name != name] if drop else [*chosen, _BUILDERS[name]()]
            if drop:  # nor from the model's own preset
                chosen = [ModelPreset(drop=p.drop | {name}) if isinstance(p, ModelPreset) else p for p in chosen]
        elif drop and name == ModelPreset().name:
            chosen = [p for p in chosen if not isinstance(p, ModelPreset)]
        else:
            raise ValueError(f"unknown policy {name!r}: choose from {', '.join(available())}")
    return tuple(chosen)


__all__ = [
    "DEFAULT",
    "PLAIN",
    "SMALL_MODEL",
    "Abstain",
    "AnswerAfterRepeat",
    "CallOutcome",
    "FitFloor",
    "LookupHint",
    "ModelPreset",
    "Objection",
    "Policy",
    "Refusal",
    "RunView",
    "StateLine",
    "StepShape",
    "ToolCut",
    "available",
    "resolve",
]
