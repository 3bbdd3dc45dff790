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
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import jsonschema
import jsonschema.exceptions
from pydantic import BaseModel, ConfigDict, model_validator

from shapeloop.backends._common import ErrorTable, mapped_errors
from shapeloop.brain import BaseBrain, Capabilities, Constraint, Finish, Reply, Request, SchemaSupport, Usage
from shapeloop.errors import BackendError, BackendTimeout, BackendUnavailable, SchemaRefused


class InstructorBrain(BaseBrain):
    """A brain that asks instructor for a step.

    The response model of each question is made from its schema (:func:`response_model`);
    instructor's mode decides how it is asked (``JSON`` puts the schema in the prompt and asks for a
    JSON object; ``TOOLS`` uses a tool call; ``MD_JSON`` reads a fenced block). A reply that does
    not validate is sent back with the validation error, up to ``max_retries`` times.

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
        timeout: seconds to wait for one reply, when no client is given.
        client_retries: the openai client's own retries of a failed request (a timeout, 429, 5xx)
            when no client is given.
        transport: an httpx transport for the client made here (tests pass ``httpx.MockTransport``).
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
        timeout: float = 600.0,
        client_retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        try:
            import instructor
            import openai
        except ImportError as exc:
            raise BackendUnavailable(
                "instructor is not installed: pip install 'shapeloop[instructor]'", backend="instructor"
            ) from exc
        self._owned: Any = None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            # openai 3 types http_client as httpx2's client and takes httpx's as well
            http: Any = httpx.Client(
                transport=transport, timeout=timeout, event_hooks={"response": [_json_only(openai)]}
            )
            self._owned = openai.OpenAI(base_url=base_url, api_key=key, http_client=http, max_retries=client_retries)
            client = instructor.from_openai(self._owned, mode=instructor.Mode[mode])
        self.client = client
        self._errors = _errors(instructor, openai)
        self.model = model
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._models: dict[str, type[BaseModel]] = {}

    capabilities = Capabilities(schema=SchemaSupport.FULL, exclusive=False)  # a server takes concurrent requests

    def close(self) -> None:
        """Close the client this brain made (a client passed in stays its owner's to close)."""
        if self._owned is not None:
            self._owned.close()

    def ask(self, request: Request) -> Reply:
        """Ask for a step valid under the request's schema, or for prose when there is none; the
        reply text is the step as JSON."""
        if request.tools is not None:
            raise SchemaRefused("instructor takes no native tools here", backend="instructor")
        options = {
            "model": self.model, "messages": [dict(m) for m in request.messages], "max_retries": self.max_retries,
            "max_tokens": self.max_tokens, "temperature": self.temperature,
        }  # fmt: skip
        with mapped_errors(self._errors, backend="instructor"):
            if request.schema is None:
                return _prose(self.client.chat.completions.create(response_model=None, **options))
            model = self._model(request.schema)
            step, completion = self.client.chat.completions.create_with_completion(response_model=model, **options)
        text = json.dumps(step.model_dump(), ensure_ascii=False)
        return Reply(text=text, usage=_usage(completion), finish=Finish.STOP, applied=Constraint.SCHEMA,
                     engine="instructor")  # fmt: skip

    def _model(self, schema: Mapping[str, Any]) -> type[BaseModel]:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._models:
            self._models[key] = response_model(schema)
        return self._models[key]


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


def _errors(instructor: Any, openai: Any) -> ErrorTable:
    """How instructor's and the openai client's errors become ours, specific types first."""
    from instructor.core import InstructorError, InstructorRetryException

    return (
        (openai.APITimeoutError, BackendTimeout, "the server did not answer in time (the request timed out): {exc}"),
        (openai.APIConnectionError, BackendUnavailable, "instructor cannot reach the server: {exc}"),
        (openai.AuthenticationError, BackendUnavailable, "the server refused the API key ({exc}): set OPENAI_API_KEY"),
        (openai.NotFoundError, BackendUnavailable, "no such model or endpoint ({exc}): check --model and --base-url"),
        (openai.APIStatusError, BackendError, "the server answered {exc.status_code}: {exc}"),
        (openai.APIResponseValidationError, BackendError, "{exc}"),
        (InstructorRetryException, BackendError, "no valid step after instructor's retries: {exc}"),
        (openai.OpenAIError, BackendError, "the openai client failed: {exc!r}"),
        (InstructorError, BackendError, "instructor failed: {exc!r}"),
    )


def _json_only(openai: Any) -> Callable[[httpx.Response], None]:
    """A response hook: a 2xx body that is not JSON is the server's error, not a reply (the openai
    client would hand the text on, and instructor would fail on it far from the cause)."""

    def check(response: httpx.Response) -> None:
        if response.is_success:
            response.read()
            try:
                json.loads(response.content)
            except ValueError:
                message = (
                    f"the server answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
                )
                raise openai.APIResponseValidationError(response, response.text, message=message) from None

    return check


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


def _prose(completion: Any) -> Reply:
    choice = completion.choices[0]
    return Reply(
        text=choice.message.content or "",
        usage=_usage(completion),
        finish=Finish.LENGTH if choice.finish_reason == "length" else Finish.STOP,
        applied=Constraint.NONE,
        engine="instructor",
    )
