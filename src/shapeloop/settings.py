"""A run's options in one object: :class:`RunSettings`, frozen, checked once when it is made.

:func:`~shapeloop.run_agent`'s keyword arguments build one; a :class:`~shapeloop.Conversation`
holds one for every request, ``run_many`` passes one per job, and the command line and the
benchmarks build theirs. A new option is a field here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Literal

from shapeloop.events import RepeatNoticed, Sink
from shapeloop.limits import Limits
from shapeloop.modes import Mode
from shapeloop.policies import DEFAULT, Policy
from shapeloop.run import OutputT
from shapeloop.toolbox import Approver


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings(Generic[OutputT]):
    """Every option of a run but its brain, tools and task, made once and shared by any number of
    runs (the requests of a conversation, the jobs of ``run_many``), as httpx keeps a client's
    configuration and pydantic-ai its ``ModelSettings``.

    ``run_agent(brain, tools, task, max_steps=6)`` builds one from its keywords;
    ``run_agent(brain, tools, task, settings=base, max_steps=6)`` takes ``base`` with the keywords
    given beside it in place of its fields (the keyword wins), as ``base.replace(max_steps=6)``
    does. Every field is checked when the object is made: a bad value raises there, before any
    model is asked, and never at a run's first step.

    Attributes:
        max_steps: steps before the run stops as ``max_steps``.
        max_result_chars: tool results longer than this are cut, with a marker.
        stuck_limit: repeats of one identical call (or barren reply) that stop the run.
        accept_answer: ``accept_answer(answer)`` returns True, or an objection put to the model (it
            costs a step); asked last, after the policies. It gets the text, or the typed object.
        approve: ``approve(call)`` decides whether a ``needs_approval`` tool may run: True, or
            False / a reason for refusing. Without it such tools are denied.
        on_event: a sink, or several, called with every event as it happens (kept as a tuple: a
            generator of sinks is read once, here).
        system: extra instructions appended to the system prompt.
        allow_tools: if given, only these tools are offered; ``deny_tools`` are never offered nor
            run (deny wins). Kept as tuples.
        deny_tools: tools never offered nor run.
        max_tokens: stop as ``budget`` once this many tokens are used.
        max_seconds: stop as ``budget`` once this much wall time has passed, also in the middle of
            a model or tool call (abandoned).
        mode: ``constrained`` (falls back to prose where the backend refuses or ignores the schema),
            ``prose``, or ``native`` (the backend's own tool calls; falls back to constrained). Kept
            as a :class:`~shapeloop.Mode`.
        schema: ``per_tool`` (each call's arguments held to its tool's schema) or ``flat`` (every
            tool's arguments left open, for a backend that takes one shape only; with
            ``batch=False``, the five-field schema).
        max_reason_chars: bound on the length of the five-field step's ``reason`` in the schema
            (``batch=False``; the calls step has no ``reason``, and one given with it is refused).
        on_repeat: called when a call or a barren reply starts repeating, before the stuck limit.
        output_type: the answer's type (a pydantic model, dataclass, ``TypedDict`` or JSON schema);
            an answer that does not validate goes back with the validator's messages.
        batch: the step shape. True (the default, the one measured best on BFCL's tune sample): the
            step is ``{"calls": [...]}``, one or several independent calls at once, or
            ``{"answer": ...}``, and the first step is asked as one raw call asks. False: the
            five-field step (``reason``, ``action``, ``tool``, ``args``, ``answer``), one call a step.
        tool_timeout: seconds one tool call may take before it ends as ``ERROR: ... timed out``
            (None: no limit).
        policies: the help this run gives the model (:mod:`shapeloop.policies`): None for
            :data:`~shapeloop.policies.DEFAULT`, ``()`` for the plain loop, or any sequence of
            policies; each change one makes is a :class:`~shapeloop.events.PolicyIntervened`
            event. Kept as a tuple (None becomes the default's policies).
        limits: bounds on schemas, replies and arguments (:class:`~shapeloop.limits.Limits`): sizes,
            integer digits, nesting, and the time a schema's ``pattern`` may take; defaults when None.

    Raises:
        ValueError: a limit below its least, a ``mode`` or ``schema`` that is not one of its words.
        TypeError: a policy that is not a :class:`~shapeloop.policies.Policy` (one policy where a
            sequence goes, or a name, included), tool names given as one string, a count that is
            not a whole number.
    """

    max_steps: int = 12
    max_result_chars: int = 4000
    stuck_limit: int = 2
    accept_answer: Callable[[OutputT], bool | str] | None = None
    approve: Approver | None = None
    on_event: Sink | Iterable[Sink] | None = None
    system: str | None = None
    allow_tools: Iterable[str] | None = None
    deny_tools: Iterable[str] | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    mode: Mode | Literal["constrained", "prose", "native"] = Mode.CONSTRAINED
    schema: Literal["per_tool", "flat"] = "per_tool"
    max_reason_chars: int | None = None
    on_repeat: Callable[[RepeatNoticed], None] | None = None
    output_type: type[OutputT] | Mapping[str, Any] | None = None
    batch: bool = True
    tool_timeout: float | None = 60.0
    policies: Sequence[Policy] | None = None
    limits: Limits | None = None

    def __post_init__(self) -> None:
        for name in ("max_steps", "stuck_limit", "max_result_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} takes a whole number, not {value!r}")
        if self.max_steps < 1 or self.stuck_limit < 1:
            raise ValueError(
                f"max_steps and stuck_limit must be at least 1, not max_steps={self.max_steps}, "
                f"stuck_limit={self.stuck_limit}"
            )
        if self.max_result_chars < 1:
            raise ValueError(f"max_result_chars must be at least 1, not {self.max_result_chars}")
        if self.max_seconds is not None and not self.max_seconds >= 0:
            raise ValueError(f"max_seconds must be 0 or more, not {self.max_seconds!r}")
        if self.tool_timeout is not None and not self.tool_timeout > 0:
            raise ValueError(
                f"tool_timeout must be more than 0 seconds (or None for no limit), not {self.tool_timeout!r}"
            )
        if self.mode not in {m.value for m in Mode}:
            raise ValueError(f"mode must be one of {', '.join(m.value for m in Mode)}, not {self.mode!r}")
        if self.schema not in ("per_tool", "flat"):
            raise ValueError(f"schema must be per_tool or flat, not {self.schema!r}")
        if self.max_reason_chars is not None and self.batch:
            raise ValueError("max_reason_chars bounds the five-field step's reason, and the calls step (batch=True, "
                             "the default) has none: pass batch=False with it, or leave it out")  # fmt: skip
        kept = {
            "mode": Mode(self.mode),
            "policies": _policies(self.policies),
            "on_event": self.sinks,
            "allow_tools": _names("allow_tools", self.allow_tools),
            "deny_tools": _names("deny_tools", self.deny_tools),
        }
        for name, value in kept.items():  # frozen: each is set once, here
            object.__setattr__(self, name, value)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """``on_event`` as the tuple of sinks it is kept as (empty for none)."""
        given = self.on_event
        if given is None or callable(given):
            return () if given is None else (given,)
        sinks = tuple(given) if isinstance(given, Iterable) else None
        if sinks is None or not all(callable(sink) for sink in sinks):
            raise TypeError(f"on_event takes a callable that takes an event, or several, not {given!r}")
        return sinks

    def replace(self, **changes: Any) -> RunSettings[OutputT]:
        """These settings with ``changes`` in place of their fields, checked as a new object is.

        Raises:
            TypeError: a name that is not a field (the message names the nearest one).
        """
        check_names(changes, who="RunSettings.replace")
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> frozenset[str]:
        """The names of the options."""
        return frozenset(f.name for f in dataclasses.fields(cls))


def settings_of(settings: RunSettings[Any] | None, options: Mapping[str, Any], *, who: str) -> RunSettings[Any]:
    """``settings`` (or the defaults) with the keyword ``options`` in place of their fields: the
    keyword wins.

    Raises:
        TypeError: ``settings`` that is not a :class:`RunSettings`, or an option it has no field for.
    """
    if settings is not None and not isinstance(settings, RunSettings):
        raise TypeError(f"{who}: settings takes a RunSettings, not a {type(settings).__name__}")
    check_names(options, who=who)
    if settings is None:
        return RunSettings(**options)
    return settings.replace(**options) if options else settings


def check_names(options: Iterable[str], *, who: str) -> None:
    """Refuse an option :class:`RunSettings` has no field for, naming the nearest one.

    Raises:
        TypeError: an unknown name.
    """
    known = RunSettings.fields()
    unknown = sorted(set(options) - known)
    if unknown:
        near = [difflib.get_close_matches(name, known, n=1) for name in unknown]
        hints = "".join(
            f" ({name}: did you mean {match[0]}?)" for name, match in zip(unknown, near, strict=True) if match
        )
        raise TypeError(f"{who} got option(s) a run does not take: {', '.join(unknown)}{hints}")


def _names(what: str, names: Iterable[str] | None) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"{what} takes a list of tool names, not the string {names!r}: write {what}=[{names!r}]")
    return tuple(names)


def _policies(policies: Sequence[Policy] | None) -> tuple[Policy, ...]:
    """The policies a run runs: the default's for None; anything but a sequence of policies refused,
    saying what to write."""
    if isinstance(policies, str):
        raise TypeError(
            f"policies takes shapeloop.policies.Policy objects, not the name {policies!r}: "
            f"shapeloop.policies.resolve({policies!r}) gives them"
        )
    if isinstance(policies, Policy):
        name = type(policies).__name__
        raise TypeError(
            f"policies takes a sequence of policies, not one: write policies=[{name}(...)], or "
            f"policies=[*shapeloop.policies.DEFAULT, {name}(...)] to add it to the default ones"
        )
    try:
        chosen = tuple(DEFAULT if policies is None else policies)
    except TypeError:
        raise TypeError(f"policies takes a sequence of Policy objects, not a {type(policies).__name__}") from None
    for policy in chosen:
        if not isinstance(policy, Policy):
            raise TypeError(f"policies takes shapeloop.policies.Policy objects, not {policy!r}: subclass Policy")
    return chosen
