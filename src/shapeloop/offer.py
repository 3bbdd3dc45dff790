"""The step schemas and system prompts of one run: which tools a step offers, documents and may
call, and whether it may answer, each built once for each distinct offer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema

from shapeloop import prompts
from shapeloop.step import fallback_schemas, flat_schema, step_schema, without_answer
from shapeloop.tools import Tool

Hold = tuple[tuple[str, str, tuple[str, ...]], ...]
"""Arguments held to values at one step: ``(tool, argument, values)``."""


def held(tool: Tool, hold: Hold) -> Tool:
    """``tool`` with each argument ``hold`` names for it held to its values: an ``enum`` added to the
    argument's own schema, of the values that schema admits (a value it refuses is left out; where none
    is left, the argument is not held); the tool itself where ``hold`` changes none of its arguments."""
    properties = dict(tool.parameters.get("properties") or {})
    changed = False
    for name, argument, values in hold:
        spec = properties.get(argument) if name == tool.name else None
        if not isinstance(spec, dict):
            continue
        admits = jsonschema.Draft202012Validator(spec).is_valid
        admitted = list(dict.fromkeys(typed for v in values if (typed := _typed(v, admits)) is not None))
        if admitted and "pattern" not in spec:  # a pattern is the tool's to judge, within its time bound
            properties[argument] = {**spec, "enum": admitted}
            changed = True
    return replace(tool, parameters={**tool.parameters, "properties": properties}) if changed else tool


def _typed(value: str, admits: Callable[[Any], bool]) -> Any:
    """``value`` as the argument's schema takes it: the string, else the whole number it writes
    (``"12446"`` for an integer argument), else None."""
    if admits(value):
        return value
    number = int(value) if re.fullmatch(r"-?\d{1,18}", value) else None
    return number if number is not None and admits(number) else None


@dataclass(kw_only=True)
class Offer:
    """The step schemas and prompts of one run: :meth:`schema` and :meth:`prompt`."""

    tools: Sequence[Tool]
    flat: bool  # the backend takes a flat schema only, or the caller asked for one
    answer_schema: Mapping[str, Any] | None  # the typed answer's schema, if any
    batch: bool
    max_reason_chars: int | None
    system: str | None = None  # the caller's own instructions, appended to the prompt
    built: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    prompts: dict[frozenset[str], str] = field(default_factory=dict)

    def prompt(self, excluded: frozenset[str] = frozenset()) -> str:
        """The system prompt of a step that offers every tool not in ``excluded``: only those are
        documented (with 20 to 40 tools, the documentation is most of the prompt)."""
        key = excluded & {tool.name for tool in self.tools}
        if key not in self.prompts:
            kept = [t for t in self.tools if t.name not in key]
            self.prompts[key] = prompts.system_prompt(
                kept, prose=True, extra=self.system, answer_schema=self.answer_schema, batch=self.batch
            )
        return self.prompts[key]

    def schema(self, excluded: frozenset[str] = frozenset(), answer: bool = True, hold: Hold = ()) -> dict[str, Any]:
        """The schema of a step that may call any tool not in ``excluded``, and answer if ``answer``
        (a step left no tool always may); ``hold``: ``(tool, argument, values)``, each argument held
        to those values."""
        key = (answer, excluded & {tool.name for tool in self.tools}, hold)
        if key not in self.built:
            kept = [held(t, hold) for t in self.tools if t.name not in excluded]
            self.built[key] = self._build(kept, answer)
        return self.built[key]

    def _build(self, kept: list[Tool], answer: bool) -> dict[str, Any]:
        full = step_schema(
            kept, max_reason_chars=self.max_reason_chars, answer_schema=self.answer_schema, batch=self.batch
        )
        if not self.flat:
            return full if answer or not kept else without_answer(full)
        # flat: every tool's arguments opened; a typed answer and the batch keep their shape
        if self.answer_schema is None and not self.batch:
            return flat_schema(max_reason_chars=self.max_reason_chars)
        return fallback_schemas(full)[0]
