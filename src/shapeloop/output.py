"""The typed answer: the caller's ``output_type`` as the answer's JSON schema and as its validator.

A pydantic model, a dataclass, a ``TypedDict`` (anything pydantic's ``TypeAdapter`` takes) is
validated by pydantic, so the caller gets an instance back; a JSON schema (a dict) is validated by
jsonschema, and the caller gets the JSON value. Either way a failure is a list of
``path: message`` lines the model can act on.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

from shapeloop import prompts
from shapeloop.limits import Limits, json_decoder, schema_problem, value_problem
from shapeloop.pattern import bounded_validator, pattern_budget
from shapeloop.text import escape_surrogates

MAX_ERRORS = 8
"""The most validation errors put to the model at once (a small model reads the first few)."""


@dataclass(frozen=True, kw_only=True)
class Checked:
    """The outcome of checking an answer: the validated object and its JSON text, or the errors."""

    value: Any = None
    text: str = ""
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TypedAnswer:
    """What a run's answer must be.

    Attributes:
        schema: the answer's JSON schema, as the step schema embeds it.
        expects_text: the answer is a JSON string, so text is never parsed as JSON.
        limits: the run's bounds; an answer beyond them (NaN, a huge integer, too long, too
            deep) is refused before it is validated.
    """

    schema: dict[str, Any]
    limits: Limits = field(default_factory=Limits)
    _adapter: TypeAdapter[Any] | None = field(default=None, repr=False)
    _validator: Any = field(default=None, repr=False)

    @property
    def expects_text(self) -> bool:
        return self.schema.get("type") == "string"

    def check(self, value: Any) -> Checked:
        """Validate ``value``; a string that holds JSON is read as that JSON (small models quote objects)."""
        if isinstance(value, str) and not self.expects_text:
            with contextlib.suppress(ValueError, RecursionError):
                value = json_decoder(self.limits).decode(value)
        problem = value_problem(value, self.limits, what="the answer")
        if problem is not None:
            return Checked(errors=(problem,))
        if self._adapter is not None:
            try:
                obj = self._adapter.validate_python(value)
            except ValidationError as exc:
                return Checked(errors=tuple(_pydantic_errors(exc)))
            return Checked(value=obj, text=self._adapter.dump_json(obj).decode())
        with pattern_budget(self.limits.pattern_seconds):  # one budget for all of the answer's patterns
            errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            return Checked(errors=tuple(f"{_path(e.absolute_path)}: {e.message}" for e in errors[:MAX_ERRORS]))
        return Checked(value=value, text=json.dumps(value, ensure_ascii=False))


def typed_answer(output_type: Any, *, limits: Limits | None = None) -> TypedAnswer:
    """The :class:`TypedAnswer` for ``output_type``: a type pydantic can validate, or a JSON schema dict.

    Its schema is checked against ``limits`` first (:func:`~shapeloop.limits.schema_problem`: size,
    depth, validity, ``$ref`` that dangle or recurse without end, patterns the engine cannot run),
    and the dict's ``pattern`` checks run without backtracking (:mod:`shapeloop.pattern`), all of
    one answer's within ``limits.pattern_seconds``.

    Raises:
        TypeError: pydantic cannot build a schema for the type.
        ValueError: the dict is not a valid JSON schema, or the schema is refused; one line.
    """
    limits = limits or Limits()
    if isinstance(output_type, Mapping):
        schema = dict(output_type)
        _check(schema, limits)
        return TypedAnswer(schema=schema, limits=limits, _validator=bounded_validator(schema, limits.pattern_seconds))
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except PydanticUserError as exc:
        why = " ".join(str(exc).split())
        raise TypeError(
            f"output_type {output_type!r} has no JSON schema ({why}): use a pydantic model, a dataclass, "
            "a TypedDict or a JSON schema dict"
        ) from exc
    _check(schema, limits)
    return TypedAnswer(schema=schema, limits=limits, _adapter=adapter)


def _check(schema: dict[str, Any], limits: Limits) -> None:
    problem = schema_problem(schema, limits)
    if problem is not None:
        raise ValueError(f"output_type's schema is refused: {problem}")


def _pydantic_errors(exc: ValidationError) -> list[str]:
    return [f"{_path(err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)[:MAX_ERRORS]]


def _path(parts: Any) -> str:
    joined = ".".join(str(p) for p in parts)
    return joined or "(root)"


def answer_problem(answer: Any, typed: TypedAnswer | None) -> tuple[tuple[str, str, str] | None, Any, str]:
    """``(problem, value, text)``: an answer checked against the output type, or for being text at all.
    ``problem`` is None, or ``(objection, feedback, kind of barren reply)``."""
    if isinstance(answer, str):
        answer = escape_surrogates(answer)  # JSON's "\ud800" decodes to a lone surrogate
    if typed is not None:
        checked = typed.check(answer)
        if checked.errors:
            objection = "the answer does not match the output type: " + "; ".join(checked.errors)
            shown = json.dumps(answer, sort_keys=True, default=str, ensure_ascii=False)
            return (objection, prompts.invalid_answer_feedback(checked.errors), "invalid-answer"), None, shown
        return None, checked.value, checked.text
    if not isinstance(answer, str):
        shown = json.dumps(answer, ensure_ascii=False)
        return ("the answer is not text", prompts.answer_not_text_feedback(), "non-text-answer"), None, shown
    if not answer.strip():
        return ("the answer is empty", prompts.empty_answer_feedback(), "empty-answer"), None, answer
    return None, answer, answer
