"""``run_agent``: one task, from the arguments a caller gives to a finished :class:`~shapeloop.AgentRun`.

It makes the run's settings (:class:`~shapeloop.RunSettings`, checked there), builds its toolbox,
step schemas, prompt and policies, and hands them to the loop (:mod:`shapeloop.loop`), which asks,
runs and stops.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from shapeloop import prompts
from shapeloop.brain import (
    Brain,
    Message,
    SchemaSupport,
    as_brain,
)
from shapeloop.deprecation import warn_no_effect
from shapeloop.guards import Budget
from shapeloop.loop import Loop
from shapeloop.offer import Offer
from shapeloop.output import typed_answer
from shapeloop.policies.seam import PolicySet
from shapeloop.run import AgentRun, Mode, OutputT, Transcript
from shapeloop.settings import RunSettings, settings_of
from shapeloop.text import escape_surrogates
from shapeloop.toolbox import Toolbox
from shapeloop.tools import Tool


def run_agent(
    brain: Brain | Callable[..., Any],
    tools: Iterable[Tool],
    task: str,
    *,
    settings: RunSettings[OutputT] | None = None,
    output_type: type[OutputT] | Mapping[str, Any] | None = None,
    history: Sequence[Message] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    ground_ids: bool | None = None,
    ground_values: bool | None = None,
    **options: Any,
) -> AgentRun[OutputT]:
    """Run a task to an answer or to a stop with a reason.

    The run's options are one :class:`~shapeloop.RunSettings`: give it as ``settings``, or give
    its fields as keywords (``max_steps=6, policies=()``), or both: a keyword takes the place of
    the field it names (``settings=base, max_steps=6`` runs ``base.replace(max_steps=6)``).

    Args:
        brain: a :class:`~shapeloop.Brain`, or a function ``fn(messages, schema) -> str``.
        tools: the tools the model may call.
        task: what the user asks.
        settings: the run's options (:class:`~shapeloop.RunSettings`, where each is documented);
            the defaults when None.
        output_type: the answer's type (a pydantic model, dataclass, ``TypedDict`` or JSON schema);
            a field of the settings, named here too so that a type checker gives the run's
            ``output`` its type.
        history: messages of an earlier run to continue from (``previous.messages``).
        transcript_path: append the transcript here as JSON Lines, each entry flushed as it happens;
            checked before the model is asked anything. One run's file, so not a setting.
        **options: fields of :class:`~shapeloop.RunSettings`, each in place of ``settings``' own.
        ground_ids: deprecated, no effect (id grounding was removed: it refused legitimate calls).
        ground_values: deprecated, no effect (value grounding was removed: it refused "tomorrow",
            "München" called as Munich, and every translation).

    Raises:
        TypeError: an option :class:`~shapeloop.RunSettings` has no field for (the nearest is
            named), and the values it refuses (see there).
        ValueError: an empty task, and the values :class:`~shapeloop.RunSettings` refuses.
    """
    why = "grounding was taken out of the loop because it refused legitimate calls; pass policies=... instead"
    warn_no_effect(f"{why} (see shapeloop.policies)", stacklevel=2, prefix="run_agent(",
                   ground_ids=ground_ids, ground_values=ground_values)  # fmt: skip
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-empty string")
    task = escape_surrogates(task)
    if output_type is not None:
        options["output_type"] = output_type
    chosen = settings_of(settings, options, who="run_agent")
    toolbox = Toolbox(
        tools, allow=chosen.allow_tools, deny=chosen.deny_tools, approve=chosen.approve,
        max_result_chars=chosen.max_result_chars, timeout=chosen.tool_timeout, limits=chosen.limits,
    )  # fmt: skip
    offered = list(toolbox.tools.values())
    brain = as_brain(brain)
    flat = chosen.schema == "flat" or brain.capabilities.schema is SchemaSupport.FLAT
    typed = None if chosen.output_type is None else typed_answer(chosen.output_type, limits=chosen.limits)
    offer = _offer(offered, typed, flat=flat, batch=chosen.batch, max_reason_chars=chosen.max_reason_chars,
                   system=chosen.system)  # fmt: skip
    earlier = [m for m in history or () if m["role"] != "system"]
    run = Loop(
        brain=brain, toolbox=toolbox, offer=offer, mode=Mode(chosen.mode), max_steps=chosen.max_steps,
        stuck_limit=chosen.stuck_limit, accept=chosen.accept_answer, sinks=list(chosen.sinks),
        budget=Budget(max_tokens=chosen.max_tokens, max_seconds=chosen.max_seconds), on_repeat=chosen.on_repeat,
        task=task, typed=typed, batch=chosen.batch,
        policies=PolicySet.start(tuple(chosen.policies or ()), task, offered, brain),
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


def opening_prompt(tools: Iterable[Tool], *, settings: RunSettings[Any] | None = None, **options: Any) -> str:
    """The system prompt a :func:`run_agent` run with these settings opens with: the tools it offers,
    documented, the typed answer's schema and ``system``. Other options are taken and do not change
    it (in ``mode="native"`` the backend also renders the tools' specs itself).

    Raises:
        TypeError: an option :class:`~shapeloop.RunSettings` has no field for (a misspelled
            ``system`` would otherwise be left out of the prompt without a word).
    """
    chosen = settings_of(settings, options, who="opening_prompt")
    toolbox = Toolbox(tools, allow=chosen.allow_tools, deny=chosen.deny_tools, limits=chosen.limits)
    typed = None if chosen.output_type is None else typed_answer(chosen.output_type, limits=chosen.limits)
    offer = _offer(list(toolbox.tools.values()), typed, flat=False, batch=chosen.batch, max_reason_chars=None,
                   system=chosen.system)  # fmt: skip
    return offer.prompt()
