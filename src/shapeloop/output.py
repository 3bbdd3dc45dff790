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

import jsonschema
import jsonschema.exceptions
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

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
    """

    schema: dict[str, Any]
    _adapter: TypeAdapter[Any] | None = field(default=None, repr=False)
    _validator: Any = field(default=None, repr=False)

    @property
    def expects_text(self) -> bool:
        return self.schema.get("type") == "string"

    def check(self, value: Any) -> Checked:
        """Validate ``value``; a string that holds JSON is read as that JSON (small models quote objects)."""
        if isinstance(value, str) and not self.expects_text:
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if self._adapter is not None:
            try:
                obj = self._adapter.validate_python(value)
            except ValidationError as exc:
                return Checked(errors=tuple(_pydantic_errors(exc)))
            return Checked(value=obj, text=self._adapter.dump_json(obj).decode())
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            return Checked(errors=tuple(f"{_path(e.absolute_path)}: {e.message}" for e in errors[:MAX_ERRORS]))
        return Checked(value=value, text=json.dumps(value, ensure_ascii=False))


def typed_answer(output_type: Any) -> TypedAnswer:
    """The :class:`TypedAnswer` for ``output_type``: a type pydantic can validate, or a JSON schema dict.

    Raises:
        TypeError: pydantic cannot build a schema for the type.
        ValueError: the dict is not a valid JSON schema.
    """
    if isinstance(output_type, Mapping):
        schema = dict(output_type)
        validator_cls = jsonschema.validators.validator_for(schema)
        try:
            validator_cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            where = _path(exc.absolute_path)
            raise ValueError(f"output_type is not a valid JSON schema: {where}: {exc.message}") from exc
        return TypedAnswer(schema=schema, _validator=validator_cls(schema))
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except PydanticUserError as exc:
        why = " ".join(str(exc).split())
        raise TypeError(
            f"output_type {output_type!r} has no JSON schema ({why}): use a pydantic model, a dataclass, "
            "a TypedDict or a JSON schema dict"
        ) from exc
    return TypedAnswer(schema=schema, _adapter=adapter)


def _pydantic_errors(exc: ValidationError) -> list[str]:
    return [f"{_path(err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)[:MAX_ERRORS]]


def _path(parts: Any) -> str:
    joined = ".".join(str(p) for p in parts)
    return joined or "(root)"
