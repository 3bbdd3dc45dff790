"""instructor: a validated step from any provider instructor supports, with its validation retries
feeding the error back to the model, and its token usage counted in the run.

instructor takes a pydantic model (``response_model``), and the loop asks with a JSON schema (one
variant per tool, the typed answer, the batch). So each schema gets its own response model, made once
per brain: it declares the run's schema as its own and validates with it.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
from pydantic import BaseModel, ConfigDict, model_validator

from shapeloop.brain import Finish, Message, Reply, Usage
from shapeloop.errors import BackendError, BackendUnavailable
from shapeloop.step import flat_schema


class InstructorBrain:
    """A brain that asks instructor for a step.

    The response model of each question is made from its schema (the flat step schema for a prose
    question); instructor's mode decides how it is asked (``JSON`` puts the schema in the prompt and
    asks for a JSON object; ``TOOLS`` uses a tool call; ``MD_JSON`` reads a fenced block). A reply
    that does not validate is sent back with the validation error, up to ``max_retries`` times.

    Args:
        model: the model name.
        client: an instructor client (``instructor.from_openai(...)``, ``instructor.from_provider``);
            by default one is made for an OpenAI-compatible server at ``base_url``.
        base_url: the OpenAI-compatible API root when no client is given.
        api_key: the key for that server (``$OPENAI_API_KEY``, or a placeholder for local ones).
        mode: instructor's mode name when no client is given: ``TOOLS`` (the default: the step is
            a forced function call, which servers constrain), ``JSON`` or ``MD_JSON``.
        max_retries: validation retries.
        max_tokens: bound on generated tokens per request.
        temperature: sampling temperature.
    """

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str | None = None,
        mode: str = "TOOLS",
        max_retries: int = 2,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> None:
        if client is None:
            try:
                import instructor
                import openai
            except ImportError as exc:
                raise BackendUnavailable(
                    "instructor is not installed: pip install 'shapeloop[instructor]'", backend="instructor"
                ) from exc
            key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key=key), mode=instructor.Mode[mode])
        self.client = client
        self.model = model
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._models: dict[str, type[BaseModel]] = {}

    def close(self) -> None:
        """Close the underlying client's connections, when it has them."""
        close = getattr(getattr(self.client, "client", None), "close", None)
        if callable(close):
            close()

    def ask(self, messages: Sequence[Message], schema: Mapping[str, Any] | None) -> Reply:
        """Ask for a step valid under ``schema``; the reply text is the step as JSON."""
        schema = flat_schema() if schema is None else schema
        key = json.dumps(schema, sort_keys=True)
        if key not in self._models:
            self._models[key] = response_model(schema)
        try:
            step, completion = self.client.chat.completions.create_with_completion(
                model=self.model, messages=[dict(m) for m in messages], response_model=self._models[key],
                max_retries=self.max_retries, max_tokens=self.max_tokens, temperature=self.temperature,
            )  # fmt: skip
        except Exception as exc:
            raise _translate(exc) from exc
        text = json.dumps(step.model_dump(), ensure_ascii=False)
        return Reply(text=text, usage=_usage(completion), finish=Finish.STOP, engine="instructor")


def response_model(schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic model whose JSON schema is ``schema`` and whose validation is ``schema``'s.

    instructor sends the model's JSON schema (as the function's parameters, a ``response_format`` or
    in the prompt, by mode) and feeds a validation error back to the model; both are then the run's.
    """
    declared = {"title": "Step", **copy.deepcopy(dict(schema))}
    validator = jsonschema.validators.validator_for(declared)(declared)

    class Step(BaseModel):
        """One step: call one tool, make several calls, or give the answer."""

        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _matches_the_schema(cls, data: Any) -> Any:
            problem = _explain(validator, declared, data)
            if problem is not None:
                raise ValueError(problem)
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(declared)

    return Step


def _explain(validator: Any, schema: Mapping[str, Any], data: Any) -> str | None:
    """What is wrong with ``data``, said of the variant it meant (the one with its action and tool)."""
    errors = list(validator.iter_errors(data))
    if not errors:
        return None
    meant = _variant_meant(schema, data)
    if meant is not None:
        errors = list(validator.evolve(schema={**meant, "$defs": schema.get("$defs", {})}).iter_errors(data)) or errors
    errors.sort(key=jsonschema.exceptions.relevance)
    return "; ".join(f"{'/'.join(str(p) for p in e.absolute_path) or 'the step'}: {e.message}" for e in errors[:3])


def _variant_meant(schema: Mapping[str, Any], data: Any) -> Mapping[str, Any] | None:
    if not isinstance(data, dict):
        return None
    for variant in schema.get("anyOf", ()):
        fixed = {
            k: v["const"] for k, v in variant.get("properties", {}).items() if k in ("action", "tool") and "const" in v
        }
        if fixed and all(data.get(k) == v for k, v in fixed.items()):
            return variant  # type: ignore[no-any-return]
    return None


def _translate(exc: Exception) -> BackendError:
    name = type(exc).__name__
    if name in ("APIConnectionError", "ConnectError"):
        return BackendUnavailable(f"instructor cannot reach the server: {exc}", backend="instructor")
    if name == "InstructorRetryException":
        return BackendError(f"no valid step after instructor's retries: {exc}", backend="instructor")
    return BackendError(f"instructor failed: {name}: {exc}", backend="instructor")


def _usage(completion: Any) -> Usage | None:
    raw = getattr(completion, "usage", None)
    if raw is None:
        return None
    details = getattr(raw, "prompt_tokens_details", None)
    return Usage(
        prompt_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0),
    )
