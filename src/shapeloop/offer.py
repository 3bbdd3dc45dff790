"""What a constrained step offers the model: the step schema with the tools it may call, each shaped
by what the conversation so far asks for, and whether it may answer.

The tools keep their own schemas: the toolbox checks arguments against those. Only the schema the
step is held to changes, in six ways (each can be switched off, for the benchmark's variants):

- a text argument is held to the date or time layout its documentation writes ("YYYY-MM-DD"):
  :func:`~shapeloop.grounding.layout_patterns`;
- an id argument is held to one word, or to a phrase the user's words quote:
  :func:`~shapeloop.ids.id_patterns`;
- the optional arguments of a tool built with ``optional_when_named`` that nothing in the
  conversation names are left out: :func:`~shapeloop.grounding.asked_only`;
- an optional argument whose enum value (not its default) the conversation names is required:
  :func:`~shapeloop.grounding.named_required`;
- a date or time argument is held to the dates or times the conversation writes, where the value
  check would refuse any other: :func:`~shapeloop.values.held_to_written`;
- a text argument that the tool gives ``choices`` for is held to them:
  :attr:`~shapeloop.tools.Tool.choices`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from shapeloop.grounding import asked_only, is_text, layout_patterns, named_required, result_words
from shapeloop.ids import id_patterns, quoted
from shapeloop.step import fallback_schemas, flat_schema, step_schema, without_answer
from shapeloop.tools import Tool
from shapeloop.values import held_to_written

# Whether the constrained step's schema leaves out the optional arguments of a tool built with
# ``optional_when_named`` that neither the task nor a result names.
ASKED_ONLY = True
# Whether the constrained step requires an optional argument whose enum value (not its default) the
# task or a result names.
NAMED_REQUIRED = True
# Whether a text argument is held to the date or time layout its documentation writes.
LAYOUT_PATTERNS = True
# Whether an id argument is held to one word (no space).
ID_PATTERNS = True
# Whether a date or time argument is held to the dates or times the conversation writes.
WRITTEN_CHOICES = True
# Whether a tool's own ``choices`` become its arguments' enums.
TOOL_CHOICES = True


@dataclass(kw_only=True)
class Offer:
    """The step schemas of one run, built once for each distinct offer.

    Build one with :meth:`of`; ask it for a step's schema with :meth:`schema`.
    """

    tools: Sequence[Tool]  # as offered: held to their layouts
    flat: bool  # the backend takes a flat schema only, or the caller asked for one
    answer_schema: Mapping[str, Any] | None  # the typed answer's schema, if any
    batch: bool
    max_reason_chars: int | None
    trimmed: bool  # optional arguments nothing names are left out
    built: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        tools: Sequence[Tool],
        *,
        flat: bool,
        answer_schema: Mapping[str, Any] | None,
        batch: bool,
        max_reason_chars: int | None,
    ) -> Offer:
        """The offer of these tools; their date and time layouts are read once, here."""
        return cls(
            tools=[_held_to_layouts(t) for t in tools],
            flat=flat,
            answer_schema=answer_schema,
            batch=batch,
            max_reason_chars=max_reason_chars,
            trimmed=ASKED_ONLY and any(t.optional_when_named for t in tools),
        )

    def schema(
        self,
        excluded: frozenset[str] = frozenset(),
        answer: bool = True,
        given: str | None = None,
        checked: str | None = None,
        asked: str | None = None,
    ) -> dict[str, Any]:
        """The schema of a step that may call any tool not in ``excluded``, and answer if ``answer``;
        ``given`` is the conversation so far (the task and the results), None before it starts;
        ``checked`` is what the value check reads a call's dates and times against, None where values
        are not checked; ``asked`` is the user's own words in it (not the results), ``given`` where
        None."""
        words = result_words(given) if given is not None and self.trimmed else None
        said = given if asked is None else asked
        kept = [_as_offered(t, given, words, checked, said) for t in self.tools if t.name not in excluded]
        key = (answer, *((t.name, json.dumps(t.parameters, sort_keys=True, default=str)) for t in kept))
        if key not in self.built:
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


def _held_to_layouts(tool: Tool) -> Tool:
    """The tool with a pattern for every date or time layout its documentation writes, for the
    constrained step only: the toolbox checks the arguments against the tool's own schema."""
    parameters = layout_patterns(tool.parameters) if LAYOUT_PATTERNS else tool.parameters
    return tool if parameters is tool.parameters else dataclasses.replace(tool, parameters=parameters)


def _as_offered(
    tool: Tool, given: str | None, words: frozenset[str] | None, checked: str | None, said: str | None
) -> Tool:
    """The tool as the constrained step offers it once there is a conversation (``given``): without
    the optional arguments nothing asks for (``words``, those of ``given``, where the run trims
    them), with an optional argument required whose enum value it names, with its date and time
    arguments held to the values ``checked`` writes, with its ids held to one word or a phrase the
    user's words (``said``) quote, and with the arguments the tool gives ``choices`` for held to them."""
    parameters = tool.parameters
    if ID_PATTERNS:
        parameters = id_patterns(parameters, quoted(said) if said else ())
    if checked is not None and WRITTEN_CHOICES:  # the arguments the check reads: those the tool requires
        parameters = held_to_written(parameters, checked)
    if given is not None and words is not None and tool.optional_when_named:
        parameters = asked_only(parameters, words, given)
    if given is not None and NAMED_REQUIRED:  # before the choices: only the tool's own enums count
        parameters = named_required(parameters, given)
    if said is not None and TOOL_CHOICES and tool.choices is not None:
        parameters = _chosen(tool, parameters, tool.choices(said))
    return tool if parameters is tool.parameters else dataclasses.replace(tool, parameters=parameters)


def _chosen(tool: Tool, parameters: Mapping[str, Any], choices: object) -> Mapping[str, Any]:
    """``parameters`` with each text property that ``choices`` gives values for (and that has no enum
    or const of its own) held to those of them its own schema takes; the same object where none is.

    Raises:
        TypeError: ``choices`` is not a mapping of argument names to lists of text.
    """
    if not isinstance(choices, Mapping) or any(
        isinstance(v, str) or not isinstance(v, Sequence) for v in choices.values()
    ):
        raise TypeError(f"tool {tool.name!r}: choices must return a mapping of argument names to lists of text, "
                        f"not {choices!r:.200}")  # fmt: skip
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return parameters
    held = {}
    for name, offered in choices.items():
        schema = properties.get(name)
        if not isinstance(schema, Mapping) or not is_text(schema) or {"enum", "const"} & schema.keys():
            continue
        takes = jsonschema.validators.validator_for(schema)(schema).is_valid
        values = [value for value in dict.fromkeys(offered) if isinstance(value, str) and takes(value)]
        if values:
            kept = {key: value for key, value in schema.items() if key not in ("pattern", "format", "type")}
            held[name] = {**kept, "type": "string", "enum": values}
    return {**parameters, "properties": {**properties, **held}} if held else parameters
