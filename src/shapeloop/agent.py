"""``run_agent``: one task, from the arguments a caller gives to a finished :class:`~shapeloop.AgentRun`.

It checks the arguments, builds the run's toolbox, step schemas, prompt and policies, and hands them
to the loop (:mod:`shapeloop.loop`), which asks, runs and stops.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from shapeloop import prompts
from shapeloop.brain import (
    Brain,
    Message,
    SchemaSupport,
    as_brain,
)
from shapeloop.deprecation import warn_no_effect
from shapeloop.events import (
    RepeatNoticed,
    Sink,
)
from shapeloop.guards import Budget
from shapeloop.limits import Limits
from shapeloop.loop import Loop
from shapeloop.offer import Offer
from shapeloop.output import typed_answer
from shapeloop.policies import DEFAULT, Policy
from shapeloop.policies.seam import PolicySet
from shapeloop.run import AgentRun, Mode, OutputT, Transcript
from shapeloop.text import escape_surrogates
from shapeloop.toolbox import Approver, Toolbox
from shapeloop.tools import Tool


def run_agent(
    brain: Brain | Callable[..., Any],
    tools: Iterable[Tool],
    task: str,
    *,
    max_steps: int = 12,
    max_result_chars: int = 4000,
    stuck_limit: int = 2,
    accept_answer: Callable[[OutputT], bool | str] | None = None,
    approve: Approver | None = None,
    on_event: Sink | Sequence[Sink] | None = None,
    system: str | None = None,
    allow_tools: Iterable[str] | None = None,
    deny_tools: Iterable[str] | None = None,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
    mode: Mode | Literal["constrained", "prose", "native"] = Mode.CONSTRAINED,
    schema: Literal["per_tool", "flat"] = "per_tool",
    max_reason_chars: int | None = None,
    history: Sequence[Message] | None = None,
    on_repeat: Callable[[RepeatNoticed], None] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    output_type: type[OutputT] | Mapping[str, Any] | None = None,
    batch: bool = True,
    tool_timeout: float | None = 60.0,
    policies: Sequence[Policy] | None = None,
    limits: Limits | None = None,
    ground_ids: bool | None = None,
    ground_values: bool | None = None,
) -> AgentRun[OutputT]:
    """Run a task to an answer or to a stop with a reason.

    Args:
        brain: a :class:`~shapeloop.Brain`, or a function ``fn(messages, schema) -> str``.
        tools: the tools the model may call.
        task: what the user asks.
        max_steps: steps before the run stops as ``max_steps``.
        max_result_chars: tool results longer than this are cut, with a marker.
        stuck_limit: repeats of one identical call (or barren reply) that stop the run.
        accept_answer: ``accept_answer(answer)`` returns True, or an objection put to the model (it
            costs a step); asked last, after the policies. It gets the text, or the typed object.
        approve: ``approve(call)`` decides whether a ``needs_approval`` tool may run: True, or
            False / a reason for refusing. Without it such tools are denied.
        on_event: a sink, or several, called with every event as it happens.
        system: extra instructions appended to the system prompt.
        allow_tools: if given, only these tools are offered; ``deny_tools`` are never offered nor
            run (deny wins).
        max_tokens: stop as ``budget`` once this many tokens are used; ``max_seconds``: once this
            much wall time has passed, also in the middle of a model or tool call (abandoned).
        mode: ``constrained`` (falls back to prose where the backend refuses or ignores the schema),
            ``prose``, or ``native`` (the backend's own tool calls; falls back to constrained).
        schema: ``per_tool`` (one variant per tool) or ``flat`` (the five-field schema).
        max_reason_chars: bound on the length of ``reason`` in the schema.
        history: messages of an earlier run to continue from (``previous.messages``).
        on_repeat: called when a call or a barren reply starts repeating, before the stuck limit.
        transcript_path: append the transcript here as JSON Lines, each entry flushed as it happens;
            checked before the model is asked anything.
        output_type: the answer's type (a pydantic model, dataclass, ``TypedDict`` or JSON schema);
            an answer that does not validate goes back with the validator's messages.
        batch: the step shape. True (the default, the one measured best on BFCL's tune sample): the
            step is ``{"calls": [...]}``, one or several independent calls at once, or
            ``{"answer": ...}``, and the first step is asked as one raw call asks. False: the
            five-field step (``reason``, ``action``, ``tool``, ``args``, ``answer``), one call a step.
        tool_timeout: seconds one tool call may take before it ends as ``ERROR: ... timed out``.
        policies: the help this run gives the model (:mod:`shapeloop.policies`): None for
            :data:`~shapeloop.policies.DEFAULT`, ``()`` for the plain loop, or any tuple of
            policies; each change one makes is a :class:`~shapeloop.events.PolicyIntervened` event.
        limits: bounds on schemas, replies and arguments (:class:`~shapeloop.limits.Limits`): sizes,
            integer digits, nesting, and the time a schema's ``pattern`` may take; defaults when None.
        ground_ids: deprecated, no effect (id grounding was removed: it refused legitimate calls).
        ground_values: deprecated, no effect (value grounding was removed: it refused "tomorrow",
            "München" called as Munich, and every translation).
    """
    why = "grounding was taken out of the loop because it refused legitimate calls; pass policies=... instead"
    warn_no_effect(f"{why} (see shapeloop.policies)", stacklevel=2, prefix="run_agent(",
                   ground_ids=ground_ids, ground_values=ground_values)  # fmt: skip
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string")
    task = escape_surrogates(task)
    chosen = check_options(max_steps=max_steps, stuck_limit=stuck_limit, max_seconds=max_seconds, mode=mode,
                           policies=policies)  # fmt: skip
    toolbox = Toolbox(
        tools, allow=allow_tools, deny=deny_tools, approve=approve, max_result_chars=max_result_chars,
        timeout=tool_timeout, limits=limits,
    )  # fmt: skip
    offered = list(toolbox.tools.values())
    brain = as_brain(brain)
    flat = schema == "flat" or brain.capabilities.schema is SchemaSupport.FLAT
    typed = None if output_type is None else typed_answer(output_type, limits=limits)
    offer = _offer(offered, typed, flat=flat, batch=batch, max_reason_chars=max_reason_chars, system=system)
    sinks = as_sinks(on_event)
    earlier = [m for m in history or () if m["role"] != "system"]
    run = Loop(
        brain=brain, toolbox=toolbox, offer=offer, mode=Mode(mode), max_steps=max_steps, stuck_limit=stuck_limit,
        accept=accept_answer, sinks=sinks, budget=Budget(max_tokens=max_tokens, max_seconds=max_seconds),
        on_repeat=on_repeat, task=task, typed=typed, batch=batch,
        policies=PolicySet.start(chosen, task, offered, brain),
    )  # fmt: skip
    opening = [Message(role="system", content=offer.prompt()), *earlier]
    opening.append(Message(role="user", content=prompts.task_message(task, continued=bool(earlier))))
    if transcript_path is not None:
        run.transcript = Transcript.streaming(transcript_path)
    return run.execute(opening, transcript_path)


def _offer(
    offered: list[Tool], typed: Any, *, flat: bool, batch: bool, max_reason_chars: int | None, system: str | None
) -> Offer:
    answer_schema = None if typed is None else typed.schema
    return Offer(tools=offered, flat=flat, answer_schema=answer_schema, batch=batch,
                 max_reason_chars=max_reason_chars, system=system)  # fmt: skip


def as_sinks(on_event: Sink | Iterable[Sink] | None) -> list[Sink]:
    """``on_event`` as a list of hooks: none, one callable, or any iterable of them (read once)."""
    return [] if on_event is None else [on_event] if callable(on_event) else list(on_event)


def check_options(
    *, max_steps: int, stuck_limit: int, max_seconds: float | None, mode: str, policies: Sequence[Policy] | None
) -> tuple[Policy, ...]:
    """Check the limits, the mode and the policies of a run before it starts; the policies it runs.

    Raises:
        ValueError: a limit below its least, or a mode that is not one of :class:`~shapeloop.Mode`.
        TypeError: a policy that is not a :class:`~shapeloop.policies.Policy` (names given as a
            string included).
    """
    if max_steps < 1 or stuck_limit < 1:
        raise ValueError("max_steps and stuck_limit must be at least 1")
    if max_seconds is not None and max_seconds < 0:
        raise ValueError(f"max_seconds must be 0 or more, not {max_seconds!r}")
    if mode not in {m.value for m in Mode}:
        raise ValueError(f"mode must be one of {', '.join(m.value for m in Mode)}, not {mode!r}")
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


def opening_prompt(
    tools: Iterable[Tool],
    *,
    allow_tools: Iterable[str] | None = None,
    deny_tools: Iterable[str] | None = None,
    output_type: Any = None,
    batch: bool = True,
    system: str | None = None,
    limits: Limits | None = None,
    **options: Any,
) -> str:
    """The system prompt a :func:`run_agent` run with these options opens with: the tools it offers,
    documented, the typed answer's schema and ``system``. Other options of ``run_agent`` are taken
    and do not change it (in ``mode="native"`` the backend also renders the tools' specs itself).

    Raises:
        TypeError: an option :func:`run_agent` does not take (a misspelled ``system`` would
            otherwise be left out of the prompt without a word).
    """
    unknown = sorted(set(options) - set(inspect.signature(run_agent).parameters))
    if unknown:
        raise TypeError(f"opening_prompt got option(s) run_agent does not take: {', '.join(unknown)}")
    offered = list(Toolbox(tools, allow=allow_tools, deny=deny_tools, limits=limits).tools.values())
    typed = None if output_type is None else typed_answer(output_type, limits=limits)
    return _offer(offered, typed, flat=False, batch=batch, max_reason_chars=None, system=system).prompt()
